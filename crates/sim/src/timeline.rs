//! A run over time, for plots (`wb report`): the cache's page counts, each
//! device's traffic and wbt depth, and the stalls so far, sampled on a grid
//! of times; and each job's latency per slot of time.
//!
//! Bounded: a timeline keeps at most [`TIMELINE_POINTS`] points. It starts
//! fine ([`FIRST_PERIOD_NS`]) and, when full, keeps every other point and
//! doubles its period, so a run of any length ends with between half and
//! all of the points, evenly spaced. Counters are kept as running totals
//! (bytes read, stall time), so dropping a point loses no traffic: a plot
//! takes differences between the points it has.
//!
//! Both `wb sim` (virtual time) and `wb run` (a sampling thread on real
//! time) fill the same structures; nothing here reads a clock.

use serde::{Deserialize, Serialize};
use wb_engine::units::pages_mib as mib;
use wb_engine::{Gauges, StallReason};

/// Most points a timeline keeps (engine samples, or a job's latency slots).
pub const TIMELINE_POINTS: usize = 400;
/// The first period between samples (and width of a latency slot).
pub const FIRST_PERIOD_NS: u64 = 1_000_000;

/// The cache and its devices at one moment of a run.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct EngineSample {
    /// Since the run started.
    pub t_s: f64,
    pub dirty_mib: f64,
    pub writeback_mib: f64,
    pub cached_mib: f64,
    /// The dirty thresholds (they move with memory and knobs).
    pub thresh_mib: f64,
    pub bg_thresh_mib: f64,
    /// Per device, in the order of the report's devices.
    pub devices: Vec<DeviceSample>,
    /// Time spent stalled so far, per reason in `StallReason::ALL` order
    /// (the order of the report's `engine.stalls`), in milliseconds.
    pub stalled_ms: Vec<f64>,
}

/// One device at one moment of a run.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct DeviceSample {
    /// Read and written so far.
    pub read_mib: f64,
    pub written_mib: f64,
    pub dirty_mib: f64,
    /// wbt's current limit on writes in flight (its max depth).
    pub wbt_depth: u32,
}

impl EngineSample {
    pub fn new(t_ns: u64, stats: &Gauges) -> EngineSample {
        EngineSample {
            t_s: t_ns as f64 / 1e9,
            dirty_mib: mib(stats.dirty_pages),
            writeback_mib: mib(stats.writeback_pages),
            cached_mib: mib(stats.cached_pages),
            thresh_mib: mib(stats.thresh_pages),
            bg_thresh_mib: mib(stats.bg_thresh_pages),
            devices: stats
                .devices
                .iter()
                .map(|d| DeviceSample {
                    read_mib: mib(d.pages_read),
                    written_mib: mib(d.pages_written),
                    dirty_mib: mib(d.dirty_pages),
                    wbt_depth: d.wbt_max_depth,
                })
                .collect(),
            stalled_ms: StallReason::ALL
                .iter()
                .map(|r| stats.stalled_ns[r.index()] as f64 / 1e6)
                .collect(),
        }
    }
}

/// The engine's gauges at one moment, as taken: a sample is made of it
/// only if it is kept to the end (most are dropped as the grid coarsens).
#[derive(Clone, Debug, Default)]
struct Taken {
    t_ns: u64,
    gauges: Gauges,
}

/// Samples of the engine on a grid that coarsens as the run goes on.
#[derive(Clone, Debug)]
pub struct EngineTimeline {
    period_ns: u64,
    next_ns: u64,
    samples: Vec<Taken>,
    /// Samples dropped by coarsening, whose vectors the next ones reuse
    /// (a run takes thousands: allocating and converting each was a tenth
    /// of a short scenario's time).
    spare: Vec<Taken>,
}

impl Default for EngineTimeline {
    fn default() -> Self {
        EngineTimeline {
            period_ns: FIRST_PERIOD_NS,
            next_ns: 0,
            samples: Vec::new(),
            spare: Vec::new(),
        }
    }
}

impl EngineTimeline {
    /// Whether a sample is due at `now_ns` (the caller then takes the
    /// engine's gauges and calls [`EngineTimeline::record`]).
    pub fn due(&self, now_ns: u64) -> bool {
        now_ns >= self.next_ns
    }

    /// When the next sample is due.
    pub fn next_ns(&self) -> u64 {
        self.next_ns
    }

