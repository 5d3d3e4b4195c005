//! The cache's figures as metric families (Prometheus's model: counters,
//! gauges and histograms with labels), built from one [`Stats`] snapshot,
//! the same one `.writeback/stats` shows: nothing here keeps a counter of
//! its own.
//!
//! Three ways out, one set of names:
//!
//! - [`render_prometheus`]: the text exposition format 0.0.4 (the mount's
//!   `.writeback/metrics`; any program can serve it).
//! - Feature `metrics`: the `metrics` facade (facade.rs). The library
//!   never installs a recorder; the program picks one (an exporter, or
//!   none: then every call is a no-op). Counters and gauges are published
//!   from a snapshot by the runtime's timer thread every
//!   [`PUBLISH_EVERY`](facade::PUBLISH_EVERY) and on
//!   [`Cache::publish_metrics`](crate::Cache::publish_metrics), with the
//!   names and labels below: the engine keeps its counters anyway (for
//!   stats and decisions), so publishing them costs nothing on the data
//!   path, and a snapshot a second is as fresh as a scrape. Facade
//!   histograms cannot be fed bucket counts, so the pause histogram
//!   `wb_pause_duration_seconds{reason}` is recorded where a caller's wait
//!   ends (after a sleep, never on a path that did not sleep). The
//!   per-device and per-domain pause histograms, and counters in seconds
//!   (the facade's counters are integers), are in the text only.
//! - Feature `tracing`: each wait imposed on a caller is a `wb.stall`
//!   span with its reason, file and duration (spans.rs).
//!
//! Names carry their unit (`_bytes`, `_seconds`), counters end in
//! `_total`; labels are `device`, `domain`, `reason` (of a pause or of a
//! writeback), `mode`. Durations are histograms in the engine's log2
//! buckets of whole microseconds (`StallStats`): `le` from 1 µs (0.000001)
//! to 2^23 µs (8.388608 s), then `+Inf`. A bucket holds the durations
//! below its bound (one of exactly 2^k µs counts in the next one).

pub(crate) mod prometheus;

#[cfg(feature = "metrics")]
pub(crate) mod facade;
#[cfg(feature = "tracing")]
pub(crate) mod spans;

pub use prometheus::render_prometheus;

use std::time::Duration;
use wb_engine::{
    DeviceStats, DomainStats, MemoryBudgetStats, StallReason, StallStats, Stats, WbReason,
    PAGE_SIZE, STALL_BUCKETS,
};

/// What a family measures (Prometheus's `# TYPE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// One value of a series.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// Bytes, counts, flags.
    Int(u64),
    /// A signed figure (wbt's scale step).
    Signed(i64),
    /// `units / 10^decimals`, kept in integers so the text is exact:
    /// seconds from nanoseconds (9), a ratio from permille (3).
    Fixed {
        units: u64,
        decimals: u32,
    },
    Histogram(Histogram),
}

impl Value {
    /// Seconds from nanoseconds.
    pub fn seconds_from_ns(ns: u64) -> Value {
        Value::Fixed {
            units: ns,
            decimals: 9,
        }
    }

    /// The value as a float (the facade's gauges); None for a histogram.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Int(v) => Some(v as f64),
            Value::Signed(v) => Some(v as f64),
            Value::Fixed { units, decimals } => Some(units as f64 / 10f64.powi(decimals as i32)),
            Value::Histogram(_) => None,
        }
    }
}

/// Durations in the engine's log2 buckets of µs (`StallStats::bucket`):
/// `buckets[k]` counts those in bucket k alone (not cumulative), the last
/// one those from 2^(STALL_BUCKETS-2) µs on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Histogram {
    pub buckets: [u64; STALL_BUCKETS],
    pub sum_ns: u64,
}

impl Histogram {
    pub fn from_stalls(s: &StallStats) -> Histogram {
        Histogram {
            buckets: s.buckets,
            sum_ns: s.total_ns,
        }
    }

    /// How many durations in all (the buckets' sum, so `_count` always
    /// equals the `+Inf` bucket).
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

/// One series: its labels (name, value) and value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Series {
    pub labels: Vec<(&'static str, String)>,
    pub value: Value,
}

/// A metric family: a name, its help text, its kind and its series.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    pub series: Vec<Series>,
}

