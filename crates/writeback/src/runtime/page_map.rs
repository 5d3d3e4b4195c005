//! A read-mostly index of the cached pages whose data is valid, so that
//! cached reads find their frames without the engine's lock: the engine's
//! lock is one for every thread, while the index is split into shards
//! that readers of different pages rarely share.
//!
//! The runtime keeps it in step with the engine (under the engine's lock):
//! a page goes in once its frame holds its data (a finished read, a copied
//! write) and comes out as soon as the engine drops it from the cache
//! (`Action::Unmapped`, carried out before any later action), before any
//! frame is written again.
//!
//! Lock order: the engine's lock, then an index shard, then a frame lock.
//! A reader takes a shard for reading and, holding it, the frame's lock:
//! the page cannot leave the index, nor its frame be reused, before the
//! reader holds the frame.

use super::frames::{FrameRead, FrameWrite, Frames};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use wb_engine::{FileId, PageIndex as Page};

/// Number of index shards: enough that two threads reading random pages
/// rarely meet on one, few enough to cost nothing to hold.
const SHARDS: usize = 64;

/// Pages and frames are small integers; a multiply-and-fold hash of them
/// is enough and far cheaper than SipHash.
#[derive(Default)]
struct PageHasher(u64);

impl Hasher for PageHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }

    fn write_u64(&mut self, n: u64) {
        // Fibonacci hashing: the golden-ratio multiplier spreads neighbouring keys.
        let h = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 29);
    }
}

type Shard = HashMap<(u32, Page), u32, BuildHasherDefault<PageHasher>>;

pub(crate) struct PageMap {
    shards: Vec<RwLock<Shard>>,
}

fn shard(file: FileId, page: Page) -> usize {
    // Neighbouring pages of a file go to different shards.
    let mixed = page ^ (file.0 as u64).wrapping_mul(0x9E37_79B9);
    (mixed % SHARDS as u64) as usize
}

impl PageMap {
    pub fn new() -> PageMap {
        PageMap {
            shards: (0..SHARDS).map(|_| RwLock::new(Shard::default())).collect(),
        }
    }

    fn read_shard(&self, i: usize) -> RwLockReadGuard<'_, Shard> {
        self.shards[i].read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_shard(&self, i: usize) -> RwLockWriteGuard<'_, Shard> {
        self.shards[i].write().unwrap_or_else(|p| p.into_inner())
    }

    /// The page's frame holds its data (call with the engine's lock held,
    /// the frame already filled).
    pub fn insert(&self, file: FileId, page: Page, frame: u32) {
        self.write_shard(shard(file, page))
            .insert((file.0, page), frame);
    }

    /// The page left the cache (call with the engine's lock held, before
    /// any frame is written); returns the frame it was in.
    pub fn remove(&self, file: FileId, page: Page) -> Option<u32> {
        self.write_shard(shard(file, page)).remove(&(file.0, page))
    }

    /// Write access to the page's frame, if the page is indexed (for a
    /// write that bypasses the engine: see `FrameWrite::overwritable`).
    pub fn write<'f>(
        &self,
        frames: &'f Frames,
        file: FileId,
        page: Page,
    ) -> Option<FrameWrite<'f>> {
        let shard = self.read_shard(shard(file, page));
        let &frame = shard.get(&(file.0, page))?;
        // Taken while the shard is held: see the lock order above.
        Some(frames.write(frame))
    }

    /// Read access to the page's frame, if the page is indexed.
    pub fn read<'f>(&self, frames: &'f Frames, file: FileId, page: Page) -> Option<FrameRead<'f>> {
        let shard = self.read_shard(shard(file, page));
        let &frame = shard.get(&(file.0, page))?;
        // Taken while the shard is held: see the lock order above.
        Some(frames.read_one(frame))
    }

    /// Number of indexed pages.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        (0..SHARDS).map(|i| self.read_shard(i).len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_come_and_go() {
        let frames = Frames::new(4).unwrap();
        let index = PageMap::new();
        assert!(index.read(&frames, FileId(0), 0).is_none());
        frames.write(2).bytes().fill(7);
        index.insert(FileId(0), 5, 2);
        index.insert(FileId(1), 5, 3);
        let read = index.read(&frames, FileId(0), 5).expect("indexed");
        assert_eq!(read.bytes()[100], 7);
        drop(read);
        assert_eq!(index.len(), 2);
        index.remove(FileId(0), 5);
        assert!(index.read(&frames, FileId(0), 5).is_none());
        assert!(index.read(&frames, FileId(1), 5).is_some());
        assert_eq!(index.len(), 1);
    }
}
