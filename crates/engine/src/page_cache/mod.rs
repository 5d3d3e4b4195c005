//! The page cache: files of 4 KiB pages kept as runs, like Linux's large
//! folios, and the one owner of their counts.
//!
//! - A run is a stretch of contiguous cached pages of one file in one
//!   state (clean, dirty, under writeback, dirty again while under
//!   writeback, or being read) whose data sits in contiguous frames. It
//!   is one map entry, so dirtying, writing back, completing or reclaiming
//!   a 1 MiB request touches a few entries, not 256 pages.
//! - Operations on a page range first split runs at the range's edges,
//!   change the runs inside, then merge neighbours that ended up alike
//!   (same flags, frames following on, no I/O in flight: a run under
//!   writeback or being read is one request, as a bio is).
//! - Only cached pages are stored, so memory follows the budget, not file
//!   sizes. Per-file counters and an index of dirty runs let the flusher
//!   and the accounting skip clean runs.
//! - [`PageCache`] owns the files, the frames, the two lists reclaim
//!   walks (lru.rs), the shadows of evicted pages (workingset.rs), the
//!   budget, and every page count: cache-wide and per writeback context.
//!   A count changes in one place, [`PageCache::account`], after a file's
//!   pages changed.
//!
//! Frames (slots of the cache's memory, the runtime's business) are handed
//! out in ranges (frame_space.rs), so a page's frame is its run's first
//! frame plus its offset.
//!
//! Files here: the run and its flags (run.rs), the changes that split
//! and join runs (change.rs), a file's runs and look-ups (file.rs, over
//! run_map.rs), a write's dirtying and copies (dirty.rs), what a
//! truncation or invalidation drops (truncate.rs); this file
//! holds the owner and its counts.

mod change;
mod check;
mod dirty;
mod file;
mod frame_notes;
mod frame_space;
mod hand;
mod lru;
mod page_lock;
mod reclaim_queue;
mod run;
mod run_map;
mod stable;
mod truncate;
mod workingset;
mod writeback;

pub(crate) use dirty::Dirtied;
pub use file::CachedFile;
pub use hand::{RECLAIM_BATCH, RECLAIM_QUEUE_SLACK};
pub use lru::SHRINK_ACTIVE_BATCH;
pub(crate) use page_lock::PageLock;
pub use run::{
    PageCounts, PageFlags, PageRun, Run, MAX_FILE_PAGES, PG_ACTIVE, PG_DIRTY, PG_DROPBEHIND,
    PG_IN_LRU, PG_LOCKED, PG_READING, PG_REFERENCED, PG_RESERVED, PG_WRITEBACK,
};
pub(crate) use stable::{write_over, WriteOver};
pub(crate) use writeback::write_bytes;

use crate::config::Lru;
use crate::ids::{FileId, WbId};
use frame_notes::FrameNotes;
use frame_space::FrameSpace;
use reclaim_queue::ReclaimQueue;
use workingset::Workingset;

/// A writeback context's pages, by state (Linux's wb_stat counters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WbPages {
    pub dirty: u64,
    pub writeback: u64,
    /// Dirty pages written uncached (Linux's WB_DONTCACHE_DIRTY).
    pub dontcache_dirty: u64,
    /// Pages written uncached that are dirty or under writeback.
    pub dontcache_unclean: u64,
}

impl WbPages {
    pub fn has_io(&self) -> bool {
        self.dirty > 0 || self.writeback > 0
    }
}

/// The cache's LRU events, for `stats` (Linux's vmstat names).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LruEvents {
    pub pgactivate: u64,
    pub pgdeactivate: u64,
    pub workingset_activate: u64,
    pub reclaimed_pages: u64,
}

