//! The memory of the cache: `memory_pages` frames of one page each. Frames
//! are guarded by a fixed number of reader-writer locks, frame `f` by lock
//! `f % SHARDS`, so copies of different frames never contend.
//!
//! The frames are one page-aligned allocation, so writeback can lend them
//! to the kernel as they are (`Frames::lend`, O_DIRECT from the cache's
//! own memory): the kernel reads a lent frame without any lock while the
//! write is in flight. The engine keeps such a frame from being reused or
//! zeroed until the write completes; only where the device does not need
//! stable pages (stable_writes = none) does it let a writer modify the
//! frame meanwhile, dirtying the page again so it is written once more.
//!
//! Lock order: the engine's lock first, then frame locks. Writers (filling,
//! zeroing, copying caller data in) take a frame's lock while holding the
//! engine's lock, one frame at a time, and no other frame lock; a write to
//! a page that is dirty already takes it instead while holding the page
//! map's shard (as a cached read does) and copies only if the frame is
//! overwritable (`wb_engine::page_map`, rule 8: the engine crate's page
//! map keeps the bit, and clears it before a request's frames are locked
//! to be copied or lent). Readers take the read locks of the frames they
//! need either while holding the engine's lock (a cache miss) or while
//! holding the shard of the page map that maps the page (a hit, rule 7),
//! then let that lock go and copy: the frames cannot be reused under them.
//! Populating frames (populate.rs, and a read's frames before its copy)
//! and giving their memory back (`release`) hold `populating`, taken
//! after the engine's lock and before frame locks, and only ever
//! try-locked: a holder populates for milliseconds.

use crate::io::IoPages;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use wb_engine::PAGE_SIZE;

const PAGE: usize = PAGE_SIZE as usize;
/// Number of frame locks.
pub(crate) const SHARDS: usize = 64;

/// Alignment of the frames' memory: a huge page, so THP can back it (see
/// `advise_huge_pages`); a multiple of PAGE_SIZE, as O_DIRECT needs.
pub(crate) const FRAMES_ALIGN: usize = 2 << 20;

pub(crate) struct Frames {
    /// `len` bytes, FRAMES_ALIGN-aligned, inside an anonymous mapping of
    /// `map_len` bytes at `map`; only accessed through raw pointers (under
    /// the frame locks, or by the kernel for lent frames).
    data: NonNull<u8>,
    len: usize,
    map: NonNull<u8>,
    map_len: usize,
    shards: Vec<RwLock<()>>,
    /// Held while frames' memory is populated or given back, so the two
    /// never overlap (see `populate` and `release`).
    populating: Mutex<()>,
}

// SAFETY: the bytes of frame f are only read by this process while holding
// shards[f % SHARDS] for reading (FramesRead) and only written while holding
// it for writing (FrameWrite); the shards partition the frames, so no byte
// is ever written while another of our threads reads or writes it. (The
// kernel reads lent frames without a lock: see `Frames::lend`.) The
// allocation is owned by `Frames` alone and freed once, in Drop.
unsafe impl Sync for Frames {}
// SAFETY: as for Sync; the raw pointer is an owned allocation, like a Box.
unsafe impl Send for Frames {}

/// Read access to a set of frames.
pub(crate) struct FramesRead<'a> {
    frames: &'a Frames,
    /// (shard, guard), shards ascending and distinct.
    guards: Vec<(usize, RwLockReadGuard<'a, ()>)>,
}

/// Read access to one frame.
pub(crate) struct FrameRead<'a> {
    frames: &'a Frames,
    frame: u32,
    _guard: RwLockReadGuard<'a, ()>,
}

/// Write access to one frame.
pub(crate) struct FrameWrite<'a> {
    frames: &'a Frames,
    frame: u32,
    _guard: RwLockWriteGuard<'a, ()>,
}

fn shard(frame: u32) -> usize {
    frame as usize % SHARDS
}

