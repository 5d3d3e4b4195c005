//! The engine's counters as it hands them out (`Engine::stats`,
//! `Engine::gauges`, control.rs): stalls by reason in log2 buckets,
//! per device, per writeback context, cache-wide.

use crate::action::StallReason;
use crate::action::WbReason;

/// Log2 buckets of a stall histogram: bucket 0 counts stalls under 1 µs,
/// bucket k (1..) those of [2^(k-1), 2^k) µs, the last one everything
/// from 2^(STALL_BUCKETS-2) µs (about 8.4 s) on.
pub const STALL_BUCKETS: usize = 25;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StallStats {
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// How many stalls fell in each log2 bucket (`STALL_BUCKETS`).
    pub buckets: [u64; STALL_BUCKETS],
}

impl StallStats {
    pub fn record(&mut self, ns: u64) {
        self.count += 1;
        self.total_ns += ns;
        self.max_ns = self.max_ns.max(ns);
        self.buckets[Self::bucket(ns)] += 1;
    }

    /// The bucket of a stall of `ns`.
    pub fn bucket(ns: u64) -> usize {
        let us = ns / 1000;
        let k = (u64::BITS - us.leading_zeros()) as usize;
        k.min(STALL_BUCKETS - 1)
    }

    /// The upper bound of bucket `k` in µs (exclusive); None for the last.
    pub fn bucket_end_us(k: usize) -> Option<u64> {
        (k < STALL_BUCKETS - 1).then(|| 1u64 << k)
    }
}

/// What a timeline samples (`Engine::gauges`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Gauges {
    pub cached_pages: u64,
    pub dirty_pages: u64,
    pub writeback_pages: u64,
    pub thresh_pages: u64,
    pub bg_thresh_pages: u64,
    pub devices: Vec<DeviceGauges>,
    /// Time tasks have spent stalled, by `StallReason` index.
    pub stalled_ns: [u64; StallReason::ALL.len()],
}

/// A device's part of [`Gauges`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceGauges {
    pub pages_read: u64,
    pub pages_written: u64,
    pub dirty_pages: u64,
    /// wbt's current limit on writes in flight.
    pub wbt_max_depth: u32,
}