    /// Records the engine at `now_ns` if a sample is due: `take` fills in
    /// the gauges (`Engine::gauges_into`), in a sample whose vector is
    /// reused.
    pub fn record(&mut self, now_ns: u64, take: impl FnOnce(&mut Gauges)) {
        if !self.due(now_ns) {
            return;
        }
        if self.samples.len() == TIMELINE_POINTS {
            // Full: every other point, at twice the period.
            let mut kept = 0;
            for i in (0..self.samples.len()).step_by(2) {
                self.samples.swap(kept, i);
                kept += 1;
            }
            self.spare.extend(self.samples.drain(kept..));
            self.period_ns *= 2;
        }
        let mut sample = self.spare.pop().unwrap_or_default();
        sample.t_ns = now_ns;
        take(&mut sample.gauges);
        self.samples.push(sample);
        self.next_ns = now_ns - now_ns % self.period_ns + self.period_ns;
        debug_assert!(self.samples.len() <= TIMELINE_POINTS);
    }

    /// The samples, with a last one at `end_ns` (the run's end).
    pub fn finish(self, end_ns: u64, stats: &Gauges) -> Vec<EngineSample> {
        let mut samples: Vec<EngineSample> = (self.samples.iter())
            .map(|s| EngineSample::new(s.t_ns, &s.gauges))
            .collect();
        if self.samples.last().is_none_or(|s| s.t_ns < end_ns) {
            if samples.len() == TIMELINE_POINTS {
                samples.pop();
            }
            samples.push(EngineSample::new(end_ns, stats));
        }
        samples
    }
}

/// A job's operations that ended in one slot of time.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LatencySlot {
    /// The slot's start, since the run started.
    pub t_s: f64,
    pub ops: u64,
    pub mean_us: f64,
    pub max_us: f64,
}

/// One slot while it is being filled.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    ops: u64,
    total_ns: u128,
    max_ns: u64,
}

impl Slot {
    fn merge(self, other: Slot) -> Slot {
        Slot {
            ops: self.ops + other.ops,
            total_ns: self.total_ns + other.total_ns,
            max_ns: self.max_ns.max(other.max_ns),
        }
    }
}

/// A job's latency per slot of time: slots of `width_ns` from the start
/// of the run, two merged into one (and the width doubled) when an
/// operation ends past the last of [`TIMELINE_POINTS`] slots.
#[derive(Clone, Debug)]
pub struct LatencyTimeline {
    width_ns: u64,
    slots: Vec<Slot>,
}

impl Default for LatencyTimeline {
    fn default() -> Self {
        LatencyTimeline {
            width_ns: FIRST_PERIOD_NS,
            slots: Vec::new(),
        }
    }
}

impl LatencyTimeline {
    /// An operation that ended at `end_ns` after `latency_ns`.
    pub fn record(&mut self, end_ns: u64, latency_ns: u64) {
        // `record_every` of one, without its division: every operation
        // a runner serves one by one passes here.
        let slot = self.slot_of(end_ns);
        let s = &mut self.slots[slot];
        s.ops += 1;
        s.total_ns += latency_ns as u128;
        s.max_ns = s.max_ns.max(latency_ns);
    }

    /// The slot an operation ending at `end_ns` goes in, made if new
    /// (the slots coarsened first if it lies past the last point).
    fn slot_of(&mut self, end_ns: u64) -> usize {
        let mut slot = (end_ns / self.width_ns) as usize;
        while slot >= TIMELINE_POINTS {
            self.coarsen();
            slot = (end_ns / self.width_ns) as usize;
        }
        if self.slots.len() <= slot {
            self.slots.resize(slot + 1, Slot::default());
        }
        slot
    }

    /// `n` operations that each took `latency_ns`, the first ending at
    /// `first_end_ns` and each next `step_ns` later: as `n` calls of
    /// `record`, slot by slot.
    pub fn record_every(&mut self, first_end_ns: u64, step_ns: u64, n: u64, latency_ns: u64) {
        debug_assert!(step_ns > 0 || n <= 1);
        let mut done = 0;
        while done < n {
            let end_ns = first_end_ns + done * step_ns;
            let slot = self.slot_of(end_ns);
            // The operations from this one that end within its slot.
            let slot_end_ns = (slot as u64 + 1) * self.width_ns;
            let here = ((slot_end_ns - 1 - end_ns) / step_ns.max(1) + 1).min(n - done);
            let s = &mut self.slots[slot];
            s.ops += here;
            s.total_ns += latency_ns as u128 * here as u128;
            s.max_ns = s.max_ns.max(latency_ns);
            done += here;
        }
    }

    fn coarsen(&mut self) {
        self.slots = self
            .slots
            .chunks(2)
            .map(|pair| pair.iter().fold(Slot::default(), |a, &b| a.merge(b)))
            .collect();
        self.width_ns *= 2;
    }

    /// The slot width in seconds.
    pub fn width_s(&self) -> f64 {
        self.width_ns as f64 / 1e9
    }

