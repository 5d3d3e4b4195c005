//! The memory of the cache: `memory_pages` frames of one page each. Frames
//! are guarded by a fixed number of reader-writer locks, frame `f` by lock
//! `f % SHARDS`, so copies of different frames never contend.
//!
//! Lock order: the engine's lock first, then frame locks. Writers (filling,
//! zeroing, copying caller data in) take a frame's lock while holding the
//! engine's lock, one frame at a time, and no other frame lock; a write to
//! a page that is dirty already takes it instead while holding the page
//! index's shard (as a cached read does) and copies only if the frame is
//! marked overwritable (its dirty data not yet copied for writeback; the
//! mark is cleared under the frame's lock before a request copies it).
//! Readers take the read locks of the frames they need either while
//! holding the engine's lock (a cache miss) or while holding the shard of
//! the page index that maps the page (a hit; see page_index.rs), then let
//! that lock go and copy: the frames cannot be reused under them.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use wb_engine::PAGE_SIZE;

const PAGE: usize = PAGE_SIZE as usize;
/// Number of frame locks.
pub(crate) const SHARDS: usize = 64;

pub(crate) struct Frames {
    data: Box<[UnsafeCell<u8>]>,
    shards: Vec<RwLock<()>>,
    /// Per frame: it holds a dirty page whose data no write request has
    /// copied yet, so bytes written into it now will be written back
    /// without telling the engine (see `FrameWrite::overwritable`).
    overwritable: Vec<AtomicBool>,
}

// SAFETY: the bytes of frame f are only read while holding shards[f % SHARDS]
// for reading (FramesRead) and only written while holding it for writing
// (FrameWrite); the shards partition the frames, so no byte is ever written
// while another thread reads or writes it.
unsafe impl Sync for Frames {}

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
    pub fn new(pages: u64) -> Frames {
        // Zeroed memory from the allocator is mapped lazily by the OS: the
        // budget is reserved, not touched.
        let bytes = vec![0u8; pages as usize * PAGE].into_boxed_slice();
        advise_huge_pages(&bytes);
        let len = bytes.len();
        let raw = Box::into_raw(bytes) as *mut u8;
        // SAFETY: UnsafeCell<u8> has the same layout as u8
        // (repr(transparent)), and the pointer and length come from a boxed
        // slice of exactly `len` u8s that we now own; rebuilding it as a box
        // of `len` UnsafeCell<u8> hands that ownership over unchanged.
        let data = unsafe {
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                raw as *mut UnsafeCell<u8>,
                len,
            ))
        };
        let shards = (0..SHARDS).map(|_| RwLock::new(())).collect();
        let overwritable = (0..pages).map(|_| AtomicBool::new(false)).collect();
        Frames {
            data,
            shards,
            overwritable,
        }
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

    fn start(&self, frame: u32) -> usize {
        let start = frame as usize * PAGE;
        assert!(
            start + PAGE <= self.data.len(),
            "frame {frame} beyond the cache"
        );
        start
    }
}

impl Frames {
    /// No write may go into `frames` without the engine from now on: a
    /// write request is about to copy them, or their pages left. Call
    /// holding each frame's lock (read or write): a lockless writer checks
    /// the mark under the frame's write lock, so it either finished before
    /// or sees the mark gone.
    pub fn clear_overwritable(&self, frames: &[u32]) {
        for &f in frames {
            self.overwritable[f as usize].store(false, Ordering::Release);
        }
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
        // for as long as `self`, which the returned slice borrows, so no
        // writer can touch these bytes meanwhile; the range is in bounds.
        unsafe { std::slice::from_raw_parts(self.frames.data[start].get() as *const u8, PAGE) }
    }
}

impl FrameRead<'_> {
    pub fn frame(&self) -> u32 {
        self.frame
    }

    pub fn bytes(&self) -> &[u8] {
        let start = self.frames.start(self.frame);
        // SAFETY: we hold the frame's shard lock for reading for as long as
        // `self`, which the returned slice borrows, so no writer can touch
        // these bytes meanwhile; the range is in bounds.
        unsafe { std::slice::from_raw_parts(self.frames.data[start].get() as *const u8, PAGE) }
    }
}

impl FrameWrite<'_> {
    /// Whether the frame holds a dirty page no write request has copied
    /// yet: bytes written now will be written back.
    pub fn overwritable(&self) -> bool {
        self.frames.overwritable[self.frame as usize].load(Ordering::Acquire)
    }

    pub fn set_overwritable(&mut self, on: bool) {
        self.frames.overwritable[self.frame as usize].store(on, Ordering::Release);
    }

    pub fn bytes(&mut self) -> &mut [u8] {
        let start = self.frames.start(self.frame);
        // SAFETY: we hold the frame's shard lock for writing for as long as
        // `self`, which the returned slice borrows mutably, so nobody else
        // reads or writes these bytes meanwhile; the range is in bounds.
        unsafe { std::slice::from_raw_parts_mut(self.frames.data[start].get(), PAGE) }
    }
}

/// Asks for transparent huge pages for the frames: cached reads copy from
/// random frames, and with 4 KiB pages each copy pays a TLB miss (costly
/// under virtualisation, where the kernel's own page cache is mapped huge).
/// Only advice: without THP the cache works the same, a little slower.
fn advise_huge_pages(data: &[u8]) {
    const HUGE: usize = 2 << 20;
    let start = data.as_ptr() as usize;
    let aligned = start.next_multiple_of(HUGE);
    let end = start + data.len();
    if aligned >= end {
        return;
    }
    let len = (end - aligned) / HUGE * HUGE;
    if len == 0 {
        return;
    }
    // SAFETY: madvise only changes how the kernel backs the range; the range
    // [aligned, aligned + len) lies inside the allocation, which outlives the
    // call, and MADV_HUGEPAGE never changes its contents.
    let rc = unsafe { libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
    let _ = rc; // EINVAL where THP is unsupported: nothing to do.
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_read_back_what_was_written() {
        let frames = Frames::new(130);
        frames.write(129).bytes().fill(7);
        frames.write(65).bytes()[..3].copy_from_slice(b"abc");
        let r = frames.read(&[129, 65, 1]);
        assert!(r.frame(129).iter().all(|&b| b == 7));
        assert_eq!(&r.frame(65)[..4], b"abc\0");
        assert!(r.frame(1).iter().all(|&b| b == 0));
    }

    #[test]
    #[should_panic(expected = "without its lock")]
    fn reading_an_unlocked_frame_is_caught() {
        let frames = Frames::new(4);
        let r = frames.read(&[0]);
        let _ = r.frame(1);
    }
}
