//! The map's shards: hash maps from (file, page) to frame, each behind
//! its own reader-writer lock, and the hash that spreads pages over them.
//!
//! Pages and frames are small integers, so a multiply-and-fold hash is
//! enough and far cheaper than SipHash; it has no random state, so the
//! simulator's runs stay deterministic (nothing iterates a shard's order
//! into a result: `PageMap::pages` sorts).

use crate::ids::{FileId, PageIndex};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Number of shards: enough that two threads reading random pages rarely
/// meet on one, few enough to cost nothing to hold.
pub(super) const SHARDS: usize = 64;

/// Multiplier of Fibonacci hashing (2^64 / the golden ratio): it spreads
/// neighbouring keys.
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

#[derive(Default)]
pub(super) struct PageHasher(u64);

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
        let h = (self.0.rotate_left(5) ^ n).wrapping_mul(GOLDEN);
        self.0 = h ^ (h >> 29);
    }
}

pub(super) type Shard = HashMap<(u32, PageIndex), u32, BuildHasherDefault<PageHasher>>;

pub(super) struct Shards(Vec<RwLock<Shard>>);

impl Shards {
    pub fn new() -> Shards {
        Shards((0..SHARDS).map(|_| RwLock::new(Shard::default())).collect())
    }

    /// The shard of `page` of `file`: neighbouring pages of a file go to
    /// different shards.
    pub fn of(file: FileId, page: PageIndex) -> usize {
        let mixed = page ^ (file.0 as u64).wrapping_mul(GOLDEN >> 32);
        (mixed % SHARDS as u64) as usize
    }

    /// Shard `i`, for reading. A poisoned lock is taken as it is: the map
    /// is changed by single inserts and removes, never left half done.
    pub fn read(&self, i: usize) -> RwLockReadGuard<'_, Shard> {
        self.0[i].read().unwrap_or_else(|p| p.into_inner())
    }

    /// Every shard, for reading, in order: for a walk that looks up many
    /// pages (check.rs), one lock each instead of one per page.
    pub fn read_all(&self) -> Vec<RwLockReadGuard<'_, Shard>> {
        (0..self.0.len()).map(|i| self.read(i)).collect()
    }

    /// Shard `i`, for writing (the keeper's, under the engine's lock).
    pub fn write(&self, i: usize) -> RwLockWriteGuard<'_, Shard> {
        self.0[i].write().unwrap_or_else(|p| p.into_inner())
    }
}
