//! What a trace of the engine holds, recorded the same way by the
//! simulator (virtual time) and the real runtime (wall clock), so both
//! name the same things alike:
//!
//! - [`StallSlices`]: a track per task, each stall a slice named by its
//!   reason, with the longest sleep the engine asked for (`planned_us`)
//!   and, for a dirty-throttle pause, the figures it came from (pause,
//!   pos_ratio, the task's rate, dirty pages, thresh and the hard limit,
//!   the writeback context's dirty pages and share).
//! - [`DeviceIo`]: per device, every request as a slice (read or write,
//!   its pages, the reason of a writeback) on one of the device's lanes
//!   (`disk q0`, `disk q1`, …: the lowest free one, so slices on a lane
//!   never overlap), and the reads and writes in flight as counters.
//! - [`EngineCounters`]: the cache's dirty, writeback and cached pages and
//!   dirty thresholds; per device wbt's depth and scale step and the write
//!   bandwidth estimate; per writeback domain its dirty pages. Sampled at
//!   most every period the recorder is made with (the runtime:
//!   [`SAMPLE_EVERY_NS`]), recorded only when they move.

use crate::{Arg, Series, Trace, Track};
use std::collections::HashMap;
use wb_engine::{IoDir, IoRequest, Stall, Stats};

/// Least time between two samples of the engine's counters in the real
/// runtime: a millisecond.
pub const SAMPLE_EVERY_NS: u64 = 1_000_000;

/// Each task's stalls.
#[derive(Debug, Default)]
pub struct StallSlices {
    /// Per task: its track, once it has stalled.
    tracks: Vec<Option<Track>>,
    /// Per task: the stall it is in (since, the stall, planned ns).
    sleeping: Vec<Option<(u64, Stall, u64)>>,
}

impl StallSlices {
    /// Task `task` stalls at `ts_ns` for at most `planned_ns`; `name`
    /// names its track the first time.
    pub fn slept(
        &mut self,
        trace: &mut Trace,
        task: usize,
        ts_ns: u64,
        stall: &Stall,
        planned_ns: u64,
        name: impl FnOnce() -> String,
    ) {
        if self.tracks.len() <= task {
            self.tracks.resize(task + 1, None);
            self.sleeping.resize(task + 1, None);
        }
        if self.tracks[task].is_none() {
            self.tracks[task] = Some(trace.track(&name()));
        }
        self.sleeping[task] = Some((ts_ns, *stall, planned_ns));
    }

    /// Task `task` woke at `ts_ns`: its stall becomes a slice.
    pub fn woke(&mut self, trace: &mut Trace, task: usize, ts_ns: u64) {
        let Some((since, stall, planned_ns)) = self.sleeping.get_mut(task).and_then(Option::take)
        else {
            return;
        };
        let Some(track) = self.tracks[task] else {
            return;
        };
        let mut args: Vec<(&'static str, Arg)> = vec![("planned_us", (planned_ns / 1000).into())];
        if let Some(t) = stall.throttle {
            args.extend([
                ("pause_us", Arg::Int(t.pause_ns / 1000)),
                ("pos_ratio_permille", Arg::Int(t.pos_ratio_permille)),
                ("task_ratelimit_pages_s", Arg::Int(t.task_ratelimit_pages_s)),
                ("dirty_pages", Arg::Int(t.dirty_pages)),
                ("thresh_pages", Arg::Int(t.thresh_pages)),
                ("limit_pages", Arg::Int(t.limit_pages)),
                ("wb_dirty_pages", Arg::Int(t.wb_dirty_pages)),
                ("wb_thresh_pages", Arg::Int(t.wb_thresh_pages)),
            ]);
        }
        trace.slice(track, stall.reason.name(), since, ts_ns, &args);
    }
}

/// One device's lanes and counters.
#[derive(Debug)]
struct DeviceTracks {
    name: String,
    /// Lanes, and whether a request is on each.
    lanes: Vec<(Track, bool)>,
    /// Reads and writes in flight: their counters and counts.
    series: [Series; 2],
    in_flight: [i64; 2],
}

/// A request on a device: where and since when.
#[derive(Clone, Copy, Debug)]
struct OnLane {
    device: usize,
    lane: usize,
    since_ns: u64,
    write: bool,
    pages: u32,
    reason: Option<&'static str>,
}

/// Every request on every device.
#[derive(Debug, Default)]
pub struct DeviceIo {
    devices: Vec<Option<DeviceTracks>>,
    requests: HashMap<u64, OnLane>,
}

impl DeviceIo {
    /// Request `req` (known by `id`, unique among those in flight) went to
    /// its device at `ts_ns`; `device_name` names the device the first
    /// time.
    pub fn submitted(
        &mut self,
        trace: &mut Trace,
        ts_ns: u64,
        id: u64,
        req: &IoRequest,
        device_name: impl FnOnce() -> String,
    ) {
        let device = req.device.index();
        if self.devices.len() <= device {
            self.devices.resize_with(device + 1, || None);
        }
        let d = self.devices[device].get_or_insert_with(|| {
            let name = device_name();
            DeviceTracks {
                series: [
                    trace.series(&format!("{name}.reads_in_flight")),
                    trace.series(&format!("{name}.writes_in_flight")),
                ],
                name,
                lanes: Vec::new(),
                in_flight: [0, 0],
            }
        });
        let lane = match d.lanes.iter().position(|&(_, busy)| !busy) {
            Some(lane) => lane,
            None => {
                let track = trace.track(&format!("{} q{}", d.name, d.lanes.len()));
                d.lanes.push((track, false));
                d.lanes.len() - 1
            }
        };
        d.lanes[lane].1 = true;
        let write = req.dir == IoDir::Write;
        d.in_flight[write as usize] += 1;
        trace.counter(d.series[write as usize], ts_ns, d.in_flight[write as usize]);
        let dup = self.requests.insert(
            id,
            OnLane {
                device,
                lane,
                since_ns: ts_ns,
                write,
                pages: req.pages,
                reason: req.reason.map(|r| r.name()),
            },
        );
        debug_assert!(dup.is_none(), "request {id} submitted twice");
    }