/// The page cache's state: files, frames, lists, budget and counts.
#[derive(Debug)]
pub(crate) struct PageCache {
    /// Which lists reclaim keeps (the `lru` knob).
    pub lru: Lru,
    pub files: Vec<CachedFile>,
    /// The cache budget: the `memory` knob, lowered or raised at run time
    /// within `frame_pages` (memory_budget/, `trim_to_budget`).
    pub memory_pages: u64,
    /// The frames the runtime owns: the budget the cache started with.
    pub frame_pages: u64,
    /// The cache holds more than a lowered budget; it frees pages as they
    /// come clean until it is within it, and allocates none meanwhile.
    pub over_budget: bool,
    pub frames: FrameSpace,
    /// Frames whose pages a runtime read from its own index since reclaim
    /// last looked (see `Engine::note_referenced_frames`).
    pub frame_notes: FrameNotes,
    /// The inactive list: clean pages reclaim takes (reclaim/).
    pub inactive: ReclaimQueue,
    /// The active list: clean pages used repeatedly (lru.rs).
    pub active: ReclaimQueue,
    /// Shadows of evicted pages, for refault distance (workingset.rs).
    pub workingset: Workingset,
    /// Pages writers are copying into outside the runtime's lock
    /// (page_lock.rs); a handful at most: one entry per CopyIn.
    pub page_locks: Vec<PageLock>,
    pub nr_cached: u64,
    /// Pages with PG_ACTIVE, in any state.
    pub nr_active: u64,
    pub nr_dirty: u64,
    pub nr_writeback: u64,
    /// Dirty pages written uncached, cache-wide (dontcache/).
    pub nr_dontcache_dirty: u64,
    /// Frames that in-flight writes keep after a writer was given a copy
    /// of their pages (stable.rs); they count against the budget.
    pub nr_snapshot: u64,
    /// Pages per writeback context, by `WbId`.
    pub wb_pages: Vec<WbPages>,
    pub events: LruEvents,
}

/// `counter` follows a file's count that went from `before` to `after`.
fn follow(counter: &mut u64, before: u64, after: u64) {
    *counter = *counter - before + after;
}

/// A cache of 64 frames with one empty file on device 0, context 0
/// (tests of the page cache's rules).
#[cfg(test)]
pub(super) fn one_file_cache() -> (PageCache, FileId) {
    let mut cache = PageCache::new(64, Lru::Clock);
    cache.add_wb(WbId(0));
    let device = crate::ids::DeviceId(0);
    cache.files.push(CachedFile::new(device, WbId(0), 0));
    (cache, FileId(0))
}

impl PageCache {
    pub fn new(memory_pages: u64, lru: Lru) -> PageCache {
        PageCache {
            lru,
            files: Vec::new(),
            memory_pages,
            frame_pages: memory_pages,
            over_budget: false,
            frames: FrameSpace::new(memory_pages),
            frame_notes: FrameNotes::new(memory_pages),
            inactive: ReclaimQueue::default(),
            active: ReclaimQueue::default(),
            workingset: Workingset::default(),
            page_locks: Vec::new(),
            nr_cached: 0,
            nr_active: 0,
            nr_dirty: 0,
            nr_writeback: 0,
            nr_dontcache_dirty: 0,
            nr_snapshot: 0,
            wb_pages: Vec::new(),
            events: LruEvents::default(),
        }
    }

    /// A writeback context's pages.
    pub fn wb(&self, wb: WbId) -> WbPages {
        self.wb_pages[wb.index()]
    }

    /// Counts for a new writeback context, `wb`.
    /// A retired file's id is taken by a new file: the lists and the
    /// workingset forget the old one.
    pub fn forget_file(&mut self, file: FileId) {
        self.inactive.retain(|&(f, _, _)| f != file);
        self.active.retain(|&(f, _, _)| f != file);
        self.workingset.forget(file, 0, MAX_FILE_PAGES);
    }

    pub fn add_wb(&mut self, wb: WbId) {
        debug_assert_eq!(wb.index(), self.wb_pages.len(), "contexts in order");
        self.wb_pages.push(WbPages::default());
    }

    /// Keeps the cache-wide and per-context page counters (cached,
    /// active, dirty, under writeback, uncached) equal to the sums of the
    /// files' own after a change to `file`'s pages whose counts were
    /// `before`. Every change of page state is accounted here, and only
    /// here (control.rs checks the sums).
    pub fn account(&mut self, file: FileId, before: PageCounts) {
        let f = &self.files[file.index()];
        let after = f.counts();
        if after == before {
            // The common change: a page marked referenced, counted nowhere.
            return;
        }
        let wb = &mut self.wb_pages[f.wb.index()];
        follow(&mut wb.dirty, before.dirty, after.dirty);
        follow(&mut wb.writeback, before.writeback, after.writeback);
        follow(&mut self.nr_dirty, before.dirty, after.dirty);
        follow(&mut self.nr_writeback, before.writeback, after.writeback);
        follow(&mut self.nr_cached, before.cached, after.cached);
        follow(&mut self.nr_active, before.active, after.active);
        let (was, now) = (before.dontcache_dirty, after.dontcache_dirty);
        follow(&mut wb.dontcache_dirty, was, now);
        follow(&mut self.nr_dontcache_dirty, was, now);
        let (was, now) = (before.dontcache_unclean, after.dontcache_unclean);
        follow(&mut wb.dontcache_unclean, was, now);
    }
}