impl Family {
    pub fn new(name: &'static str, help: &'static str, kind: Kind) -> Family {
        Family {
            name,
            help,
            kind,
            series: Vec::new(),
        }
    }

    /// Adds a series.
    pub fn with(mut self, labels: Vec<(&'static str, String)>, value: Value) -> Family {
        self.series.push(Series { labels, value });
        self
    }

    /// A family of one series without labels.
    pub fn single(name: &'static str, help: &'static str, kind: Kind, value: Value) -> Family {
        Family::new(name, help, kind).with(Vec::new(), value)
    }
}

/// A wait imposed on a caller, as the features report it: a `tracing`
/// span around it, the facade's pause histogram when it ends. Begun after
/// the engine said Sleep and the cache's lock was let go, ended when the
/// caller is woken: the same stretch the engine counts in its stalls.
#[cfg(any(feature = "metrics", feature = "tracing"))]
pub(crate) struct Wait {
    #[cfg(feature = "metrics")]
    reason: StallReason,
    started: std::time::Instant,
    #[cfg(feature = "tracing")]
    span: tracing::span::EnteredSpan,
}

#[cfg(any(feature = "metrics", feature = "tracing"))]
impl Wait {
    pub(crate) fn begin(reason: StallReason, file: Option<wb_engine::FileId>) -> Wait {
        #[cfg(not(feature = "tracing"))]
        let _ = file;
        #[cfg(not(feature = "metrics"))]
        let _ = reason;
        Wait {
            #[cfg(feature = "metrics")]
            reason,
            started: std::time::Instant::now(),
            #[cfg(feature = "tracing")]
            span: spans::stall_span(reason, file).entered(),
        }
    }

