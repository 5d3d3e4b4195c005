//! What a run reports: per job fio-style throughput and latency
//! percentiles, and the engine's statistics. Same shape for `wb sim` and
//! `wb run`.

use crate::timeline::{EngineSample, LatencySlot};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use wb_engine::units::pages_mib as mib;
use wb_engine::{DomainStats, StallReason, StallStats, Stats, WbReason};

/// Latencies are recorded in nanoseconds, up to an hour, 3 significant digits.
pub const LATENCY_MAX_NS: u64 = 3_600_000_000_000;

/// A latency histogram.
#[derive(Clone, Debug)]
pub struct Latency {
    hist: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Latency {
            hist: Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3).expect("valid histogram bounds"),
        }
    }
}

impl Latency {
    pub fn record(&mut self, ns: u64) {
        self.hist.saturating_record(ns.clamp(1, LATENCY_MAX_NS));
    }

    /// `n` operations of `ns` each.
    pub fn record_n(&mut self, ns: u64, n: u64) {
        self.hist
            .saturating_record_n(ns.clamp(1, LATENCY_MAX_NS), n);
    }

    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    pub fn summary(&self) -> LatencySummary {
        let us = |q: f64| {
            if self.hist.is_empty() {
                0.0
            } else {
                self.hist.value_at_quantile(q) as f64 / 1000.0
            }
        };
        LatencySummary {
            p50: us(0.50),
            p90: us(0.90),
            p99: us(0.99),
            p99_9: us(0.999),
            p99_99: us(0.9999),
            max: if self.hist.is_empty() {
                0.0
            } else {
                self.hist.max() as f64 / 1000.0
            },
        }
    }
}

/// Count, total and longest latency of one kind of operation: what dbench
/// reports per kind, for a few additions per operation.
#[derive(Clone, Copy, Debug, Default)]
pub struct KindTally {
    count: u64,
    total_ns: u128,
    max_ns: u64,
}

impl KindTally {
    pub fn record(&mut self, ns: u64) {
        self.record_n(ns, 1);
    }

    /// `n` operations of `ns` each.
    pub fn record_n(&mut self, ns: u64, n: u64) {
        if n == 0 {
            return;
        }
        self.count += n;
        self.total_ns += ns as u128 * n as u128;
        self.max_ns = self.max_ns.max(ns);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn report(&self, kind: &str) -> OpKindReport {
        OpKindReport {
            kind: kind.to_string(),
            count: self.count,
            avg_us: self.total_ns as f64 / self.count.max(1) as f64 / 1000.0,
            max_us: self.max_ns as f64 / 1000.0,
        }
    }
}

/// One kind of operation of a job (write, read, flush), as dbench reports:
/// how many, their mean and their longest latency in microseconds.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct OpKindReport {
    pub kind: String,
    pub count: u64,
    pub avg_us: f64,
    pub max_us: f64,
}

