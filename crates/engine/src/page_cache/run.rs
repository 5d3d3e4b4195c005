//! A run: contiguous cached pages of one file in one state, with their
//! data in contiguous frames; and the per-file page counters kept with
//! the runs.

use crate::ids::PageIndex;

/// A run's state bits.
pub type PageFlags = u16;

pub const PG_DIRTY: PageFlags = 1;
pub const PG_WRITEBACK: PageFlags = 2;
/// Being read from the device; not yet valid.
pub const PG_READING: PageFlags = 4;
/// Accessed once (lru.rs: a second access activates the page); under
/// `lru = clock`, used since the hand last passed (the second chance).
pub const PG_REFERENCED: PageFlags = 8;
/// Covered by an entry of a reclaim queue (inactive or active, lru.rs).
pub const PG_IN_LRU: PageFlags = 16;
/// Written uncached (DONTCACHE): leaves the cache once written back and
/// clean (Linux's PG_dropbehind). An ordinary access clears it.
pub const PG_DROPBEHIND: PageFlags = 32;
/// A writer is copying into the page outside the runtime's lock (Linux's
/// PG_locked from write_begin to write_end; page_lock.rs): not written
/// back, reclaimed, truncated or read through the engine until unlocked.
pub const PG_LOCKED: PageFlags = 64;
/// Dirtied past the end of its backing file: a block of the backing
/// filesystem's free space is reserved for it until it is written back
/// (space/).
pub const PG_RESERVED: PageFlags = 128;
/// On the active list: accessed twice while cached, or refaulted within
/// the working set (lru.rs, workingset.rs). Reclaim takes it only after
/// it is deactivated.
pub const PG_ACTIVE: PageFlags = 256;

/// Largest file, in pages (16 TiB): ranges beyond it are rejected.
pub const MAX_FILE_PAGES: u64 = 1 << 32;

/// Pages `start..start + len` of a file, all in one state, with their data
/// in frames `frame..frame + len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub len: u64,
    pub flags: PageFlags,
    pub frame: u32,
}

impl Run {
    /// Whether the run may be reclaimed: clean and valid.
    pub fn reclaimable(&self) -> bool {
        self.flags & (PG_DIRTY | PG_WRITEBACK | PG_READING | PG_LOCKED) == 0
    }

    /// Dirty and written uncached.
    pub fn dontcache_dirty(&self) -> bool {
        self.flags & (PG_DIRTY | PG_DROPBEHIND) == PG_DIRTY | PG_DROPBEHIND
    }

    /// Written uncached and dirty or under writeback.
    pub fn dontcache_unclean(&self) -> bool {
        self.flags & PG_DROPBEHIND != 0 && self.flags & (PG_DIRTY | PG_WRITEBACK) != 0
    }

    /// Dirty, and neither under writeback nor being copied into.
    pub fn writable(&self) -> bool {
        self.flags & (PG_DIRTY | PG_WRITEBACK | PG_LOCKED) == PG_DIRTY
    }

    /// Whether `next`, starting where this run ends, can join it. Runs
    /// with I/O in flight stay as their requests made them: their
    /// completions then change whole runs, with no split.
    pub(super) fn joins(&self, next: &Run) -> bool {
        self.flags == next.flags
            && self.flags & (PG_WRITEBACK | PG_READING) == 0
            && self.frame as u64 + self.len == next.frame as u64
    }
}

/// Pages of a file by state, kept with the runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageCounts {
    pub cached: u64,
    pub dirty: u64,
    pub writeback: u64,
    /// Clean and valid: what reclaim may take.
    pub reclaimable: u64,
    /// Dirty and marked drop-behind (Linux's WB_DONTCACHE_DIRTY).
    pub dontcache_dirty: u64,
    /// Marked drop-behind and dirty or under writeback: not yet gone.
    pub dontcache_unclean: u64,
    /// Marked drop-behind, in any state.
    pub dropbehind: u64,
    /// Holding a reservation of the backing filesystem's space.
    pub reserved: u64,
    /// On the active list (PG_ACTIVE).
    pub active: u64,
}

impl PageCounts {
    pub(super) fn add(&mut self, run: &Run) {
        self.cached += run.len;
        self.dirty += run.len * (run.flags & PG_DIRTY != 0) as u64;
        self.writeback += run.len * (run.flags & PG_WRITEBACK != 0) as u64;
        self.reclaimable += run.len * run.reclaimable() as u64;
        self.dontcache_dirty += run.len * run.dontcache_dirty() as u64;
        self.dontcache_unclean += run.len * run.dontcache_unclean() as u64;
        self.dropbehind += run.len * (run.flags & PG_DROPBEHIND != 0) as u64;
        self.reserved += run.len * (run.flags & PG_RESERVED != 0) as u64;
        self.active += run.len * (run.flags & PG_ACTIVE != 0) as u64;
    }

    pub(super) fn sub(&mut self, run: &Run) {
        self.cached -= run.len;
        self.dirty -= run.len * (run.flags & PG_DIRTY != 0) as u64;
        self.writeback -= run.len * (run.flags & PG_WRITEBACK != 0) as u64;
        self.reclaimable -= run.len * run.reclaimable() as u64;
        self.dontcache_dirty -= run.len * run.dontcache_dirty() as u64;
        self.dontcache_unclean -= run.len * run.dontcache_unclean() as u64;
        self.dropbehind -= run.len * (run.flags & PG_DROPBEHIND != 0) as u64;
        self.reserved -= run.len * (run.flags & PG_RESERVED != 0) as u64;
        self.active -= run.len * (run.flags & PG_ACTIVE != 0) as u64;
    }
}

/// Cached pages `first..end` of a file, in one state, their data in
/// frames `frame..`: a run as a runtime sees it (`Engine::page_runs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageRun {
    pub first: PageIndex,
    pub end: PageIndex,
    /// The frame of `first`; page `p` is in frame `frame + (p - first)`.
    pub frame: u32,
    /// Dirtied since a write request last took them (PG_DIRTY).
    pub dirty: bool,
    /// A write request carries them (PG_WRITEBACK).
    pub writeback: bool,
    /// Their frames hold their data: not being read from the device.
    pub valid: bool,
    /// A writer is copying into them outside the runtime's lock (PG_LOCKED).
    pub locked: bool,
}

impl PageRun {
    /// The part of `run`, starting at page `start`, within `first..end`.
    pub(crate) fn clipped(start: PageIndex, run: Run, first: PageIndex, end: PageIndex) -> PageRun {
        let (from, to) = (start.max(first), (start + run.len).min(end));
        PageRun {
            first: from,
            end: to,
            frame: run.frame + (from - start) as u32,
            dirty: run.flags & PG_DIRTY != 0,
            writeback: run.flags & PG_WRITEBACK != 0,
            valid: run.flags & PG_READING == 0,
            locked: run.flags & PG_LOCKED != 0,
        }
    }
}
