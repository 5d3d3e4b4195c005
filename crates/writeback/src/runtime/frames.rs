//! The memory of the cache: `memory_pages` frames of one page each, under a
//! reader-writer lock of their own. Lock order: the engine's lock first,
//! then this one. Readers take this lock before they let go of the engine's
//! lock and copy with only this one held, so copies of cached data run in
//! parallel while the frames they read cannot be reused under them.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use wb_engine::PAGE_SIZE;

const PAGE: usize = PAGE_SIZE as usize;

pub(crate) struct Frames {
    data: RwLock<Vec<u8>>,
}

pub(crate) struct FramesRead<'a>(RwLockReadGuard<'a, Vec<u8>>);
pub(crate) struct FramesWrite<'a>(RwLockWriteGuard<'a, Vec<u8>>);

impl Frames {
    pub fn new(pages: u64) -> Frames {
        // Zeroed memory from the allocator is mapped lazily by the OS: the
        // budget is reserved, not touched.
        let data = vec![0u8; pages as usize * PAGE];
        advise_huge_pages(&data);
        Frames {
            data: RwLock::new(data),
        }
    }

    pub fn read(&self) -> FramesRead<'_> {
        FramesRead(self.data.read().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn write(&self) -> FramesWrite<'_> {
        FramesWrite(self.data.write().unwrap_or_else(|p| p.into_inner()))
    }
}

impl FramesRead<'_> {
    pub fn frame(&self, frame: u32) -> &[u8] {
        let start = frame as usize * PAGE;
        &self.0[start..start + PAGE]
    }
}

impl FramesWrite<'_> {
    pub fn frame_mut(&mut self, frame: u32) -> &mut [u8] {
        let start = frame as usize * PAGE;
        &mut self.0[start..start + PAGE]
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
    // [aligned, aligned + len) lies inside the vector's allocation, which
    // outlives the call, and MADV_HUGEPAGE never changes its contents.
    let rc = unsafe { libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
    let _ = rc; // EINVAL where THP is unsupported: nothing to do.
}