impl Frames {
    /// Reserves `pages` frames; fails if the system refuses the mapping
    /// (strict overcommit, an address-space limit).
    pub fn new(pages: u64) -> std::io::Result<Frames> {
        // An anonymous mapping: zero pages the kernel provides on first
        // touch, so the budget is reserved, not used, until pages are
        // cached. (The allocator's alloc_zeroed would memset the whole
        // budget at start: its alignment is above malloc's.) One huge page
        // more than asked, to start the frames on a huge page boundary.
        let len = (pages as usize).max(1) * PAGE;
        let map_len = len
            .checked_add(FRAMES_ALIGN)
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOMEM))?;
        // SAFETY: a new private anonymous mapping chosen by the kernel
        // (addr NULL, fd -1): it aliases nothing; the result is checked.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        // A mapping placed by the kernel is never at address 0.
        let map = NonNull::new(raw.cast::<u8>())
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOMEM))?;
        let skip = (FRAMES_ALIGN - map.as_ptr() as usize % FRAMES_ALIGN) % FRAMES_ALIGN;
        // SAFETY: skip < FRAMES_ALIGN, so [map + skip, map + skip + len)
        // lies inside the mapping of len + FRAMES_ALIGN bytes.
        let data = unsafe { NonNull::new_unchecked(map.as_ptr().add(skip)) };
        advise_huge_pages(data.as_ptr(), len);
        let shards = (0..SHARDS).map(|_| RwLock::new(())).collect();
        Ok(Frames {
            data,
            len,
            map,
            map_len,
            shards,
            populating: Mutex::new(()),
        })
    }

    fn lock_read(&self, shard: usize) -> RwLockReadGuard<'_, ()> {
        self.shards[shard].read().unwrap_or_else(|p| p.into_inner())
    }

    /// Read access to `frames` (any order, repeats allowed).
    pub fn read(&self, frames: &[u32]) -> FramesRead<'_> {
        let mut wanted: Vec<usize> = frames.iter().map(|&f| shard(f)).collect();
        wanted.sort_unstable();
        wanted.dedup();
        let guards = wanted.into_iter().map(|s| (s, self.lock_read(s))).collect();
        FramesRead {
            frames: self,
            guards,
        }
    }

    /// Read access to one frame.
    pub fn read_one(&self, frame: u32) -> FrameRead<'_> {
        let guard = self.lock_read(shard(frame));
        FrameRead {
            frames: self,
            frame,
            _guard: guard,
        }
    }

    /// Write access to one frame.
    pub fn write(&self, frame: u32) -> FrameWrite<'_> {
        let guard = self.shards[shard(frame)]
            .write()
            .unwrap_or_else(|p| p.into_inner());
        FrameWrite {
            frames: self,
            frame,
            _guard: guard,
        }
    }

    /// The first byte of `frame`.
    fn start(&self, frame: u32) -> *mut u8 {
        let start = frame as usize * PAGE;
        assert!(start + PAGE <= self.len, "frame {frame} beyond the cache");
        // In bounds (checked): within the allocation.
        self.data.as_ptr().wrapping_add(start)
    }

    /// Lends `frames`, in order, to a write op: the kernel reads them
    /// while it is in flight, without any lock. The caller (the engine's
    /// writeback) keeps them from being reused, zeroed or copied into
    /// until the write completes, except where a torn write is harmless
    /// and the page is written again (stable_writes = none).
    pub fn lend(self: &Arc<Self>, frames: &[u32]) -> IoPages {
        let owner: Arc<dyn Send + Sync> = self.clone();
        let segments = frames.iter().map(|&f| (self.start(f).cast_const(), PAGE));
        // SAFETY: each segment is one whole frame inside the allocation
        // (`start` checks the bound), page-aligned as the allocation is;
        // `owner` keeps the allocation alive (it is freed only when the
        // last Arc<Frames> goes), and the memory is always readable.
        let pages = unsafe { IoPages::new(owner, segments) };
        pages.expect("frames are whole, page-aligned pages, at least one")
    }
}

impl Drop for Frames {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped only here; no lent
        // frame is in flight any more: an op holds an Arc.
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.map_len) };
    }
}

impl FramesRead<'_> {
    pub fn frame(&self, frame: u32) -> &[u8] {
        let held = self
            .guards
            .binary_search_by_key(&shard(frame), |(s, _)| *s)
            .is_ok();
        assert!(held, "frame {frame} read without its lock");
        let start = self.frames.start(frame);
        // SAFETY: we hold the frame's shard lock for reading (checked above)
        // for as long as `self`, which the returned slice borrows, so none
        // of our writers can touch these bytes meanwhile; the range is in
        // bounds (`start` checks).
        unsafe { std::slice::from_raw_parts(start, PAGE) }
    }
}

impl FrameRead<'_> {
    pub fn frame(&self) -> u32 {
        self.frame
    }

    pub fn bytes(&self) -> &[u8] {
        let start = self.frames.start(self.frame);
        // SAFETY: we hold the frame's shard lock for reading for as long as
        // `self`, which the returned slice borrows, so none of our writers
        // can touch these bytes meanwhile; the range is in bounds.
        unsafe { std::slice::from_raw_parts(start, PAGE) }
    }
}

