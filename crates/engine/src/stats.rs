//! Counters the engine keeps for people and tests: every stall by reason,
//! peaks of dirty and writeback memory, writeback by reason, wbt activity.

use crate::action::StallReason;
use crate::flusher::WbReason;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StallStats {
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

impl StallStats {
    pub fn record(&mut self, ns: u64) {
        self.count += 1;
        self.total_ns += ns;
        self.max_ns = self.max_ns.max(ns);
    }
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
    pub wbt_max_depth_min: u32,
    pub wbt_max_depth_max: u32,
    pub wbt_scale_ups: u64,
    pub wbt_scale_downs: u64,
    pub wbt_windows: u64,
    pub inflight_peak: u32,
    /// Dirty-throttle pauses of writers to this device.
    pub throttle: StallStats,
    pub dirty_pages: u64,
    pub writeback_pages: u64,
    pub write_bw_pages_s: u64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    pub memory_pages: u64,
    pub cached_pages: u64,
    /// Runs the cached pages are kept in (page_cache.rs): entries, not pages.
    pub cached_runs: u64,
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
    pub stalls: [StallStats; StallReason::ALL.len()],
    pub written_by_reason: [u64; WbReason::ALL.len()],
    pub works_coalesced: u64,
    pub devices: Vec<DeviceStats>,
}

impl Stats {
    pub fn stall(&self, reason: StallReason) -> StallStats {
        self.stalls[reason.index()]
    }
}