    pub(crate) fn end(self) {
        let waited = self.started.elapsed();
        #[cfg(not(any(feature = "metrics", feature = "tracing")))]
        let _ = waited;
        #[cfg(feature = "tracing")]
        spans::stall_ended(&self.span, waited);
        #[cfg(feature = "metrics")]
        facade::record_pause(self.reason, waited);
    }
}

use Kind::{Counter, Gauge};

fn bytes(pages: u64) -> Value {
    Value::Int(pages * PAGE_SIZE)
}

/// The cache's families from one snapshot: cache-wide, then per device
/// (label `device`), then per writeback domain (`device`, `domain`).
/// `oldest_dirty_age`: `Cache::oldest_dirty_age`.
pub fn families(stats: &Stats, oldest_dirty_age: Option<Duration>) -> Vec<Family> {
    let mut out = Vec::new();
    cache_families(&mut out, stats, oldest_dirty_age);
    memory_families(&mut out, stats);
    pause_families(&mut out, stats);
    device_families(&mut out, &stats.devices);
    domain_families(&mut out, &stats.domains);
    out
}

type CacheFigure = (&'static str, &'static str, Kind, fn(&Stats) -> Value);

const CACHE: &[CacheFigure] = &[
    ("wb_cached_bytes", "Data in the cache.", Gauge, |s| {
        bytes(s.cached_pages)
    }),
    (
        "wb_dirty_bytes",
        "Dirty data: written, not yet written back.",
        Gauge,
        |s| bytes(s.dirty_pages),
    ),
    (
        "wb_writeback_bytes",
        "Data under writeback (writes in flight).",
        Gauge,
        |s| bytes(s.writeback_pages),
    ),
    (
        "wb_reclaimable_bytes",
        "Clean data the cache can drop.",
        Gauge,
        |s| {
            bytes(
                s.cached_pages
                    .saturating_sub(s.dirty_pages + s.writeback_pages),
            )
        },
    ),
    ("wb_active_bytes", "Data on the active list.", Gauge, |s| {
        bytes(s.active_pages)
    }),
    (
        "wb_dontcache_dirty_bytes",
        "Dirty data written uncached (DONTCACHE).",
        Gauge,
        |s| bytes(s.dontcache_dirty_pages),
    ),
    (
        "wb_dirty_threshold_bytes",
        "Dirty data at which writers are throttled.",
        Gauge,
        |s| bytes(s.thresh_pages),
    ),
    (
        "wb_dirty_background_threshold_bytes",
        "Dirty data at which background writeback starts.",
        Gauge,
        |s| bytes(s.bg_thresh_pages),
    ),
    (
        "wb_dirty_peak_bytes",
        "The most dirty data at once since the start.",
        Gauge,
        |s| bytes(s.dirty_peak_pages),
    ),
    (
        "wb_writeback_peak_bytes",
        "The most data under writeback at once since the start.",
        Gauge,
        |s| bytes(s.writeback_peak_pages),
    ),
    (
        "wb_dirtied_bytes_total",
        "Data made dirty by writes.",
        Counter,
        |s| bytes(s.dirtied_pages),
    ),
    (
        "wb_reclaimed_bytes_total",
        "Clean data dropped from the cache.",
        Counter,
        |s| bytes(s.reclaimed_pages),
    ),
    (
        "wb_activated_bytes_total",
        "Data moved to the active list (pgactivate).",
        Counter,
        |s| bytes(s.pgactivate),
    ),
    (
        "wb_deactivated_bytes_total",
        "Data moved from the active list to the inactive one (pgdeactivate).",
        Counter,
        |s| bytes(s.pgdeactivate),
    ),
    (
        "wb_workingset_activate_bytes_total",
        "Data that came back within the working set.",
        Counter,
        |s| bytes(s.workingset_activate),
    ),
    (
        "wb_readahead_async_bytes_total",
        "Data read ahead of sequential readers.",
        Counter,
        |s| bytes(s.readahead_async_pages),
    ),
];

fn cache_families(out: &mut Vec<Family>, stats: &Stats, oldest_dirty_age: Option<Duration>) {
    for &(name, help, kind, value) in CACHE {
        out.push(Family::single(name, help, kind, value(stats)));
    }
    // At most what a crash of the process would lose (0 with nothing dirty).
    let age_ns = oldest_dirty_age.map_or(0, |a| u64::try_from(a.as_nanos()).unwrap_or(u64::MAX));
    out.push(Family::single(
        "wb_dirty_oldest_age_seconds",
        "Age of the oldest dirty data (0: none).",
        Gauge,
        Value::seconds_from_ns(age_ns),
    ));
    let mut written = Family::new(
        "wb_written_bytes_total",
        "Data written back, by writeback reason.",
        Counter,
    );
    for reason in WbReason::ALL {
        written = written.with(
            vec![("reason", reason.name().to_string())],
            bytes(stats.written_by(reason)),
        );
    }
    out.push(written);
}

type MemoryFigure = (
    &'static str,
    &'static str,
    Kind,
    fn(&MemoryBudgetStats) -> Value,
);

const MEMORY: &[MemoryFigure] = &[
    (
        "wb_memory_ceiling_bytes",
        "The budget's ceiling (the memory knob).",
        Gauge,
        |m| bytes(m.ceiling_pages),
    ),
    (
        "wb_memory_floor_bytes",
        "The budget's floor (memory_min).",
        Gauge,
        |m| bytes(m.floor_pages),
    ),
    (
        "wb_memory_follows_pressure",
        "1 if the budget follows memory pressure.",
        Gauge,
        |m| Value::Int(m.follows_pressure as u64),
    ),
    (
        "wb_memory_budget_shrinks_total",
        "Times the budget was lowered.",
        Counter,
        |m| Value::Int(m.shrinks),
    ),
    (
        "wb_memory_budget_grows_total",
        "Times the budget was raised.",
        Counter,
        |m| Value::Int(m.grows),
    ),
    (
        "wb_memory_budget_shrunk_bytes_total",
        "Memory the budget was lowered by, in all.",
        Counter,
        |m| bytes(m.shrunk_pages),
    ),
    (
        "wb_memory_budget_grown_bytes_total",
        "Memory the budget was raised by, in all.",
        Counter,
        |m| bytes(m.grown_pages),
    ),
    (
        "wb_memory_given_back_bytes_total",
        "Memory of frames given back to the system.",
        Counter,
        |m| bytes(m.given_back_pages),
    ),
    (
        "wb_memory_available_bytes",
        "Memory available where the cache runs, at the last sample.",
        Gauge,
        |m| Value::Int(m.view.available_bytes),
    ),
    (
        "wb_memory_reserve_bytes",
        "Memory kept free for others, at the last sample.",
        Gauge,
        |m| Value::Int(m.view.reserve_bytes),
    ),
    (
        "wb_memory_limit_bytes",
        "The memory limit where the cache runs, at the last sample.",
        Gauge,
        |m| Value::Int(m.view.limit_bytes),
    ),
    (
        "wb_memory_limit_is_cgroup",
        "1 if that limit is the cgroup's.",
        Gauge,
        |m| Value::Int(m.view.cgroup_binds as u64),
    ),
    (
        "wb_memory_demand_bytes",
        "Memory the cache asks for, at the last sample.",
        Gauge,
        |m| Value::Int(m.view.demand_bytes),
    ),
    (
        "wb_memory_pressure_some_ratio",
        "Memory pressure (PSI some), 0 to 1, at the last sample.",
        Gauge,
        |m| Value::Fixed {
            units: m.view.some_permille,
            decimals: 3,
        },
    ),
    (
        "wb_memory_pressure_full_ratio",
        "Memory pressure (PSI full), 0 to 1, at the last sample.",
        Gauge,
        |m| Value::Fixed {
            units: m.view.full_permille,
            decimals: 3,
        },
    ),
];

fn memory_families(out: &mut Vec<Family>, stats: &Stats) {
    let m = &stats.memory;
    out.push(Family::single(
        "wb_memory_budget_bytes",
        "The cache's memory budget now.",
        Gauge,
        bytes(stats.memory_pages),
    ));
    for &(name, help, kind, value) in MEMORY {
        out.push(Family::single(name, help, kind, value(m)));
    }
    let mut reason = Family::new(
        "wb_memory_budget_reason",
        "Why the budget is what it is: 1 for the reason in force.",
        Gauge,
    );
    for r in wb_engine::BudgetReason::ALL {
        reason = reason.with(
            vec![("reason", r.name().to_string())],
            Value::Int((m.reason == r) as u64),
        );
    }
    out.push(reason);
}

/// A counter of pauses and a histogram of their durations, one series
/// per (labels, reason) from `stalls`.
fn pause_pair<'a>(
    out: &mut Vec<Family>,
    names: [(&'static str, &'static str); 2],
    stalls: impl Iterator<Item = (Vec<(&'static str, String)>, StallReason, &'a StallStats)>,
) {
    let mut count = Family::new(names[0].0, names[0].1, Counter);
    let mut duration = Family::new(names[1].0, names[1].1, Kind::Histogram);
    for (mut labels, reason, s) in stalls {
        labels.push(("reason", reason.name().to_string()));
        count = count.with(labels.clone(), Value::Int(s.count));
        duration = duration.with(labels, Value::Histogram(Histogram::from_stalls(s)));
    }
    out.push(count);
    out.push(duration);
}

fn pause_families(out: &mut Vec<Family>, stats: &Stats) {
    pause_pair(
        out,
        [
            ("wb_pauses_total", "Waits imposed on callers, by reason."),
            (
                "wb_pause_duration_seconds",
                "How long callers waited, by reason.",
            ),
        ],
        StallReason::ALL
            .iter()
            .map(|&r| (Vec::new(), r, &stats.stalls[r.index()])),
    );
}

type DeviceFigure = (&'static str, &'static str, Kind, fn(&DeviceStats) -> Value);

const DEVICE: &[DeviceFigure] = &[
    (
        "wb_device_dirty_bytes",
        "A device's dirty data.",
        Gauge,
        |d| bytes(d.dirty_pages),
    ),
    (
        "wb_device_writeback_bytes",
        "A device's data under writeback.",
        Gauge,
        |d| bytes(d.writeback_pages),
    ),
    (
        "wb_device_written_bytes_total",
        "Data written to a device.",
        Counter,
        |d| bytes(d.pages_written),
    ),
    (
        "wb_device_read_bytes_total",
        "Data read from a device.",
        Counter,
        |d| bytes(d.pages_read),
    ),
    (
        "wb_device_writes_total",
        "Write requests sent to a device.",
        Counter,
        |d| Value::Int(d.writes),
    ),
    (
        "wb_device_reads_total",
        "Read requests sent to a device.",
        Counter,
        |d| Value::Int(d.reads),
    ),
    (
        "wb_device_write_errors_total",
        "Writes to a device that failed.",
        Counter,
        |d| Value::Int(d.write_errors),
    ),
    (
        "wb_device_write_bandwidth_bytes_per_second",
        "A device's estimated write bandwidth.",
        Gauge,
        |d| bytes(d.write_bw_pages_s),
    ),
    (
        "wb_device_space_free_bytes",
        "A device's free space at its last report.",
        Gauge,
        |d| bytes(d.space_free_pages),
    ),
    (
        "wb_device_space_reserved_bytes",
        "Space reserved for a device's dirty data.",
        Gauge,
        |d| bytes(d.space_reserved_pages),
    ),
    (
        "wb_device_space_flushes_total",
        "Writes that found too little room and had the device written back.",
        Counter,
        |d| Value::Int(d.space_flushes),
    ),
    (
        "wb_device_enospc_writes_total",
        "Writes refused with ENOSPC.",
        Counter,
        |d| Value::Int(d.enospc_writes),
    ),
    (
        "wb_device_stable_writes_auto",
        "1 if the device chose its stable_writes mode (auto).",
        Gauge,
        |d| Value::Int(d.stable_writes.ends_with("(auto)") as u64),
    ),
    (
        "wb_device_snapshot_bytes_total",
        "Data writers were given copies of (stable_writes = snapshot).",
        Counter,
        |d| bytes(d.snapshot_pages),
    ),
    (
        "wb_wbt_enabled",
        "1 if writeback throttling (wbt) is on for a device.",
        Gauge,
        |d| Value::Int(d.wbt_enabled as u64),
    ),
    (
        "wb_wbt_target_seconds",
        "wbt's read latency target.",
        Gauge,
        |d| Value::seconds_from_ns(d.wbt_target_ns),
    ),
    (
        "wb_wbt_depth",
        "wbt's limit on writeback writes in flight now.",
        Gauge,
        |d| Value::Int(u64::from(d.wbt_max_depth)),
    ),
    (
        "wb_wbt_scale_step",
        "wbt's scale step (above 0 scaled down, below 0 up).",
        Gauge,
        |d| Value::Signed(i64::from(d.wbt_scale_step)),
    ),
    (
        "wb_wbt_scale_ups_total",
        "Times wbt raised its depth.",
        Counter,
        |d| Value::Int(d.wbt_scale_ups),
    ),
    (
        "wb_wbt_scale_downs_total",
        "Times wbt lowered its depth.",
        Counter,
        |d| Value::Int(d.wbt_scale_downs),
    ),
    (
        "wb_wbt_windows_total",
        "wbt's latency windows.",
        Counter,
        |d| Value::Int(d.wbt_windows),
    ),
    (
        "wb_wbt_pace_step",
        "wbt's pace step (0: not pacing).",
        Gauge,
        |d| Value::Int(u64::from(d.wbt_pace_step)),
    ),
    (
        "wb_wbt_pace_holds_total",
        "Writes held by wbt's pace.",
        Counter,
        |d| Value::Int(d.wbt_pace_holds),
    ),
    (
        "wb_wbt_slice_cycles_total",
        "Write slice cycles begun.",
        Counter,
        |d| Value::Int(d.wbt_slice_cycles),
    ),
    (
        "wb_wbt_slice_holds_total",
        "Writes held by the quiet phases of write slices.",
        Counter,
        |d| Value::Int(d.wbt_slice_holds),
    ),
    (
        "wb_wbt_slice_read_holds_total",
        "Reads held by write phases.",
        Counter,
        |d| Value::Int(d.wbt_slice_read_holds),
    ),
    (
        "wb_wbt_slice_read_hold_seconds_total",
        "Time reads were held by write phases, in all.",
        Counter,
        |d| Value::seconds_from_ns(d.wbt_slice_read_hold_ns),
    ),
    (
        "wb_wbt_commit_mean_seconds",
        "Mean of small whole commits in wbt's last full window (0: none).",
        Gauge,
        |d| Value::seconds_from_ns(d.wbt_commit_mean_ns),
    ),
    (
        "wb_backlog_items",
        "Deferred releases queued on a device.",
        Gauge,
        |d| Value::Int(d.backlog.items),
    ),
    (
        "wb_backlog_level_seconds",
        "The estimated cost of the backlog.",
        Gauge,
        |d| Value::seconds_from_ns(d.backlog.level_ns),
    ),
    (
        "wb_backlog_high_seconds",
        "The backlog's high watermark.",
        Gauge,
        |d| Value::seconds_from_ns(d.backlog.high_ns),
    ),
    (
        "wb_backlog_low_seconds",
        "The backlog's low watermark.",
        Gauge,
        |d| Value::seconds_from_ns(d.backlog.low_ns),
    ),
    (
        "wb_backlog_items_peak",
        "The most deferred releases queued at once.",
        Gauge,
        |d| Value::Int(d.backlog.max_items),
    ),
    (
        "wb_backlog_parked_peak",
        "The most large files parked at once.",
        Gauge,
        |d| Value::Int(d.backlog.max_parked),
    ),
    (
        "wb_backlog_items_done_total",
        "Deferred releases done.",
        Counter,
        |d| Value::Int(d.backlog.items_done),
    ),
    (
        "wb_backlog_steps_done_total",
        "Release steps done.",
        Counter,
        |d| Value::Int(d.backlog.steps_done),
    ),
    (
        "wb_backlog_throttles_total",
        "Times a producer found the backlog full.",
        Counter,
        |d| Value::Int(d.backlog.throttles),
    ),
    (
        "wb_backlog_errors_total",
        "Release steps that failed.",
        Counter,
        |d| Value::Int(d.backlog.errors),
    ),
];

fn device_label(d: &DeviceStats) -> Vec<(&'static str, String)> {
    vec![("device", d.name.clone())]
}

fn device_families(out: &mut Vec<Family>, devices: &[DeviceStats]) {
    for &(name, help, kind, value) in DEVICE {
        let mut family = Family::new(name, help, kind);
        for d in devices {
            family = family.with(device_label(d), value(d));
        }
        out.push(family);
    }
    let mut stable = Family::new(
        "wb_device_stable_writes",
        "What writers do with a device's pages under writeback: 1 for the mode in force.",
        Gauge,
    );
    for d in devices {
        for mode in ["none", "wait", "snapshot"] {
            let on = d.stable_writes.split(' ').next() == Some(mode);
            let mut labels = device_label(d);
            labels.push(("mode", mode.to_string()));
            stable = stable.with(labels, Value::Int(on as u64));
        }
    }
    out.push(stable);
    pause_pair(
        out,
        [
            (
                "wb_device_pauses_total",
                "Waits of writers to a device, by reason.",
            ),
            (
                "wb_device_pause_duration_seconds",
                "How long writers to a device waited, by reason.",
            ),
        ],
        devices
            .iter()
            .map(|d| (device_label(d), StallReason::DirtyThrottle, &d.throttle)),
    );
}

type DomainFigure = (&'static str, &'static str, Kind, fn(&DomainStats) -> Value);

const DOMAIN: &[DomainFigure] = &[
    (
        "wb_domain_dirty_bytes",
        "A writeback domain's dirty data on a device.",
        Gauge,
        |d| bytes(d.dirty_pages),
    ),
    (
        "wb_domain_writeback_bytes",
        "A writeback domain's data under writeback on a device.",
        Gauge,
        |d| bytes(d.writeback_pages),
    ),
    (
        "wb_domain_dontcache_dirty_bytes",
        "A writeback domain's dirty data written uncached.",
        Gauge,
        |d| bytes(d.dontcache_dirty_pages),
    ),
    (
        "wb_domain_dirtied_bytes_total",
        "Data a writeback domain made dirty.",
        Counter,
        |d| bytes(d.dirtied_pages),
    ),
    (
        "wb_domain_written_bytes_total",
        "A writeback domain's data written back.",
        Counter,
        |d| bytes(d.written_pages),
    ),
    (
        "wb_domain_dontcache_kicks_total",
        "Kicks of the flusher by uncached writes.",
        Counter,
        |d| Value::Int(d.dontcache.kicks),
    ),
    (
        "wb_domain_dontcache_works_total",
        "Uncached writeback works the flusher started.",
        Counter,
        |d| Value::Int(d.dontcache.works),
    ),
    (
        "wb_domain_dontcache_dropped_bytes_total",
        "Uncached data that left the cache after its writeback.",
        Counter,
        |d| bytes(d.dontcache.dropped_pages),
    ),
];

fn domain_label(d: &DomainStats) -> Vec<(&'static str, String)> {
    vec![("device", d.device.clone()), ("domain", d.domain.clone())]
}

fn domain_families(out: &mut Vec<Family>, domains: &[DomainStats]) {
    for &(name, help, kind, value) in DOMAIN {
        let mut family = Family::new(name, help, kind);
        for d in domains {
            family = family.with(domain_label(d), value(d));
        }
        out.push(family);
    }
    pause_pair(
        out,
        [
            (
                "wb_domain_pauses_total",
                "Waits of a writeback domain's callers, by reason.",
            ),
            (
                "wb_domain_pause_duration_seconds",
                "How long a writeback domain's callers waited, by reason.",
            ),
        ],
        domains.iter().flat_map(|d| {
            StallReason::ALL
                .iter()
                .map(move |&r| (domain_label(d), r, &d.stalls[r.index()]))
        }),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_stats() -> Stats {
        let mut stats = Stats {
            dirty_pages: 3,
            ..Stats::default()
        };
        stats.devices.push(DeviceStats {
            name: "vda".into(),
            stable_writes: "snapshot (auto)".into(),
            ..Default::default()
        });
        stats.domains.push(DomainStats {
            device: "vda".into(),
            domain: "root".into(),
            ..Default::default()
        });
        stats
    }

    #[test]
    fn names_are_unique_and_follow_prometheus_conventions() {
        let families = families(&sample_stats(), None);
        let mut names: Vec<_> = families.iter().map(|f| f.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "a family appears twice");
        for f in &families {
            assert!(f.name.starts_with("wb_"), "{}", f.name);
            assert_eq!(
                f.kind == Kind::Counter,
                f.name.ends_with("_total"),
                "{}",
                f.name
            );
            assert_eq!(
                f.kind == Kind::Histogram,
                f.name.ends_with("_seconds") && f.name.contains("duration"),
                "{}",
                f.name
            );
            assert!(!f.series.is_empty(), "{} has no series", f.name);
            for s in &f.series {
                assert_eq!(
                    matches!(s.value, Value::Histogram(_)),
                    f.kind == Kind::Histogram
                );
            }
        }
    }

    #[test]
    fn one_snapshot_gives_the_stats_figures_with_labels() {
        let text = render_prometheus(&families(
            &sample_stats(),
            Some(Duration::from_millis(1500)),
        ));
        assert!(text.contains("\nwb_dirty_bytes 12288\n"), "{text}");
        assert!(
            text.contains("\nwb_dirty_oldest_age_seconds 1.5\n"),
            "{text}"
        );
        assert!(
            text.contains("\nwb_written_bytes_total{reason=\"periodic\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("\nwb_device_stable_writes{device=\"vda\",mode=\"snapshot\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("\nwb_device_stable_writes{device=\"vda\",mode=\"none\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("\nwb_memory_budget_reason{reason=\"start\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "\nwb_domain_pauses_total{device=\"vda\",domain=\"root\",reason=\"sync\"} 0\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("\nwb_device_pause_duration_seconds_count{device=\"vda\",reason=\"dirty_throttle\"} 0\n"),
            "{text}"
        );
    }
}