impl FrameWrite<'_> {
    pub fn bytes(&mut self) -> &mut [u8] {
        let start = self.frames.start(self.frame);
        // SAFETY: we hold the frame's shard lock for writing for as long as
        // `self`, which the returned slice borrows mutably, so none of our
        // threads reads or writes these bytes meanwhile (the kernel may be
        // reading a lent frame: it only reads); the range is in bounds.
        unsafe { std::slice::from_raw_parts_mut(start, PAGE) }
    }
}

/// Asks for transparent huge pages for the frames: cached reads copy from
/// random frames, and with 4 KiB pages each copy pays a TLB miss (costly
/// under virtualisation, where the kernel's own page cache is mapped huge).
/// Only advice: without THP the cache works the same, a little slower.
impl Frames {
    /// The frames' count.
    pub fn pages(&self) -> u64 {
        (self.len / PAGE) as u64
    }

    /// `populating` if no one holds it. Never waited for: its holders
    /// populate for milliseconds, and some callers hold the engine's lock.
    pub fn try_populating(&self) -> Option<MutexGuard<'_, ()>> {
        match self.populating.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// Has the kernel back frames `first..end` with memory now
    /// (MADV_POPULATE_WRITE), so that their first use does not pay for
    /// it: what a write fault would do to each page, without writing.
    /// Contents never change, so it is safe beside any use of the frames.
    pub fn populate(
        &self,
        _populating: &MutexGuard<'_, ()>,
        first: u64,
        end: u64,
    ) -> std::io::Result<()> {
        let end = end.min(self.pages());
        if first >= end {
            return Ok(());
        }
        let start = first as usize * PAGE;
        let len = (end - first) as usize * PAGE;
        // SAFETY: [data + start, data + start + len) lies inside the
        // allocation (end is clamped to the frames above), which outlives
        // the call, and starts and ends on page boundaries. MADV_POPULATE_WRITE
        // only faults pages in as a write would, without storing anything:
        // a page already present is left as it is, a missing one appears
        // zeroed, which is what a read of it would have returned. No
        // byte any thread reads or writes changes, so no lock is needed
        // beyond `populating` (a concurrent `release` would undo it).
        let rc = unsafe {
            libc::madvise(
                self.data.as_ptr().add(start).cast(),
                len,
                libc::MADV_POPULATE_WRITE,
            )
        };
        match rc {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        }
    }

    /// Gives the memory of frames `first..first + count` back to the
    /// system (MADV_DONTNEED): they read as zeros and take memory again
    /// when next written. Only for frames the engine holds free, with the
    /// cache's lock held so none is handed out meanwhile. Every shard is
    /// held for writing while it happens (as for any write to frames), so
    /// a lock-free reader that looked a page up just before its frame was
    /// freed is not reading it (it finds the page gone once it has the
    /// shard). Frame locks are taken after the cache's lock, as everywhere.
    /// Returns how many of the frames held memory (mincore; all of them
    /// if that cannot be told).
    pub fn release(&self, _populating: &MutexGuard<'_, ()>, first: u32, count: u64) -> u64 {
        let start = first as usize * PAGE;
        let len = count as usize * PAGE;
        assert!(
            start.checked_add(len).is_some_and(|end| end <= self.len),
            "frames {first}..+{count} are ours"
        );
        if len == 0 {
            return 0;
        }
        let resident = self.resident_pages(start, len).unwrap_or(count);
        if resident == 0 {
            // Nothing to give back: no lock, no madvise.
            return 0;
        }
        let _writing: Vec<_> = self
            .shards
            .iter()
            .map(|s| s.write().unwrap_or_else(|p| p.into_inner()))
            .collect();
        // SAFETY: [data + start, data + start + len) lies inside the
        // allocation (checked above), which outlives the call, and starts
        // and ends on page boundaries (frames are pages, the allocation
        // starts page-aligned). MADV_DONTNEED on a private anonymous
        // mapping only drops the pages' contents (they read as zeros
        // afterwards), a write to those bytes as far as our threads can
        // tell, made with every shard held for writing: no reader or
        // writer of ours is in any frame meanwhile.
        let rc = unsafe {
            libc::madvise(
                self.data.as_ptr().add(start).cast(),
                len,
                libc::MADV_DONTNEED,
            )
        };
        // Cannot fail on a valid range of our own mapping; if it did, the
        // memory simply stays.
        debug_assert_eq!(rc, 0, "madvise(MADV_DONTNEED) of our own frames");
        resident
    }

