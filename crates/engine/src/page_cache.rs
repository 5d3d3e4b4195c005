//! The page cache: files of 4 KiB pages, each page clean, dirty, under
//! writeback (or dirty again while under writeback), or being read. Only
//! cached pages are stored, so memory follows the budget, not file sizes.
//! Reclaim is CLOCK over a queue of clean pages.

use crate::ids::{DeviceId, FileId, IoId, PageIndex, WbId};
use crate::time::Instant;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

pub const PG_DIRTY: u8 = 1;
pub const PG_WRITEBACK: u8 = 2;
/// Being read from the device; not yet valid.
pub const PG_READING: u8 = 4;
/// Used since the reclaim hand last passed (CLOCK's second chance).
pub const PG_REFERENCED: u8 = 8;
/// Has an entry in the reclaim queue.
pub const PG_IN_LRU: u8 = 16;

/// Largest file, in pages (16 TiB): ranges beyond it are rejected.
pub const MAX_FILE_PAGES: u64 = 1 << 32;

/// A cached page: its state and the frame (slot of the cache's memory)
/// holding its data. Frames are the runtime's business; the engine only
/// hands them out and takes them back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Page {
    pub flags: u8,
    pub frame: u32,
}

#[derive(Clone, Debug)]
pub struct CachedFile {
    pub device: DeviceId,
    pub wb: WbId,
    /// Size in bytes, including extensions not yet written back.
    pub size: u64,
    pub pages: BTreeMap<PageIndex, Page>,
    /// Dirty pages, for the flusher's scans.
    pub dirty: BTreeSet<PageIndex>,
    /// When the file went from clean to dirty (Linux's inode dirtied_when).
    pub dirtied_when: Option<Instant>,
    /// Where the flusher continues in this file.
    pub writeback_index: PageIndex,
    /// Writes in flight for this file, by id (ids grow monotonically).
    pub inflight_writes: BTreeSet<IoId>,
    /// Error sequence: bumped on every failed write-back (errseq_t).
    pub err_seq: u64,
    pub last_err: Option<crate::action::IoErrorKind>,
    /// A failed read, reported to the next reader that misses.
    pub read_error: Option<crate::action::IoErrorKind>,
    /// Handles open on the file.
    pub open_handles: u32,
    /// Retired by `evict_file`: never used again.
    pub evicted: bool,
}

impl CachedFile {
    pub fn new(device: DeviceId, wb: WbId, size: u64) -> CachedFile {
        CachedFile {
            device,
            wb,
            size,
            pages: BTreeMap::new(),
            dirty: BTreeSet::new(),
            dirtied_when: None,
            writeback_index: 0,
            inflight_writes: BTreeSet::new(),
            err_seq: 0,
            last_err: None,
            read_error: None,
            open_handles: 0,
            evicted: false,
        }
    }

    pub fn flags(&self, page: PageIndex) -> Option<u8> {
        self.pages.get(&page).map(|p| p.flags)
    }

    pub fn flags_mut(&mut self, page: PageIndex) -> Option<&mut u8> {
        self.pages.get_mut(&page).map(|p| &mut p.flags)
    }

    /// The next dirty page at or after `from` that is not under writeback.
    pub fn next_writable(&self, from: PageIndex) -> Option<PageIndex> {
        self.dirty
            .range(from..)
            .find(|&&p| self.flags(p).is_some_and(|f| f & PG_WRITEBACK == 0))
            .copied()
    }
}

/// The CLOCK reclaim queue over clean pages, bounded by the cache size
/// because a page is queued at most once (PG_IN_LRU).
#[derive(Clone, Debug, Default)]
pub struct ReclaimQueue {
    queue: VecDeque<(FileId, PageIndex)>,
}

impl ReclaimQueue {
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn push(&mut self, file: FileId, page: PageIndex, flags: &mut u8) {
        if *flags & PG_IN_LRU == 0 {
            *flags |= PG_IN_LRU;
            self.queue.push_back((file, page));
        }
    }

    /// Re-queues an entry that keeps its PG_IN_LRU flag (second chance).
    pub fn push_back_raw(&mut self, file: FileId, page: PageIndex) {
        self.queue.push_back((file, page));
    }

    pub fn pop(&mut self) -> Option<(FileId, PageIndex)> {
        self.queue.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_writable_skips_writeback() {
        let mut f = CachedFile::new(DeviceId(0), WbId(0), 0);
        for p in 0..4 {
            f.pages.insert(
                p,
                Page {
                    flags: PG_DIRTY,
                    frame: p as u32,
                },
            );
            f.dirty.insert(p);
        }
        f.pages.insert(
            1,
            Page {
                flags: PG_DIRTY | PG_WRITEBACK,
                frame: 1,
            },
        );
        assert_eq!(f.next_writable(1), Some(2));
        assert_eq!(f.next_writable(4), None);
    }

    #[test]
    fn reclaim_queue_holds_a_page_once() {
        let mut q = ReclaimQueue::default();
        let mut flags = 0u8;
        q.push(FileId(0), 3, &mut flags);
        q.push(FileId(0), 3, &mut flags);
        assert_eq!(q.len(), 1);
    }
}

/// Frame numbers: never-used ones are handed out in order, freed ones reused
/// first, so the table is as large as the most pages ever cached at once.
#[derive(Clone, Debug, Default)]
pub struct Frames {
    next_unused: u32,
    free: Vec<u32>,
}

impl Frames {
    pub fn alloc(&mut self) -> u32 {
        if let Some(frame) = self.free.pop() {
            return frame;
        }
        let frame = self.next_unused;
        self.next_unused = self.next_unused.checked_add(1).expect("frames fit in u32");
        frame
    }

    pub fn free(&mut self, frame: u32) {
        debug_assert!(frame < self.next_unused);
        self.free.push(frame);
    }
}
