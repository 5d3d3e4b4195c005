//! What the engine shows and lets change, for people, runtimes and
//! tests: knobs changed at run time, counters and gauges, the invariants
//! checked after every simulated step, and the state a runtime reads.
//!
//! Knobs are validated as a whole before anything changes (a bad value
//! changes nothing), then applied to the state that depends on them —
//! wbt's target and depth, the dirty thresholds, the flusher's period.
//!
//! Counters (`stats`) cost in devices and writeback contexts, never in
//! files or pages; each owner reports its own (`Device::stats_now`,
//! `Wb::stats`, the page cache's events).
//!
//! Invariants (TigerBeetle style): each owner checks its own (the page
//! cache: page_cache/check.rs; backlogs: backlog/); here, what spans
//! owners: handles and files, dirty files and their contexts, reserved
//! space and devices, the dirty count within its hard limit plus the
//! documented slack, requests in flight and the devices' tags and wbt.

use crate::balance_dirty::task_dirty::MAX_DIRTIED_PAUSE;
use crate::config::{Config, DeviceConfig};
use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::{DeviceId, FileId, PageIndex, TaskId};
use crate::memory_budget::ceiling_pages;
use crate::page_cache::PageRun;
use crate::stats::counters::{DeviceGauges, Gauges, Stats};
use crate::task::Op;
use crate::time::Instant;

/// How often `check_invariants` also checks the reclaim queue's coverage.
const RECLAIM_QUEUE_CHECK_EVERY: u64 = 64;

impl Engine {
    // Knobs.

    /// Changes a device knob at run time. Bad values change nothing.
    pub fn set_device_knob(
        &mut self,
        device: DeviceId,
        knob: &str,
        value: &str,
    ) -> Result<(), crate::config::KnobError> {
        let Some(dev) = self.devices.get_mut(device.index()) else {
            return Err(crate::config::KnobError::Invalid {
                knob: knob.to_string(),
                value: value.to_string(),
                reason: format!("no device {}", device.0),
            });
        };
        let mut config = dev.config.clone();
        config.set(knob, value)?;
        let sum_min: u32 = self
            .devices
            .iter()
            .enumerate()
            .map(|(i, d)| {
                if i == device.index() {
                    config.min_ratio
                } else {
                    d.config.min_ratio
                }
            })
            .sum();
        if sum_min > 100 {
            return Err(crate::config::KnobError::Invalid {
                knob: knob.to_string(),
                value: value.to_string(),
                reason: "the devices' min_ratio values would add up to more than 100".to_string(),
            });
        }
        self.devices[device.index()].set_knob(knob, config);
        Ok(())
    }

    /// Changes a cache-wide knob at run time. Bad values change nothing.
    /// The cache budget (`memory`) can be lowered, and raised again up to
    /// what the cache started with (the runtime's frames); over a lowered
    /// budget, clean pages go at once and dirty ones once written back.
    /// Written by hand, `memory` is the budget now and the ceiling a cache
    /// following memory pressure grows back up to (memory_budget/);
    /// `memory_min` its floor (a budget below a raised floor rises to it).
    pub fn set_knob(&mut self, knob: &str, value: &str) -> Result<(), crate::config::KnobError> {
        let mut config = self.config.clone();
        config.set(knob, value)?;
        let memory_pages = config.memory_bytes / crate::ids::PAGE_SIZE;
        if memory_pages > self.cache.frame_pages {
            return Err(crate::config::KnobError::Invalid {
                knob: knob.to_string(),
                value: value.to_string(),
                reason: format!(
                    "the cache started with {} and cannot grow past it while it runs",
                    crate::units::format_bytes(self.cache.frame_pages * crate::ids::PAGE_SIZE)
                ),
            });
        }
        if config.dirty_writeback_centisecs != self.config.dirty_writeback_centisecs {
            self.timers.next_kupdate = None;
        }
        let backlog_changed = config.backlog_throttle != self.config.backlog_throttle
            || config.backlog_wait_ms != self.config.backlog_wait_ms;
        self.config = config;
        self.cache.lru = self.config.lru;
        if backlog_changed {
            self.backlog_recheck();
        }
        let budget = match knob {
            "memory" => {
                self.memory.set_by_knob();
                memory_pages
            }
            "memory_min" if self.memory.follows_pressure() => {
                let ceiling = ceiling_pages(&self.config, self.cache.frame_pages);
                let floor = (self.config.memory_min_bytes / crate::ids::PAGE_SIZE).min(ceiling);
                if floor > self.cache.memory_pages {
                    self.memory.set_by_knob();
                }
                self.cache.memory_pages.max(floor)
            }
            // The dirty thresholds follow the other knobs.
            _ => self.cache.memory_pages,
        };
        self.set_budget_pages(budget);
        Ok(())
    }