    /// How many pages of the frames' bytes `start..start + len` hold
    /// memory (mincore).
    fn resident_pages(&self, start: usize, len: usize) -> Option<u64> {
        let mut vec = vec![0u8; len / PAGE];
        // SAFETY: [data + start, data + start + len) lies inside the
        // allocation (the caller checked), page-aligned; `vec` has a byte
        // per page of it, as mincore writes. mincore only reads the page
        // tables: no byte of the frames is touched.
        let rc =
            unsafe { libc::mincore(self.data.as_ptr().add(start).cast(), len, vec.as_mut_ptr()) };
        (rc == 0).then(|| vec.iter().filter(|&&b| b & 1 == 1).count() as u64)
    }
}

fn advise_huge_pages(data: *mut u8, len: usize) {
    // The allocation starts on a huge page (FRAMES_ALIGN).
    let len = len / FRAMES_ALIGN * FRAMES_ALIGN;
    if len == 0 {
        return;
    }
    // SAFETY: madvise only changes how the kernel backs the range; the range
    // [data, data + len) lies inside the allocation, which outlives the
    // call, and MADV_HUGEPAGE never changes its contents.
    let rc = unsafe { libc::madvise(data.cast(), len, libc::MADV_HUGEPAGE) };
    let _ = rc; // EINVAL where THP is unsupported: nothing to do.
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The process's resident memory in bytes (/proc/self/statm).
    fn resident_bytes() -> u64 {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
        pages * 4096
    }

    #[test]
    fn a_large_budget_is_reserved_not_touched() {
        let before = resident_bytes();
        let frames = Frames::new((2u64 << 30) / PAGE_SIZE).unwrap();
        let after = resident_bytes();
        assert!(
            after < before + (256 << 20),
            "2 GiB of frames made the process {} MiB larger",
            (after - before) >> 20
        );
        frames.write(12345).bytes().fill(1);
        assert_eq!(frames.read(&[12345]).frame(12345)[0], 1);
    }

    #[test]
    fn frames_read_back_what_was_written() {
        let frames = Frames::new(130).unwrap();
        frames.write(129).bytes().fill(7);
        frames.write(65).bytes()[..3].copy_from_slice(b"abc");
        let r = frames.read(&[129, 65, 1]);
        assert!(r.frame(129).iter().all(|&b| b == 7));
        assert_eq!(&r.frame(65)[..4], b"abc\0");
        assert!(r.frame(1).iter().all(|&b| b == 0));
    }

    /// Which of frames `first..end` have memory (mincore).
    fn resident(frames: &Frames, first: u64, end: u64) -> Vec<bool> {
        let mut vec = vec![0u8; (end - first) as usize];
        // SAFETY: the range lies inside the frames' mapping (the test
        // picks it below `pages()`), page-aligned; vec has a byte a page.
        let rc = unsafe {
            libc::mincore(
                frames.data.as_ptr().add(first as usize * PAGE).cast(),
                (end - first) as usize * PAGE,
                vec.as_mut_ptr(),
            )
        };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        vec.iter().map(|b| b & 1 == 1).collect()
    }

    #[test]
    fn populating_backs_frames_with_memory_and_keeps_their_contents() {
        let frames = Frames::new(4096).unwrap();
        frames.write(1).bytes().fill(9);
        assert!(!resident(&frames, 1024, 2048).contains(&true), "untouched");
        let guard = frames.try_populating().expect("no one else holds it");
        frames.populate(&guard, 0, 2048).unwrap();
        assert!(resident(&frames, 0, 2048).iter().all(|&r| r));
        assert!(frames.read(&[1]).frame(1).iter().all(|&b| b == 9));
        assert!(frames.read(&[2000]).frame(2000).iter().all(|&b| b == 0));
        // Past the end is clamped; an empty range does nothing.
        frames.populate(&guard, 4000, 9999).unwrap();
        frames.populate(&guard, 3000, 3000).unwrap();
        assert!(frames.try_populating().is_none(), "held");
        // Released, the memory goes back (all of it was there); again,
        // there is none to give; populated again, it returns.
        assert_eq!(frames.release(&guard, 1024, 1024), 1024);
        assert_eq!(frames.release(&guard, 1024, 1024), 0);
        assert!(!resident(&frames, 1024, 2048).contains(&true));
        frames.populate(&guard, 1024, 2048).unwrap();
        assert!(resident(&frames, 1024, 2048).iter().all(|&r| r));
        drop(guard);
        assert!(frames.try_populating().is_some());
    }

    #[test]
    #[should_panic(expected = "without its lock")]
    fn reading_an_unlocked_frame_is_caught() {
        let frames = Frames::new(4).unwrap();
        let r = frames.read(&[0]);
        let _ = r.frame(1);
    }
}