/// Percentiles in microseconds.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LatencySummary {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub p99_99: f64,
    pub max: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct JobReport {
    pub name: String,
    pub kind: String,
    pub device: String,
    pub ops: u64,
    pub bytes: u64,
    pub elapsed_s: f64,
    pub iops: f64,
    pub bw_mib_s: f64,
    /// Latency of the job's main operation (write or read).
    pub lat_us: LatencySummary,
    /// fsync/sync calls and their latency, if the job made any.
    pub syncs: u64,
    pub sync_lat_us: LatencySummary,
    /// Each kind of operation the job made (write, read, flush: fsync or
    /// sync), in that order, leaving out kinds it never made.
    pub op_kinds: Vec<OpKindReport>,
    /// Operations that returned an error.
    pub errors: u64,
    /// A foreground job the run's duration ended before it finished: its
    /// figures cover only what it did until then.
    pub cut_off: bool,
    /// How much of the job's files the cache held when the run ended
    /// (the simulator knows; None where the runner does not).
    pub cached_end_mib: Option<f64>,
    /// Latency of the job's writes and reads per slot of `lat_slot_s`
    /// seconds (slots without any left out; timeline.rs).
    #[serde(default)]
    pub lat_slot_s: f64,
    #[serde(default)]
    pub lat_over_time: Vec<LatencySlot>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct StallReport {
    pub reason: String,
    pub count: u64,
    pub total_ms: f64,
    pub max_ms: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DeviceReport {
    pub name: String,
    pub model: String,
    /// Fraction of the time the device was busy; None where not measured (real devices).
    pub utilization: Option<f64>,
    pub reads: u64,
    pub writes: u64,
    pub read_mib: f64,
    pub written_mib: f64,
    pub wbt_enabled: bool,
    pub wbt_target_us: f64,
    pub wbt_max_depth_min: u32,
    pub wbt_max_depth_max: u32,
    pub wbt_scale_downs: u64,
    pub wbt_scale_ups: u64,
    pub inflight_peak: u32,
    pub throttle_pauses: u64,
    pub throttle_total_ms: f64,
    pub throttle_max_ms: f64,
    pub write_errors: u64,
    /// How writers treat pages under writeback (none, wait, snapshot).
    pub stable_writes: String,
    /// Pages writers were given copies of (`stable_writes = snapshot`).
    pub snapshot_pages: u64,
    /// The backlog of deferred releases of unlinked files.
    pub backlog: BacklogReport,
}

/// A device's backlog of deferred releases (engine backlog/).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BacklogReport {
    pub items_done: u64,
    pub steps_done: u64,
    /// Times producers found it full (watermarks: the throttle bit set;
    /// flush-all: a wait for the whole backlog).
    pub throttles: u64,
    pub max_items: u64,
    pub max_level_ms: f64,
    /// Most large files parked at once (past their first step).
    pub max_parked: u64,
    pub high_ms: f64,
    pub low_ms: f64,
    /// The learned cost estimates.
    pub est_file_us: f64,
    pub est_mib_us: f64,
    pub errors: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct EngineReport {
    pub memory_mib: f64,
    pub thresh_mib: f64,
    pub bg_thresh_mib: f64,
    pub dirty_peak_mib: f64,
    pub writeback_peak_mib: f64,
    pub cached_peak_mib: f64,
    pub dirtied_mib: f64,
    pub written_mib: f64,
    pub written_by_reason_mib: Vec<(String, f64)>,
    pub stalls: Vec<StallReport>,
    pub devices: Vec<DeviceReport>,
    /// Cached when the run ended.
    pub cached_end_mib: f64,
    /// Of which on the active list (lru.rs).
    pub active_end_mib: f64,
    /// Moved to the active list over the run (pgactivate), of which on a
    /// refault within the working set (workingset_activate).
    pub activated_mib: f64,
    pub workingset_activate_mib: f64,
    /// Per writeback context (device, domain).
    pub domains: Vec<DomainReport>,
}

/// One writeback context (a device and a domain) over the run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DomainReport {
    pub device: String,
    pub domain: String,
    pub dirtied_mib: f64,
    pub written_mib: f64,
    /// Flusher kicks by uncached writes, and those that coalesced.
    pub dontcache_kicks: u64,
    pub dontcache_kicks_coalesced: u64,
    /// DONTCACHE works, the pages they were asked to write, and the
    /// context's own uncached dirty pages when they started.
    pub dontcache_works: u64,
    pub dontcache_work_mib: f64,
    pub dontcache_dirty_at_work_mib: f64,
    /// work / dirty at work: the share of its uncached pages a kick covers.
    pub dontcache_kick_share: Option<f64>,
    /// Pages that left the cache when their writeback ended.
    pub dropped_behind_mib: f64,
    /// Stalls of this context's operations, by reason (non-zero ones).
    pub stalls: Vec<StallReport>,
}

impl DomainReport {
    fn new(d: &DomainStats) -> DomainReport {
        let dc = &d.dontcache;
        DomainReport {
            device: d.device.clone(),
            domain: d.domain.clone(),
            dirtied_mib: mib(d.dirtied_pages),
            written_mib: mib(d.written_pages),
            dontcache_kicks: dc.kicks,
            dontcache_kicks_coalesced: dc.kicks_coalesced,
            dontcache_works: dc.works,
            dontcache_work_mib: mib(dc.work_pages),
            dontcache_dirty_at_work_mib: mib(dc.dirty_at_work),
            dontcache_kick_share: (dc.dirty_at_work > 0)
                .then(|| dc.work_pages as f64 / dc.dirty_at_work as f64),
            dropped_behind_mib: mib(dc.dropped_pages),
            stalls: stall_reports(&d.stalls)
                .into_iter()
                .filter(|s| s.count > 0)
                .collect(),
        }
    }
}

fn stall_reports(stalls: &[StallStats]) -> Vec<StallReport> {
    StallReason::ALL
        .iter()
        .map(|&r| {
            let s = stalls[r.index()];
            StallReport {
                reason: r.name().to_string(),
                count: s.count,
                total_ms: ms(s.total_ns),
                max_ms: ms(s.max_ns),
            }
        })
        .collect()
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunReport {
    pub scenario: String,
    pub seed: u64,
    pub sim_time_s: f64,
    pub wall_time_s: f64,
    pub jobs: Vec<JobReport>,
    pub engine: EngineReport,
    /// Real runs: the I/O backend used ("io_uring" or "threads").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_backend: Option<String>,
    /// The cache and devices over the run (timeline.rs).
    #[serde(default)]
    pub timeline: Vec<EngineSample>,
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Per-device facts the engine does not know (model name, utilisation).
pub struct DeviceFacts {
    pub model: String,
    pub utilization: Option<f64>,
}

impl EngineReport {
    pub fn new(stats: &Stats, facts: &[DeviceFacts]) -> EngineReport {
        let stalls = stall_reports(&stats.stalls);
        let devices = stats
            .devices
            .iter()
            .zip(facts)
            .map(|(d, f)| DeviceReport {
                name: d.name.clone(),
                model: f.model.clone(),
                utilization: f.utilization,
                reads: d.reads,
                writes: d.writes,
                read_mib: mib(d.pages_read),
                written_mib: mib(d.pages_written),
                wbt_enabled: d.wbt_enabled,
                wbt_target_us: d.wbt_target_ns as f64 / 1000.0,
                wbt_max_depth_min: d.wbt_max_depth_min,
                wbt_max_depth_max: d.wbt_max_depth_max,
                wbt_scale_downs: d.wbt_scale_downs,
                wbt_scale_ups: d.wbt_scale_ups,
                inflight_peak: d.inflight_peak,
                throttle_pauses: d.throttle.count,
                throttle_total_ms: ms(d.throttle.total_ns),
                throttle_max_ms: ms(d.throttle.max_ns),
                write_errors: d.write_errors,
                stable_writes: d.stable_writes.clone(),
                snapshot_pages: d.snapshot_pages,
                backlog: BacklogReport {
                    items_done: d.backlog.items_done,
                    steps_done: d.backlog.steps_done,
                    throttles: d.backlog.throttles,
                    max_items: d.backlog.max_items,
                    max_level_ms: ms(d.backlog.max_level_ns),
                    max_parked: d.backlog.max_parked,
                    high_ms: ms(d.backlog.high_ns),
                    low_ms: ms(d.backlog.low_ns),
                    est_file_us: d.backlog.est_file_ns as f64 / 1e3,
                    est_mib_us: d.backlog.est_mib_ns as f64 / 1e3,
                    errors: d.backlog.errors,
                },
            })
            .collect();
        EngineReport {
            memory_mib: mib(stats.memory_pages),
            thresh_mib: mib(stats.thresh_pages),
            bg_thresh_mib: mib(stats.bg_thresh_pages),
            dirty_peak_mib: mib(stats.dirty_peak_pages),
            writeback_peak_mib: mib(stats.writeback_peak_pages),
            cached_peak_mib: mib(stats.cached_peak_pages),
            dirtied_mib: mib(stats.dirtied_pages),
            written_mib: mib(stats.written_pages),
            written_by_reason_mib: WbReason::ALL
                .iter()
                .map(|r| {
                    (
                        r.name().to_string(),
                        mib(stats.written_by_reason[r.index()]),
                    )
                })
                .collect(),
            stalls,
            devices,
            cached_end_mib: mib(stats.cached_pages),
            active_end_mib: mib(stats.active_pages),
            activated_mib: mib(stats.pgactivate),
            workingset_activate_mib: mib(stats.workingset_activate),
            domains: stats.domains.iter().map(DomainReport::new).collect(),
        }
    }
}
