//! What `Cache::start_trace` records (a `wb_trace::Trace`, for Perfetto),
//! through `wb_trace::engine` as the simulator does: each task's stalls as
//! slices named by their reason (with the figures behind a dirty-throttle
//! pause), each device's requests as slices on its lanes with its reads
//! and writes in flight as counters, and the engine's counters (dirty,
//! writeback, cached, thresholds, wbt depth and scale step, write
//! bandwidth, each domain's dirty pages), sampled by the timer thread at
//! most every millisecond. Times are from the start of the trace. All of
//! it is recorded under the engine's lock, where those events happen: no
//! lock of its own, and nothing at all when no trace is on.

use std::time::Instant;
use wb_engine::{Engine, IoRequest, Stall};
use wb_trace::engine::{DeviceIo, EngineCounters, StallSlices};
use wb_trace::Trace;

pub(crate) struct RuntimeTrace {
    pub trace: Trace,
    start: Instant,
    stalls: StallSlices,
    io: DeviceIo,
    counters: EngineCounters,
}

impl RuntimeTrace {
    pub fn new(events: usize) -> RuntimeTrace {
        RuntimeTrace {
            trace: Trace::new(events),
            start: Instant::now(),
            stalls: StallSlices::default(),
            io: DeviceIo::default(),
            counters: EngineCounters::new(wb_trace::engine::SAMPLE_EVERY_NS),
        }
    }

    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Task `task` stalls, for at most `planned_ns`; `name` names its
    /// track the first time.
    pub fn slept(
        &mut self,
        task: usize,
        stall: &Stall,
        planned_ns: u64,
        name: impl FnOnce() -> String,
    ) {
        let now = self.now_ns();
        self.stalls
            .slept(&mut self.trace, task, now, stall, planned_ns, name);
    }

    /// Task `task` woke from its stall.
    pub fn woke(&mut self, task: usize) {
        let now = self.now_ns();
        self.stalls.woke(&mut self.trace, task, now);
    }

    /// Request `req` went to its device; `engine` names the device the
    /// first time.
    pub fn submitted(&mut self, engine: &Engine, req: &IoRequest) {
        let now = self.now_ns();
        let i = req.device.index();
        let name = || {
            engine
                .stats()
                .devices
                .get(i)
                .map_or_else(|| format!("device{i}"), |d| d.name.clone())
        };
        self.io.submitted(&mut self.trace, now, req.id.0, req, name);
    }

    /// Request `id` came back.
    pub fn completed(&mut self, id: u64) {
        let now = self.now_ns();
        self.io.completed(&mut self.trace, now, id);
    }

    /// Samples the engine's counters when a millisecond has passed.
    pub fn sample(&mut self, engine: &Engine) {
        let now = self.now_ns();
        if self.counters.due(now) {
            self.counters.sample(&mut self.trace, now, &engine.stats());
        }
    }
}
