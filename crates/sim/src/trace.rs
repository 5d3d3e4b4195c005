//! What `wb sim --trace FILE` records of a run (a `wb_trace::Trace`, read
//! with Perfetto): one track per job with each stall as a slice named by
//! its reason (`planned_us`: how long the engine asked it to sleep at
//! most), each device's reads and writes in flight as counters
//! (`DEVICE.reads_in_flight`, `DEVICE.writes_in_flight`, changed at every
//! submission and completion), and the cache's dirty and writeback pages
//! sampled every millisecond of virtual time. The recorder only watches:
//! a run with a trace gives the same figures as one without.

use std::collections::HashMap;
use wb_engine::{Engine, Stall, StallReason};
use wb_trace::{Series, Trace, Track};

/// Virtual time between two samples of the cache's counters.
const SAMPLE_EVERY_NS: u64 = 1_000_000;

pub(crate) struct SimTrace {
    pub trace: Trace,
    jobs: Vec<Track>,
    /// Per job: the stall it is in, (since, reason, until).
    sleeping: Vec<Option<(u64, StallReason, u64)>>,
    /// Per device: its reads' and writes' counters.
    depth: Vec<[Series; 2]>,
    /// The cache's dirty and writeback pages.
    pages: [Series; 2],
    /// Requests on the devices: (device, write).
    requests: HashMap<u64, (usize, bool)>,
    /// Per device: reads and writes in flight.
    in_flight: Vec<[u64; 2]>,
    next_sample_ns: u64,
}

impl SimTrace {
    pub fn new(mut trace: Trace, jobs: &[String], devices: &[String]) -> SimTrace {
        let tracks = jobs.iter().map(|name| trace.track(name)).collect();
        let depth = devices
            .iter()
            .map(|d| {
                [
                    trace.series(&format!("{d}.reads_in_flight")),
                    trace.series(&format!("{d}.writes_in_flight")),
                ]
            })
            .collect();
        let pages = [trace.series("dirty_pages"), trace.series("writeback_pages")];
        SimTrace {
            trace,
            jobs: tracks,
            sleeping: vec![None; jobs.len()],
            depth,
            pages,
            requests: HashMap::new(),
            in_flight: vec![[0, 0]; devices.len()],
            next_sample_ns: 0,
        }
    }

    pub fn slept(&mut self, job: usize, now_ns: u64, stall: &Stall) {
        self.sleeping[job] = Some((now_ns, stall.reason, stall.until.as_ns()));
    }

    pub fn woke(&mut self, job: usize, now_ns: u64) {
        if let Some((since, reason, until)) = self.sleeping[job].take() {
            let planned_us = until.saturating_sub(since) / 1000;
            let track = self.jobs[job];
            self.trace.slice(
                track,
                reason.name(),
                since,
                now_ns,
                &[("planned_us", planned_us)],
            );
        }
    }

    pub fn submitted(&mut self, now_ns: u64, id: u64, device: usize, write: bool) {
        self.requests.insert(id, (device, write));
        self.in_flight[device][write as usize] += 1;
        self.depth_changed(now_ns, device, write);
    }

    pub fn completed(&mut self, now_ns: u64, id: u64) {
        if let Some((device, write)) = self.requests.remove(&id) {
            self.in_flight[device][write as usize] -= 1;
            self.depth_changed(now_ns, device, write);
        }
    }

    fn depth_changed(&mut self, now_ns: u64, device: usize, write: bool) {
        let series = self.depth[device][write as usize];
        self.trace
            .counter(series, now_ns, self.in_flight[device][write as usize]);
    }

    /// Samples the cache's page counts when a millisecond has passed.
    pub fn sample(&mut self, now_ns: u64, engine: &Engine) {
        if now_ns < self.next_sample_ns {
            return;
        }
        self.next_sample_ns = now_ns - now_ns % SAMPLE_EVERY_NS + SAMPLE_EVERY_NS;
        let stats = engine.stats();
        self.trace.counter(self.pages[0], now_ns, stats.dirty_pages);
        self.trace
            .counter(self.pages[1], now_ns, stats.writeback_pages);
    }
}
