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
        Frames {
            data: RwLock::new(vec![0u8; pages as usize * PAGE]),
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