    /// The slots in which operations ended.
    pub fn slots(&self) -> Vec<LatencySlot> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.ops > 0)
            .map(|(i, s)| LatencySlot {
                t_s: (i as u64 * self.width_ns) as f64 / 1e9,
                ops: s.ops,
                mean_us: s.total_ns as f64 / s.ops as f64 / 1e3,
                max_us: s.max_ns as f64 / 1e3,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_recorded_together_fill_the_slots_one_by_one_would() {
        // Runs of operations across slot edges and coarsenings, as a
        // reader's hits served at once record them.
        let mut one_by_one = LatencyTimeline::default();
        let mut together = LatencyTimeline::default();
        let mut end = 5_000;
        for (n, step, latency) in [
            (1, 1, 9),
            (700, 1_400, 1_400),
            (3, 999_999, 7),
            (90_000, 700, 700),
        ] {
            for i in 0..n {
                one_by_one.record(end + i * step, latency);
            }
            together.record_every(end, step, n, latency);
            end += n * step + 12_345;
        }
        for _ in 0..20 {
            // Far ahead: both coarsen.
            end *= 3;
            one_by_one.record(end, 5);
            together.record_every(end, 1, 1, 5);
        }
        assert_eq!(together.width_s(), one_by_one.width_s());
        assert_eq!(together.slots(), one_by_one.slots());
    }

    #[test]
    fn an_engine_timeline_keeps_at_most_its_points_evenly_spaced() {
        let mut t = EngineTimeline::default();
        let stats = Gauges::default();
        for ms in 0..100_000u64 {
            t.record(ms * 1_000_000, |g| g.clone_from(&stats));
        }
        let samples = t.finish(100_000 * 1_000_000, &stats);
        assert!(samples.len() <= TIMELINE_POINTS);
        assert!(samples.len() >= TIMELINE_POINTS / 2, "{}", samples.len());
        // 100 s in at most 400 points: every 256 ms, then the end.
        let gaps: Vec<f64> = samples.windows(2).map(|w| w[1].t_s - w[0].t_s).collect();
        let first = gaps[0];
        assert!((first - 0.256).abs() < 1e-9, "{first}");
        assert!(gaps[..gaps.len() - 1]
            .iter()
            .all(|g| (g - first).abs() < 1e-9));
        assert_eq!(samples.last().map(|s| s.t_s), Some(100.0));
    }

    /// After the grid coarsened (samples kept in place, dropped ones
    /// reused), each sample holds the figures of its own time.
    #[test]
    fn coarsened_samples_keep_the_figures_of_their_time() {
        let mut t = EngineTimeline::default();
        let at = |ms: u64| {
            let mut stalled_ns = [0; StallReason::ALL.len()];
            stalled_ns[0] = ms * 1_000_000;
            Gauges {
                devices: vec![wb_engine::DeviceGauges {
                    pages_read: ms,
                    ..Default::default()
                }],
                stalled_ns,
                ..Gauges::default()
            }
        };
        for ms in 0..10_000u64 {
            t.record(ms * 1_000_000, |g| *g = at(ms));
        }
        let samples = t.finish(10_000 * 1_000_000, &at(10_000));
        let first_gap_s = samples[1].t_s - samples[0].t_s;
        assert!(
            first_gap_s >= 0.002,
            "coarsened (samples reused): {first_gap_s}"
        );
        for s in &samples {
            let ms = (s.t_s * 1000.0).round() as u64;
            assert_eq!(
                s.devices,
                vec![DeviceSample {
                    read_mib: mib(ms),
                    ..Default::default()
                }]
            );
            assert_eq!(s.stalled_ms[0], ms as f64);
            assert!(s.stalled_ms[1..].iter().all(|&v| v == 0.0));
        }
    }

    #[test]
    fn latency_slots_merge_without_losing_operations() {
        let mut t = LatencyTimeline::default();
        for i in 0..10_000u64 {
            // One op per ms, of i µs.
            t.record(i * 1_000_000, i * 1000);
        }
        let slots = t.slots();
        assert!(slots.len() <= TIMELINE_POINTS);
        assert_eq!(slots.iter().map(|s| s.ops).sum::<u64>(), 10_000);
        // 10 s in at most 400 slots of 1 ms × 2^k: 32 ms.
        assert!((t.width_s() - 0.032).abs() < 1e-12);
        assert_eq!(slots[0].ops, 32);
        assert_eq!(slots[0].max_us, 31.0);
        assert!((slots[0].mean_us - 15.5).abs() < 1e-9);
        assert_eq!(slots.last().map(|s| s.max_us), Some(9999.0));
    }
}
