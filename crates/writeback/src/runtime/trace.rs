//! What `Cache::start_trace` records (a `wb_trace::Trace`, for Perfetto):
//! each task's stalls as slices named by their reason (`planned_us`: the
//! longest the engine asked it to sleep), each device's reads and writes
//! in flight as counters, changed at every submission and completion, and
//! the cache's dirty and writeback pages, sampled by the timer thread at
//! most every millisecond. Times are from the start of the trace. All of
//! it is recorded under the engine's lock, where those events happen: no
//! lock of its own, and nothing at all when no trace is on.

use std::time::Instant;
use wb_engine::{DeviceId, Engine, StallReason};
use wb_trace::{Series, Trace, Track};

/// Least time between two samples of the page counts.
const SAMPLE_EVERY_NS: u64 = 1_000_000;

pub(crate) struct RuntimeTrace {
    pub trace: Trace,
    start: Instant,
    /// Per task: its track, once it has stalled.
    tracks: Vec<Option<Track>>,
    /// Per task: the stall it is in, (since, reason, planned ns).
    sleeping: Vec<Option<(u64, StallReason, u64)>>,
    /// Per device: its reads' and writes' counters and how many are in flight.
    devices: Vec<Option<([Series; 2], [u64; 2])>>,
    /// The cache's dirty and writeback pages.
    pages: [Series; 2],
    next_sample_ns: u64,
}

impl RuntimeTrace {
    pub fn new(events: usize) -> RuntimeTrace {
        let mut trace = Trace::new(events);
        let pages = [trace.series("dirty_pages"), trace.series("writeback_pages")];
        RuntimeTrace {
            trace,
            pages,
            start: Instant::now(),
            tracks: Vec::new(),
            sleeping: Vec::new(),
            devices: Vec::new(),
            next_sample_ns: 0,
        }
    }

    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Task `task` stalls for `reason`, for at most `planned_ns`; `name`
    /// names its track the first time.
    pub fn slept(
        &mut self,
        task: usize,
        reason: StallReason,
        planned_ns: u64,
        name: impl FnOnce() -> String,
    ) {
        if self.tracks.len() <= task {
            self.tracks.resize(task + 1, None);
            self.sleeping.resize(task + 1, None);
        }
        if self.tracks[task].is_none() {
            self.tracks[task] = Some(self.trace.track(&name()));
        }
        self.sleeping[task] = Some((self.now_ns(), reason, planned_ns));
    }

    /// Task `task` woke from its stall.
    pub fn woke(&mut self, task: usize) {
        let Some((since, reason, planned_ns)) = self.sleeping.get_mut(task).and_then(Option::take)
        else {
            return;
        };
        let (track, now) = (
            self.tracks[task].expect("made when it slept"),
            self.now_ns(),
        );
        let args = [("planned_us", planned_ns / 1000)];
        self.trace.slice(track, reason.name(), since, now, &args);
    }

    /// A request went to `device` (`write` or a read), or came back
    /// (`delta` -1); `engine` names the device the first time.
    pub fn in_flight(&mut self, engine: &Engine, device: DeviceId, write: bool, delta: i64) {
        let i = device.index();
        if self.devices.len() <= i {
            self.devices.resize(i + 1, None);
        }
        let now = self.now_ns();
        let trace = &mut self.trace;
        let (series, counts) = self.devices[i].get_or_insert_with(|| {
            let name = engine
                .stats()
                .devices
                .get(i)
                .map_or_else(|| format!("device{i}"), |d| d.name.clone());
            let reads = trace.series(&format!("{name}.reads_in_flight"));
            let writes = trace.series(&format!("{name}.writes_in_flight"));
            ([reads, writes], [0, 0])
        });
        let count = &mut counts[write as usize];
        *count = count.saturating_add_signed(delta);
        trace.counter(series[write as usize], now, *count);
    }

    /// Samples the page counts when a millisecond has passed since the last.
    pub fn sample(&mut self, engine: &Engine) {
        let now = self.now_ns();
        if now < self.next_sample_ns {
            return;
        }
        self.next_sample_ns = now + SAMPLE_EVERY_NS;
        let stats = engine.stats();
        self.trace.counter(self.pages[0], now, stats.dirty_pages);
        self.trace
            .counter(self.pages[1], now, stats.writeback_pages);
    }
}