    /// Request `id` came back at `ts_ns`: it becomes a slice on its lane.
    pub fn completed(&mut self, trace: &mut Trace, ts_ns: u64, id: u64) {
        let Some(r) = self.requests.remove(&id) else {
            return;
        };
        let Some(d) = self.devices.get_mut(r.device).and_then(Option::as_mut) else {
            return;
        };
        debug_assert!(ts_ns >= r.since_ns, "request {id} ended before it began");
        let (track, busy) = &mut d.lanes[r.lane];
        *busy = false;
        let mut args = vec![("pages", Arg::Int(r.pages as u64))];
        if let Some(reason) = r.reason {
            args.push(("reason", Arg::Text(reason)));
        }
        let name = if r.write { "write" } else { "read" };
        trace.slice(*track, name, r.since_ns, ts_ns, &args);
        d.in_flight[r.write as usize] -= 1;
        trace.counter(
            d.series[r.write as usize],
            ts_ns,
            d.in_flight[r.write as usize],
        );
    }
}

/// The engine's counters, sampled.
#[derive(Debug)]
pub struct EngineCounters {
    every_ns: u64,
    next_sample_ns: u64,
    /// dirty, writeback, cached, thresh, bg_thresh.
    cache: Option<[Series; 5]>,
    /// Per device: wbt depth, wbt scale step, write bandwidth.
    devices: Vec<[Series; 3]>,
    /// Per writeback domain (device, domain): its dirty pages.
    domains: Vec<((String, String), Series)>,
}

impl EngineCounters {
    /// Counters sampled at most every `every_ns`.
    pub fn new(every_ns: u64) -> EngineCounters {
        EngineCounters {
            every_ns: every_ns.max(1),
            next_sample_ns: 0,
            cache: None,
            devices: Vec::new(),
            domains: Vec::new(),
        }
    }

    /// Whether a sample is due at `ts_ns` (then take the engine's stats
    /// and call [`EngineCounters::sample`]).
    pub fn due(&self, ts_ns: u64) -> bool {
        ts_ns >= self.next_sample_ns
    }

    /// Records `stats` at `ts_ns`.
    pub fn sample(&mut self, trace: &mut Trace, ts_ns: u64, stats: &Stats) {
        self.next_sample_ns = ts_ns - ts_ns % self.every_ns + self.every_ns;
        let cache = *self.cache.get_or_insert_with(|| {
            [
                "dirty_pages",
                "writeback_pages",
                "cached_pages",
                "dirty_thresh_pages",
                "dirty_bg_thresh_pages",
            ]
            .map(|name| trace.series(name))
        });
        let values = [
            stats.dirty_pages,
            stats.writeback_pages,
            stats.cached_pages,
            stats.thresh_pages,
            stats.bg_thresh_pages,
        ];
        for (series, value) in cache.into_iter().zip(values) {
            trace.counter(series, ts_ns, value as i64);
        }
        for (i, d) in stats.devices.iter().enumerate() {
            if self.devices.len() <= i {
                self.devices.push(
                    ["wbt_depth", "wbt_scale_step", "write_bw_pages_s"]
                        .map(|what| trace.series(&format!("{}.{what}", d.name))),
                );
            }
            let [depth, step, bw] = self.devices[i];
            trace.counter(depth, ts_ns, d.wbt_max_depth as i64);
            trace.counter(step, ts_ns, d.wbt_scale_step as i64);
            trace.counter(bw, ts_ns, d.write_bw_pages_s as i64);
        }
        for d in &stats.domains {
            let known = self
                .domains
                .iter()
                .find(|((device, domain), _)| *device == d.device && *domain == d.domain);
            let series = match known {
                Some(&(_, series)) => series,
                None => {
                    let series = trace.series(&format!("{}/{}.dirty_pages", d.device, d.domain));
                    self.domains
                        .push(((d.device.clone(), d.domain.clone()), series));
                    series
                }
            };
            trace.counter(series, ts_ns, d.dirty_pages as i64);
        }
    }
}
