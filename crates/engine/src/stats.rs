//! Counters the engine keeps for people and tests: every stall by reason,
//! peaks of dirty and writeback memory, writeback by reason, wbt activity.

use crate::action::StallReason;
use crate::action::WbReason;
use crate::config::StableWrites;
use crate::time::Instant;

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
    pub dontcache: crate::dontcache::DontcacheStats,
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
    pub backlog: crate::backlog::BacklogStats,
    /// Free space at the runtime's last report, in pages (space.rs; 0
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
    /// Where the budget stands and what moved it (memory_budget.rs).
    pub memory: crate::memory_budget::MemoryBudgetStats,
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
    pub fn stall(&self, reason: StallReason) -> StallStats {
        self.stalls[reason.index()]
    }

    /// Pages written back for `reason`.
    pub fn written_by(&self, reason: WbReason) -> u64 {
        self.written_by_reason[reason.index()]
    }
}

impl crate::engine::Engine {
    pub(crate) fn note_peaks(&mut self) {
        let s = &mut self.stats;
        s.dirty_peak_pages = s.dirty_peak_pages.max(self.nr_dirty);
        s.writeback_peak_pages = s.writeback_peak_pages.max(self.nr_writeback);
        s.cached_peak_pages = s.cached_peak_pages.max(self.nr_cached);
    }

    /// When the oldest dirty data was dirtied (its file went from clean to
    /// dirty: Linux's dirtied_when), None with nothing dirty. What a crash
    /// of the process would lose is at most this old.
    pub fn oldest_dirtied_at(&self) -> Option<Instant> {
        self.wbs
            .iter()
            .filter_map(|w| w.dirty_files.first().map(|&(when, _)| when))
            .min()
    }

    /// Runs the cached pages are kept in (page_cache/): entries, not
    /// pages. Linear in the files, so not part of `stats`, which
    /// runtimes and the simulator's timeline call often (with 30,000
    /// files it cost the chinner-2021 scenario three quarters of its time).
    pub fn cached_runs(&self) -> u64 {
        self.files.iter().map(|f| f.nr_runs() as u64).sum()
    }

    /// The writeback contexts of device `i`.
    fn device_wbs(&self, i: usize) -> impl Iterator<Item = &crate::wb::Wb> {
        self.wbs.iter().filter(move |w| w.device.index() == i)
    }

    /// The few counters a timeline samples, without the copies `stats`
    /// makes (names, histograms): cheap enough to take a thousand times a
    /// run.
    pub fn gauges(&self) -> Gauges {
        Gauges {
            cached_pages: self.nr_cached,
            dirty_pages: self.nr_dirty,
            writeback_pages: self.nr_writeback,
            thresh_pages: self.dom.thresh.thresh,
            bg_thresh_pages: self.dom.thresh.bg_thresh,
            devices: self
                .devices
                .iter()
                .enumerate()
                .map(|(i, d)| DeviceGauges {
                    pages_read: d.stats.pages_read,
                    pages_written: d.stats.pages_written,
                    dirty_pages: self.device_wbs(i).map(|w| w.dirty).sum(),
                    wbt_max_depth: d.wbt.rq_depth.max_depth,
                })
                .collect(),
            stalled_ns: self.stats.stalls.map(|s| s.total_ns),
        }
    }

    /// The engine's counters now. Costs in devices and writeback
    /// contexts, never in files or pages.
    pub fn stats(&self) -> Stats {
        let mut s = self.stats.clone();
        s.memory = self.memory_budget_stats();
        s.cached_pages = self.nr_cached;
        s.snapshot_held_pages = self.nr_snapshot;
        s.active_pages = self.nr_active;
        s.dirty_pages = self.nr_dirty;
        s.writeback_pages = self.nr_writeback;
        s.thresh_pages = self.dom.thresh.thresh;
        s.bg_thresh_pages = self.dom.thresh.bg_thresh;
        s.works_coalesced = self.wbs.iter().map(|w| w.flusher.works_coalesced).sum();
        s.devices = self
            .devices
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let mut ds = d.stats.clone();
                ds.wbt_max_depth = d.wbt.rq_depth.max_depth;
                ds.wbt_scale_step = d.wbt.rq_depth.scale_step;
                ds.wbt_max_depth_min = d.wbt.max_depth_min;
                ds.wbt_max_depth_max = d.wbt.max_depth_max;
                ds.wbt_scale_ups = d.wbt.scale_ups;
                ds.wbt_scale_downs = d.wbt.scale_downs;
                ds.wbt_pace_step = d.wbt.pace.step;
                ds.wbt_pace_holds = d.wbt.pace.holds;
                ds.wbt_slice_cycles = d.wbt.slice.cycles;
                ds.wbt_slice_holds = d.wbt.slice.holds;
                ds.wbt_slice_read_holds = d.wbt.slice.read_holds;
                ds.wbt_slice_read_hold_ns = d.wbt.slice.read_hold_ns;
                ds.wbt_commit_mean_ns = d.wbt.last_commit_mean_ns;
                ds.stable_writes = match d.config.stable_writes {
                    StableWrites::Auto => format!("{} (auto)", d.stable_mode().name()),
                    mode => mode.name().to_string(),
                };
                ds.backlog = d.backlog.stats(self.config.backlog_wait_ms);
                ds.space_reserved_pages = d.space.reserved;
                ds.space_free_pages = d.space.free_pages.unwrap_or(0);
                for w in self.device_wbs(i) {
                    ds.dirty_pages += w.dirty;
                    ds.writeback_pages += w.writeback;
                    ds.write_bw_pages_s += w.bw.avg_write_bw;
                }
                ds
            })
            .collect();
        s.domains = self.wbs.iter().map(|w| self.domain_stats(w)).collect();
        s.dontcache_dirty_pages = self.nr_dontcache_dirty;
        s
    }

    fn domain_stats(&self, w: &crate::wb::Wb) -> DomainStats {
        DomainStats {
            device: self.devices[w.device.index()].stats.name.clone(),
            domain: self.domains[w.domain.index()].clone(),
            dirty_pages: w.dirty,
            writeback_pages: w.writeback,
            dontcache_dirty_pages: w.nr_dontcache_dirty,
            dirtied_pages: w.dirtied,
            written_pages: w.written,
            dontcache: w.dontcache,
            stalls: w.stalls,
        }
    }
}