/// One writeback context: a (device, domain) pair.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DomainStats {
    pub device: String,
    pub domain: String,
    pub dirty_pages: u64,
    pub writeback_pages: u64,
    /// Dirty pages written uncached (Linux's WB_DONTCACHE_DIRTY).
    pub dontcache_dirty_pages: u64,
    pub dirtied_pages: u64,
    pub written_pages: u64,
    pub dontcache: crate::dontcache::stats::DontcacheStats,
    /// Stalls of operations on this context's files, by reason.
    pub stalls: [StallStats; StallReason::ALL.len()],
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceStats {
    pub name: String,
    pub reads: u64,
    pub writes: u64,
    pub pages_read: u64,
    pub pages_written: u64,
    pub write_errors: u64,
    pub wbt_enabled: bool,
    pub wbt_target_ns: u64,
    /// wbt's in-flight limit at full depth now (max_depth).
    pub wbt_max_depth: u32,
    /// wbt's scale step now (rq_depth.rs: > 0 scaled down, < 0 up).
    pub wbt_scale_step: i32,
    pub wbt_max_depth_min: u32,
    pub wbt_max_depth_max: u32,
    pub wbt_scale_ups: u64,
    pub wbt_scale_downs: u64,
    pub wbt_windows: u64,
    /// wbt's pace step now (`wbt_pace.rs`: 0 not pacing).
    pub wbt_pace_step: u32,
    /// Writes held by wbt's pace.
    pub wbt_pace_holds: u64,
    /// Write slice cycles begun, and writes held by their quiet phases
    /// (`wbt_slice.rs`).
    pub wbt_slice_cycles: u64,
    pub wbt_slice_holds: u64,
    /// Reads held by write phases, and how long in all (each from its
    /// arrival to its phase's end).
    pub wbt_slice_read_holds: u64,
    pub wbt_slice_read_hold_ns: u64,
    /// The mean of whole commits (an fsync of at most 32 KiB, call to
    /// flush done) in wbt's last window that had enough of them; 0: none.
    pub wbt_commit_mean_ns: u64,
    pub inflight_peak: u32,
    /// Dirty-throttle pauses of writers to this device.
    pub throttle: StallStats,
    pub dirty_pages: u64,
    pub writeback_pages: u64,
    pub write_bw_pages_s: u64,
    /// Pages a writer was given a copy of because they were under
    /// writeback (`stable_writes = snapshot`).
    pub snapshot_pages: u64,
    /// What writers do with pages under writeback: none, wait, snapshot.
    pub stable_writes: String,
    /// The backlog of deferred releases (backlog/).
    pub backlog: crate::backlog::queue::BacklogStats,
    /// Free space at the runtime's last report, in pages (space/; 0
    /// without a report).
    pub space_free_pages: u64,
    /// Dirty pages holding a reservation of it.
    pub space_reserved_pages: u64,
    /// Writes that found too little room and had the device's dirty pages
    /// written back to learn the real free space.
    pub space_flushes: u64,
    /// Writes refused with ENOSPC.
    pub enospc_writes: u64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// The cache budget now.
    pub memory_pages: u64,
    /// Where the budget stands and what moved it (memory_budget/).
    pub memory: crate::memory_budget::stats::MemoryBudgetStats,
    pub cached_pages: u64,
    /// Frames writes in flight keep for themselves after writers were
    /// given copies of their pages (`stable_writes = snapshot`), in pages.
    pub snapshot_held_pages: u64,
    pub cached_peak_pages: u64,
    pub dirty_pages: u64,
    pub dirty_peak_pages: u64,
    pub writeback_pages: u64,
    pub writeback_peak_pages: u64,
    pub thresh_pages: u64,
    pub bg_thresh_pages: u64,
    pub dirtied_pages: u64,
    pub written_pages: u64,
    pub reclaimed_pages: u64,
    /// Pages moved to the active list: by a second access or a refault
    /// (Linux's pgactivate).
    pub pgactivate: u64,
    /// Pages moved from the active list to the inactive one (pgdeactivate).
    pub pgdeactivate: u64,
    /// Pages that came back within the working set and entered active
    /// (workingset_activate_file).
    pub workingset_activate: u64,
    /// Pages on the active list now.
    pub active_pages: u64,
    /// Pages read ahead of sequential readers without anyone waiting
    /// (readahead.rs).
    pub readahead_async_pages: u64,
    pub stalls: [StallStats; StallReason::ALL.len()],
    pub written_by_reason: [u64; WbReason::ALL.len()],
    pub works_coalesced: u64,
    pub devices: Vec<DeviceStats>,
    /// Per writeback context, in the order the contexts were made.
    pub domains: Vec<DomainStats>,
    /// Dirty pages written uncached, cache-wide.
    pub dontcache_dirty_pages: u64,
}

impl Stats {
    /// Notes the cache's dirty, writeback and cached pages in the peaks.
    pub(crate) fn note_peaks(&mut self, nr_dirty: u64, nr_writeback: u64, nr_cached: u64) {
        self.dirty_peak_pages = self.dirty_peak_pages.max(nr_dirty);
        self.writeback_peak_pages = self.writeback_peak_pages.max(nr_writeback);
        self.cached_peak_pages = self.cached_peak_pages.max(nr_cached);
    }

    pub fn stall(&self, reason: StallReason) -> StallStats {
        self.stalls[reason.index()]
    }

    /// Pages written back for `reason`.
    pub fn written_by(&self, reason: WbReason) -> u64 {
        self.written_by_reason[reason.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalls_fall_in_log2_buckets_of_microseconds() {
        let mut s = StallStats::default();
        for ns in [0, 999, 1_000, 1_999, 2_000, 1_000_000, 3_600_000_000_000] {
            s.record(ns);
        }
        assert_eq!(&s.buckets[..3], &[2, 2, 1]);
        // 1 ms = 1000 µs: [512, 1024).
        assert_eq!(s.buckets[10], 1);
        assert_eq!(StallStats::bucket_end_us(10), Some(1024));
        // An hour: the last bucket, open-ended.
        assert_eq!(s.buckets[STALL_BUCKETS - 1], 1);
        assert_eq!(StallStats::bucket_end_us(STALL_BUCKETS - 1), None);
        assert_eq!(s.buckets.iter().sum::<u64>(), s.count);
    }
}
