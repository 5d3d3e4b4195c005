//! What `wb sim --trace FILE` records of a run (a `wb_trace::Trace`, read
//! with Perfetto), through `wb_trace::engine` as the real runtime does:
//! one track per job with each stall as a slice named by its reason (and,
//! for dirty-throttle pauses, the figures behind them), each device's
//! requests as slices on its lanes with its reads and writes in flight as
//! counters, and the engine's counters (dirty, writeback, cached, the
//! thresholds, wbt depth and scale step, write bandwidth, each domain's
//! dirty pages) sampled every 10 ms of virtual time. The recorder
//! only watches: a run with a trace gives the same figures as one without.

use wb_engine::{Engine, IoRequest, Stall};
use wb_trace::engine::{DeviceIo, EngineCounters, StallSlices};
use wb_trace::Trace;

/// Virtual time between two samples of the engine's counters: 10 ms
/// (finer costs more than the run itself in fast scenarios, for no detail
/// a person looks at; the runtime samples every millisecond of real time).
const SAMPLE_EVERY_NS: u64 = 10_000_000;

pub(crate) struct SimTrace {
    pub trace: Trace,
    jobs: Vec<String>,
    devices: Vec<String>,
    stalls: StallSlices,
    io: DeviceIo,
    counters: EngineCounters,
}

impl SimTrace {
    pub fn new(mut trace: Trace, jobs: &[String], devices: &[String]) -> SimTrace {
        // Every job has its track, stalled or not, in the scenario's order.
        for name in jobs {
            trace.track(name);
        }
        SimTrace {
            trace,
            jobs: jobs.to_vec(),
            devices: devices.to_vec(),
            stalls: StallSlices::default(),
            io: DeviceIo::default(),
            counters: EngineCounters::new(SAMPLE_EVERY_NS),
        }
    }

    pub fn slept(&mut self, job: usize, now_ns: u64, stall: &Stall) {
        let planned_ns = stall.until.as_ns().saturating_sub(now_ns);
        let name = || self.jobs[job].clone();
        self.stalls
            .slept(&mut self.trace, job, now_ns, stall, planned_ns, name);
    }

    pub fn woke(&mut self, job: usize, now_ns: u64) {
        self.stalls.woke(&mut self.trace, job, now_ns);
    }

    pub fn submitted(&mut self, now_ns: u64, id: u64, req: &IoRequest) {
        let name = || self.devices[req.device.index()].clone();
        self.io.submitted(&mut self.trace, now_ns, id, req, name);
    }

    pub fn completed(&mut self, now_ns: u64, id: u64) {
        self.io.completed(&mut self.trace, now_ns, id);
    }

    /// Samples the engine's counters when a millisecond has passed.
    pub fn sample(&mut self, now_ns: u64, engine: &Engine) {
        if self.counters.due(now_ns) {
            self.counters
                .sample(&mut self.trace, now_ns, &engine.stats());
        }
    }
}