    /// Reports whether `device` needs pages kept stable while they are
    /// written (it checksums data in flight: Linux's queue/stable_writes).
    /// With `stable_writes = auto` this picks snapshot (true) or none.
    pub fn set_stable_writes_required(
        &mut self,
        device: DeviceId,
        required: bool,
    ) -> Result<(), EngineError> {
        let dev = self
            .devices
            .get_mut(device.index())
            .ok_or(EngineError::BadDevice(device))?;
        dev.stable_required = required;
        Ok(())
    }

    /// Reports reads the device served for others since the last report
    /// (from the device's statistics): `reads` reads taking `latency_ns` in
    /// all. Lets wbt protect readers outside the engine.
    pub fn note_foreign_reads(
        &mut self,
        now: Instant,
        device: DeviceId,
        reads: u64,
        latency_ns: u64,
    ) -> Result<(), EngineError> {
        let dev = self
            .devices
            .get_mut(device.index())
            .ok_or(EngineError::BadDevice(device))?;
        if reads > 0 && dev.wbt.enabled() {
            dev.wbt.on_foreign_reads(now, reads, latency_ns / reads);
        }
        Ok(())
    }

    // Counters and gauges.

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
        self.cache.files.iter().map(|f| f.nr_runs() as u64).sum()
    }

    /// The few counters a timeline samples, without the copies `stats`
    /// makes (names, histograms): cheap enough to take a thousand times a
    /// run.
    pub fn gauges(&self) -> Gauges {
        let mut gauges = Gauges::default();
        self.gauges_into(&mut gauges);
        gauges
    }

    /// `gauges` into `out`, reusing its vector (a timeline's thousands).
    pub fn gauges_into(&self, out: &mut Gauges) {
        out.cached_pages = self.cache.nr_cached;
        out.dirty_pages = self.cache.nr_dirty;
        out.writeback_pages = self.cache.nr_writeback;
        out.thresh_pages = self.dom.thresh.thresh;
        out.bg_thresh_pages = self.dom.thresh.bg_thresh;
        let devices = self.devices.iter().map(|d| DeviceGauges {
            pages_read: d.stats.pages_read,
            pages_written: d.stats.pages_written,
            dirty_pages: d.wbs.iter().map(|&w| self.cache.wb(w).dirty).sum(),
            wbt_max_depth: d.wbt.rq_depth.max_depth,
        });
        out.devices.clear();
        out.devices.extend(devices);
        out.stalled_ns = self.stats.stalls.map(|s| s.total_ns);
    }

    /// The engine's counters now. Costs in devices and writeback
    /// contexts, never in files or pages.
    pub fn stats(&self) -> Stats {
        let mut s = self.stats.clone();
        s.memory = self.memory.stats(&self.config, self.cache.frame_pages);
        let events = self.cache.events;
        s.pgactivate = events.pgactivate;
        s.pgdeactivate = events.pgdeactivate;
        s.workingset_activate = events.workingset_activate;
        s.reclaimed_pages = events.reclaimed_pages;
        s.cached_pages = self.cache.nr_cached;
        s.snapshot_held_pages = self.cache.nr_snapshot;
        s.active_pages = self.cache.nr_active;
        s.dirty_pages = self.cache.nr_dirty;
        s.writeback_pages = self.cache.nr_writeback;
        s.thresh_pages = self.dom.thresh.thresh;
        s.bg_thresh_pages = self.dom.thresh.bg_thresh;
        s.works_coalesced = self.wbs.iter().map(|w| w.flusher.works_coalesced).sum();
        s.devices = self
            .devices
            .iter()
            .map(|d| {
                let mut ds = d.stats_now(self.config.backlog_wait_ms);
                for &w in &d.wbs {
                    let pages = self.cache.wb(w);
                    ds.dirty_pages += pages.dirty;
                    ds.writeback_pages += pages.writeback;
                    ds.write_bw_pages_s += self.wbs[w.index()].bw.avg_write_bw;
                }
                ds
            })
            .collect();
        s.domains = (self.wbs.iter().zip(&self.cache.wb_pages))
            .map(|(w, pages)| {
                let device = &self.devices[w.device.index()].stats.name;
                w.stats(device, &self.domains[w.domain.index()], pages)
            })
            .collect();
        s.dontcache_dirty_pages = self.cache.nr_dontcache_dirty;
        s
    }

    // Invariants.

    /// Panics with a description if an invariant does not hold. Cost is
    /// linear in the number of cached pages.
    pub fn check_invariants(&self) {
        // The queue's coverage costs a sort; the simulator checks after
        // every event, so it is checked on every 64th call.
        let checks = self.invariant_checks.get();
        self.invariant_checks.set(checks + 1);
        let queues = checks.is_multiple_of(RECLAIM_QUEUE_CHECK_EVERY);
        let reserved = self.cache.check(self.devices.len(), queues);
        for (d, dev) in self.devices.iter().enumerate() {
            assert_eq!(
                dev.space.reserved, reserved[d],
                "device {d}: reserved space is what its pages hold"
            );
        }
        assert_eq!(self.cache.wb_pages.len(), self.wbs.len(), "wb counts");
        self.check_backlogs();
        let limit = self.hard_limit_pages() + self.dirty_slack_pages();
        let dirty_total = self.cache.nr_dirty + self.cache.nr_writeback;
        assert!(
            dirty_total <= limit,
            "dirty {dirty_total} over hard limit + slack {limit}"
        );
        self.check_files();
        assert_eq!(
            self.eviction.live,
            self.cache.files.iter().filter(|f| !f.evicted).count(),
            "live file count"
        );
        assert!(
            self.syncs
                .ops
                .values()
                .all(|op| !(op.issue_only && op.barrier.is_some())),
            "a finished submission op stayed behind"
        );
        self.check_devices_in_flight();
    }

    /// Checks every backlog's bound and accounting.
    pub(crate) fn check_backlogs(&self) {
        let (mode, wait_ms) = (self.config.backlog_throttle, self.config.backlog_wait_ms);
        let producers = self.tasks.len() as u64;
        let mut queued_cuts = 0;
        for (d, dev) in self.devices.iter().enumerate() {
            dev.backlog.check(d, mode, wait_ms, producers);
            queued_cuts += dev.backlog.check_items(&self.cache.files);
        }
        // One cut a file: the flags and the items agree.
        let flagged = self.cache.files.iter().filter(|f| f.cut_pending).count();
        assert_eq!(
            queued_cuts, flagged,
            "queued cuts and files waiting for one"
        );
    }

    /// Each file's handles are open, and it is on its context's dirty
    /// list exactly while it has dirty pages.
    fn check_files(&self) {
        let mut open_handles = vec![0u32; self.cache.files.len()];
        for h in self.handles.iter() {
            open_handles[h.file.index()] += 1;
        }
        for (idx, f) in self.cache.files.iter().enumerate() {
            assert_eq!(f.open_handles, open_handles[idx], "open handle count");
            assert_eq!(
                f.dirtied_when.is_some(),
                f.counts().dirty > 0,
                "dirtied_when set iff dirty"
            );
            if let Some(when) = f.dirtied_when {
                assert!(self.wbs[f.wb.index()]
                    .dirty_files
                    .contains(&(when, FileId(idx as u32))));
            }
        }
    }

    /// Tags and wbt's count match the requests in flight; whatever wbt
    /// holds has a time to go.
    fn check_devices_in_flight(&self) {
        let mut tracked = vec![0u32; self.devices.len()];
        let mut tags = vec![0u32; self.devices.len()];
        for io in self.io.inflight.values() {
            tags[io.req.device.index()] += 1;
            tracked[io.req.device.index()] += io.tracked as u32;
        }
        let inflight = &self.io.inflight;
        let write_of = |id| {
            let w = inflight.get(&id)?;
            (w.req.dir == crate::IoDir::Write).then_some(w.req.file)
        };
        self.io.growing.check(write_of);
        let timer_armed = self.poll_timeout().is_some();
        for (d, dev) in self.devices.iter().enumerate() {
            dev.check_in_flight(d, (tags[d], tracked[d]), timer_armed);
        }
    }

    // State a runtime reads.

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// A device's knobs; None for an unknown device.
    pub fn device_config(&self, device: DeviceId) -> Option<&DeviceConfig> {
        self.devices.get(device.index()).map(|d| &d.config)
    }

    /// Pages dirty or under writeback, globally.
    pub fn dirty_and_writeback_pages(&self) -> u64 {
        self.cache.nr_dirty + self.cache.nr_writeback
    }

    /// The hard dirty limit in pages (max of thresh and the decaying dirty_limit).
    pub fn hard_limit_pages(&self) -> u64 {
        self.dom.hard_limit()
    }

    /// How far the dirty count may exceed the hard limit: each task may
    /// dirty up to its check interval (capped) plus one page before it
    /// looks at the limit again.
    pub fn dirty_slack_pages(&self) -> u64 {
        self.tasks.len() as u64 * (MAX_DIRTIED_PAUSE + 1)
    }

    /// The frame holding a cached page's data.
    pub fn page_frame(&self, file: FileId, page: PageIndex) -> Option<u32> {
        self.cache.files.get(file.index())?.frame(page)
    }

    /// The cached pages of `file` in `first..end`, run by run in page
    /// order, clipped to the range (none for an unknown file): what a
    /// runtime's page map is kept and checked by (page_map/).
    pub fn page_runs(
        &self,
        file: FileId,
        first: PageIndex,
        end: PageIndex,
    ) -> impl Iterator<Item = PageRun> + '_ {
        let runs = self.cache.files.get(file.index());
        let runs = runs.into_iter().flat_map(move |f| f.runs_over(first, end));
        runs.map(move |(start, run)| PageRun::clipped(start, run, first, end))
            .filter(|r| r.first < r.end)
    }

    /// Whether page `page` of `file` is in a write-back the engine holds
    /// back (`extending_writes = one-per-file`, dispatch/extending.rs):
    /// under writeback, not yet handed to the runtime (`Action::Submit`).
    pub fn write_held(&self, file: FileId, page: PageIndex) -> bool {
        self.io.growing.holds(file, page)
    }

    /// One past the highest file id given so far (evicted ids included).
    pub fn file_ids_end(&self) -> u32 {
        self.cache.files.len() as u32
    }

    /// Pages on the active list (PG_ACTIVE, in any state).
    pub fn nr_active(&self) -> u64 {
        self.cache.nr_active
    }

    pub fn cached_pages(&self) -> u64 {
        self.cache.nr_cached
    }

    /// Whether a task has no operation in progress (false for an unknown
    /// task).
    pub fn task_is_idle(&self, task: TaskId) -> bool {
        self.tasks
            .get(task.index())
            .is_some_and(|t| t.op == Op::Idle)
    }

    /// A file's cached pages, and how many of them are active (page_cache/lru.rs);
    /// None for an unknown file.
    pub fn file_cached_pages(&self, file: FileId) -> Option<(u64, u64)> {
        let counts = self.cache.files.get(file.index())?.counts();
        Some((counts.cached, counts.active))
    }

    /// The cache budget now (the `memory` knob).
    pub fn memory_pages(&self) -> u64 {
        self.cache.memory_pages
    }

    /// How long a runtime following memory pressure waits before its
    /// next sample (memory_pressure/: shorter near the reserve).
    pub fn memory_sample_interval_ns(&self) -> u64 {
        self.memory.sample_interval_ns()
    }

    /// The frames the runtime provides: the budget the cache started with,
    /// the most the `memory` knob can be raised to.
    pub fn frame_pages(&self) -> u64 {
        self.cache.frame_pages
    }

    /// One past the highest frame in use: no frame from there on is in
    /// use, and first fit takes new frames from the lowest free ones, so
    /// a growing cache uses the frames from here up next. A runtime may
    /// prepare their memory ahead (runtime/populate.rs in the library).
    pub fn frames_used_end(&self) -> u64 {
        self.cache.frames.used_end() as u64
    }

    /// Free frames below frame `end`, highest first, `max` in all at most:
    /// the engine neither reads nor writes a free frame, so a runtime whose
    /// budget was lowered may give their memory back to the system (they
    /// come back zeroed when next used; the engine fills a frame before
    /// any reader sees it).
    pub fn free_frames_below(&self, end: u32, max: u64) -> Vec<(u32, u64)> {
        self.cache.frames.free_below(end, max)
    }

    /// Frames freed since the engine started, counted: unchanged since a
    /// runtime last gave free frames' memory back, there is nothing new
    /// to give back.
    pub fn frames_freed_total(&self) -> u64 {
        self.cache.frames.freed_total()
    }

    /// Whether a cut of `file`'s backing file is queued on its device's
    /// backlog (then the runtime leaves its length to the backlog).
    pub fn cut_queued(&self, file: FileId) -> bool {
        self.cache
            .files
            .get(file.index())
            .is_some_and(|f| f.cut_pending)
    }
}
