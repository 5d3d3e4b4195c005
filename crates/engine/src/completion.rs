//! The runtime's reports: a request done, a write's copy done
//! (`write_end`), a flush, a length set, the free space of a device, a
//! memory sample, time passing (`handle_timeout`).
//!
//! Completion: the runtime reports a request done. A read makes its pages
//! valid (or drops them and remembers the error for the next reader); a
//! write makes its pages clean and counts them written, or, when it
//! failed, leaves them dirty, bumps the file's error sequence (errseq) and
//! puts the file at the back of the flusher's order. Both free the tag,
//! tell wbt, wake whoever waits, and pump the device again.

use crate::action::{Action, IoDir, IoErrorKind, IoRequest};
use crate::direct::phase::DirectPhase;

/// Planted bug (a) (feature `planted-clean-on-error`, for the simulator's
/// oracle tests only): failed pages are marked clean.
const PLANTED_CLEAN_ON_ERROR: bool = cfg!(feature = "planted-clean-on-error");
use crate::bandwidth::estimate::BANDWIDTH_INTERVAL_NS;
use crate::dirty_limits::domain_dirty_limits;
use crate::durability::state::FlushFor;
use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::{DeviceId, FileId, IoId, TaskId, WbId, PAGE_SIZE};
use crate::memory_pressure::sample::MemorySample;
use crate::page_cache::{PG_DIRTY, PG_READING, PG_REFERENCED, PG_WRITEBACK};
use crate::proportions::PERIOD_NS;
use crate::task::{Op, WaitKey};
use crate::time::Instant;
use crate::timers::{kupdate_interval, Busy};

impl Engine {
    /// The runtime finished a request. Unknown ids are ignored (and counted
    /// nowhere): a runtime bug must not corrupt the cache.
    pub fn io_complete(&mut self, now: Instant, id: IoId, result: Result<(), IoErrorKind>) {
        self.wake_timers(now, true);
        let Some(inflight) = self.io.inflight.remove(&id) else {
            return;
        };
        if self.cache.free_snapshot(&inflight.snapshot_frames) {
            self.tasks.wake(WaitKey::Memory, &mut self.actions);
        }
        let req = inflight.req;
        let latency = now.since_ns(inflight.issued_at);
        let dev = &mut self.devices[req.device.index()];
        dev.tags_used -= 1;
        dev.tags_draining &= dev.tags_used > dev.config.nr_requests;
        match req.dir {
            IoDir::Read => {
                dev.reads_inflight -= 1;
                dev.wbt.on_read_done(now, id, latency);
                self.complete_read(&req, result);
            }
            IoDir::Write => {
                let max_request_pages = dev.config.max_request_pages();
                dev.full_write_latency
                    .sample(now, latency, req.pages as u64, max_request_pages);
                if inflight.tracked {
                    dev.wbt.on_write_done(now, latency, req.class);
                }
                if inflight.commit {
                    dev.wbt.on_commit_write_done(now, latency);
                }
                if req.direct {
                    self.cache.files[req.file.index()]
                        .inflight_writes
                        .remove(&req.id);
                    self.complete_direct(&req, result);
                } else {
                    self.complete_write(&req, result);
                }
                let f = &self.cache.files[req.file.index()];
                let io = &mut self.io;
                let inflight = &mut io.inflight;
                let note_extends = |id, extends| {
                    if let Some(w) = inflight.get_mut(&id) {
                        w.req.extends = extends;
                    }
                };
                io.growing.release(&req, f, note_extends, &mut self.actions);
                self.check_syncs();
            }
        }
        if self.cache.over_budget && !self.trim_to_budget() {
            self.tasks
                .wake(crate::task::WaitKey::Memory, &mut self.actions);
        }
        self.pump(now, req.device);
        self.space_progress(now, req.device);
    }

    fn complete_read(&mut self, req: &IoRequest, result: Result<(), IoErrorKind>) {
        let dev = &mut self.devices[req.device.index()];
        dev.stats.pages_read += req.pages as u64;
        let (first, end) = (req.first_page, req.first_page + req.pages as u64);
        if result.is_ok() {
            // Under `lru = clock` a page read is a page used; with two
            // lists its reader marks it (page_cache/lru.rs), readahead does not.
            let used = match self.config.lru {
                crate::config::Lru::Clock => PG_REFERENCED,
                crate::config::Lru::ActiveInactive => 0,
            };
            self.cache.update_and_queue(req.file, first, end, |flags| {
                assert!(flags & PG_READING != 0);
                (flags & !PG_READING) | used
            });
        } else {
            // Pages truncated meanwhile are gone already; the rest goes.
            self.cache
                .remove_pages(req.file, first, end, &mut self.actions);
        }
        if let Err(e) = result {
            self.cache.files[req.file.index()].read_error = Some(e);
        }
        self.tasks
            .wake(WaitKey::FileIo(req.file), &mut self.actions);
        self.tasks.wake(WaitKey::Memory, &mut self.actions);
    }

    fn complete_write(&mut self, req: &IoRequest, result: Result<(), IoErrorKind>) {
        let pages = req.pages as u64;
        let file = req.file;
        let f = &mut self.cache.files[file.index()];
        f.inflight_writes.remove(&req.id);
        let wb_id = f.wb;
        let before = f.counts();
        let failed = result.is_err();
        self.cache
            .update_and_queue(file, req.first_page, req.first_page + pages, |flags| {
                assert!(
                    flags & PG_WRITEBACK != 0,
                    "page under writeback stays cached"
                );
                // A failed write leaves the data dirty: never silently clean.
                (flags & !PG_WRITEBACK)
                    | if failed && !PLANTED_CLEAN_ON_ERROR {
                        PG_DIRTY
                    } else {
                        0
                    }
            });
        self.cache.account(file, before);
        let after = self.cache.files[file.index()].counts();
        assert_eq!(before.writeback - after.writeback, pages);
        match result {
            Ok(()) => {
                self.durability
                    .mark_unsynced(&mut self.cache.files[file.index()]);
                let f = &mut self.cache.files[file.index()];
                f.disk_size = f.disk_size.max(req.first_page * PAGE_SIZE + req.bytes);
                let space = &mut self.devices[f.device.index()].space;
                space.written(f, req.first_page, req.first_page + pages);
                self.account_written(wb_id, req, pages);
                let range = (req.first_page, req.first_page + pages);
                let dropped = self.cache.drop_behind(file, range, &mut self.actions);
                self.wbs[wb_id.index()].dontcache.dropped_pages += dropped;
            }
            Err(e) => {
                let f = &mut self.cache.files[file.index()];
                f.err_seq += 1;
                f.last_err = Some(e);
                self.devices[req.device.index()].stats.write_errors += 1;
                self.redirty_after_error(file);
            }
        }
        self.tasks.wake(WaitKey::FileIo(file), &mut self.actions);
        self.tasks.wake(WaitKey::Memory, &mut self.actions);
        self.tasks
            .wake(WaitKey::WbWritten(wb_id), &mut self.actions);
    }

    fn account_written(&mut self, wb_id: WbId, req: &IoRequest, pages: u64) {
        let max_ratio = self.devices[req.device.index()].config.max_ratio;
        let wb = &mut self.wbs[wb_id.index()];
        wb.written += pages;
        wb.completions
            .add(&mut self.dom.completions, pages, max_ratio);
        self.stats.written_pages += pages;
        if let Some(reason) = req.reason {
            self.stats.written_by_reason[reason.index()] += pages;
        }
        self.devices[req.device.index()].stats.pages_written += pages;
    }

    /// A failed write made pages dirty again (`account_pages` counted
    /// them): the file goes to the back of the flusher's order so other
    /// files are not starved by retries.
    fn redirty_after_error(&mut self, file: FileId) {
        let f = &mut self.cache.files[file.index()];
        let wb = &mut self.wbs[f.wb.index()];
        if f.dirtied_when.is_none() && f.counts().dirty > 0 {
            // Not "now": the retry time is chosen by the flusher's next pass.
            let when = wb
                .dirty_files
                .last()
                .map(|&(t, _)| t)
                .unwrap_or(Instant::ZERO);
            f.dirtied_when = Some(when);
            wb.dirty_files.insert((when, file));
        }
    }

    /// The runtime finished flush `id` at `now` (durability/). Unknown ids
    /// are ignored: a runtime bug must not corrupt the cache.
    pub fn durable_done(&mut self, now: Instant, id: u64, result: Result<(), IoErrorKind>) {
        let Some(flush) = self.durability.pending.remove(&id) else {
            return;
        };
        if let (Ok(()), Some(len)) = (result, flush.len) {
            self.cache.files[flush.file.index()].disk_size = len;
        }
        let f = &mut self.cache.files[flush.file.index()];
        self.durability.flushed(&flush, result, f);
        match flush.purpose {
            FlushFor::Sync(sync) => {
                if let Some(op) = self.syncs.ops.get_mut(&sync) {
                    op.flushes_left -= 1;
                    if let Err(e) = result {
                        op.flush_error.get_or_insert(e);
                    }
                    if op.flushes_left == 0 {
                        // A commit's time, for wbt: from its call to here.
                        if let Some((device, began)) = op.commit {
                            let latency_ns = now.since_ns(began);
                            self.devices[device.index()]
                                .wbt
                                .on_commit_done(now, latency_ns);
                        }
                        self.tasks.wake(WaitKey::Sync(sync), &mut self.actions);
                    }
                }
            }
            FlushFor::Eviction => self.eviction_flushed(flush.file),
        }
    }

    /// The runtime set (or failed to set) the length of request `id`
    /// (`Action::SetLength`, backing_len/). Unknown ids are ignored: a
    /// runtime bug must not corrupt the cache.
    pub fn length_set(&mut self, now: Instant, id: u64, result: Result<(), IoErrorKind>) {
        let Some((file, len)) = self.resizes.finished(id, result) else {
            return;
        };
        let f = &mut self.cache.files[file.index()];
        if f.resizing == Some(id) {
            f.resizing = None;
        }
        if result.is_ok() {
            f.disk_size = len;
        }
        let device = f.device;
        self.tasks.wake(WaitKey::FileIo(file), &mut self.actions);
        // Writes of the file held meanwhile may go now.
        self.pump(now, device);
    }

    /// The runtime's report of the free space on `device`'s filesystem
    /// (statvfs: f_bavail × f_frsize), when it adds the device and when
    /// asked (`Action::StatFs`, space/).
    pub fn set_free_space(
        &mut self,
        now: Instant,
        device: DeviceId,
        free_bytes: u64,
    ) -> Result<(), EngineError> {
        let dev = self
            .devices
            .get_mut(device.index())
            .ok_or(EngineError::BadDevice(device))?;
        dev.space.reported(now, free_bytes);
        self.tasks.wake(WaitKey::Space(device), &mut self.actions);
        Ok(())
    }

    /// The runtime could not learn the free space of `device` (statvfs
    /// failed): writes to it are not limited until a report comes.
    pub fn space_unknown(&mut self, device: DeviceId) -> Result<(), EngineError> {
        let dev = self
            .devices
            .get_mut(device.index())
            .ok_or(EngineError::BadDevice(device))?;
        dev.space.unknown();
        self.tasks.wake(WaitKey::Space(device), &mut self.actions);
        Ok(())
    }

    /// After I/O completes and on timers: asks for `device`'s free space
    /// when its space flush is done or its last report is old
    /// (`DeviceSpace::ask_now`).
    pub(crate) fn space_progress(&mut self, now: Instant, device: DeviceId) {
        let Engine { devices, cache, .. } = self;
        let dev = &mut devices[device.index()];
        let wbs = &dev.wbs;
        if dev
            .space
            .ask_now(now, || wbs.iter().all(|&wb| !cache.wb(wb).has_io()))
        {
            self.actions.push_back(Action::StatFs { device });
        }
    }

    /// A sample of the memory where the cache runs, taken at `now`: the
    /// pressure policy (memory_pressure/) may move the budget between
    /// `memory_min` and `memory` (and each cgroup limit's share). Call it
    /// about ten times a second; drain the actions after (writeback of
    /// dirty pages over a lowered budget starts here). Returns the budget
    /// in pages if it changed.
    pub fn note_memory_sample(&mut self, now: Instant, sample: &MemorySample) -> Option<u64> {
        let c = &self.cache;
        let cache = (c.nr_cached + c.nr_snapshot, c.memory_pages, c.frame_pages);
        let pages = self.memory.decide(now, sample, &self.config, cache)?;
        self.set_budget_pages(pages);
        if self.cache.over_budget {
            for d in 0..self.devices.len() {
                self.pump(now, DeviceId(d as u32));
            }
        }
        Some(pages)
    }

    /// The runtime gave the memory of `pages` free frames back to the
    /// system.
    pub fn note_memory_given_back(&mut self, pages: u64) {
        self.memory.given_back(pages);
    }

    /// Sets the budget now to `pages` (within the frames): the dirty
    /// thresholds follow; over it clean pages go at once and dirty ones
    /// are written back (reason vmscan) and go as they come clean; a
    /// raised budget wakes whoever waits for memory.
    pub(crate) fn set_budget_pages(&mut self, pages: u64) {
        assert!(pages <= self.cache.frame_pages, "budget past the frames");
        assert!(pages > 0, "an empty budget");
        self.cache.memory_pages = pages;
        self.stats.memory_pages = pages;
        self.dom.thresh = domain_dirty_limits(&self.config, pages);
        // The hard limit follows a raised threshold at once and a lowered one slowly.
        self.dom.dirty_limit = self.dom.dirty_limit.max(self.dom.thresh.thresh);
        self.trim_to_budget();
        if self.cache.free_pages() > 0 {
            self.tasks.wake(WaitKey::Memory, &mut self.actions);
        }
    }

    /// The runtime has copied the bytes of `task`'s CopyIn actions:
    /// unlocks their pages (page_cache/page_lock.rs), wakes whoever waits
    /// for them and starts the writeback they held up.
    pub fn write_end(&mut self, now: Instant, task: TaskId) -> Result<(), EngineError> {
        if task.index() >= self.tasks.len() {
            return Err(EngineError::BadTask(task));
        }
        let mine = self.cache.unlock_pages(task);
        for lock in &mine {
            self.tasks
                .wake(WaitKey::FileIo(lock.file), &mut self.actions);
        }
        let mut devices: Vec<_> = mine
            .iter()
            .map(|l| self.cache.files[l.file.index()].device)
            .collect();
        devices.sort_unstable_by_key(|d| d.index());
        devices.dedup();
        for device in devices {
            self.pump(now, device);
        }
        Ok(())
    }

    /// A direct write request finished: the writer is woken once all have.
    pub(crate) fn complete_direct(&mut self, req: &IoRequest, result: Result<(), IoErrorKind>) {
        let dev = &mut self.devices[req.device.index()];
        dev.stats.pages_written += req.pages as u64;
        let Some(task) = self.io.direct_ios.remove(&req.id) else {
            return;
        };
        if let Op::DirectWrite {
            phase: DirectPhase::InFlight { left, failed },
            ..
        } = &mut self.tasks[task.index()].op
        {
            *left -= 1;
            *failed = failed.or(result.err());
            if *left == 0 {
                self.tasks.wake(WaitKey::Direct(task), &mut self.actions);
            }
        }
    }

    // Time passing (timers/).

    /// The next time `handle_timeout` must be called; None when no timer
    /// has anything to do (timers/).
    pub fn poll_timeout(&self) -> Option<Instant> {
        // Runtimes call this after every event: plain comparisons.
        let mut next = self.timers.next(self.timers_busy());
        for dev in &self.devices {
            next = next.min(dev.next_timeout());
        }
        next.get()
    }

    /// Which periodic timers have something to do (timers/).
    fn timers_busy(&self) -> Busy {
        Busy {
            bandwidth: self.cache.nr_dirty + self.cache.nr_writeback > 0
                || self.dom.dirty_limit > self.dom.thresh.thresh,
            period: self.dom.completions.events > 1,
            kupdate: self.cache.nr_dirty > 0,
        }
    }

    /// Activity at `now` may give idle timers work (`Timers::wake`).
    pub(crate) fn wake_timers(&mut self, now: Instant, completion: bool) {
        let busy = self.timers_busy();
        self.timers.wake(now, completion, busy, &self.config);
    }

    /// Runs every timer due at `now` (timers/).
    pub fn handle_timeout(&mut self, now: Instant) {
        // A lowered budget's vmscan writeback starts here (knobs are
        // changed without a time) and then from each completion.
        if self.cache.over_budget && self.trim_to_budget() {
            for d in 0..self.devices.len() {
                self.pump(now, DeviceId(d as u32));
            }
        }
        if now >= self.timers.next_bandwidth {
            self.update_bandwidths(now);
            self.timers.next_bandwidth = now + BANDWIDTH_INTERVAL_NS;
        }
        if now >= self.timers.next_period {
            let periods = 1 + now.since_ns(self.timers.next_period) / PERIOD_NS;
            self.dom.completions.new_period(periods);
            self.timers.next_period = self.timers.next_period + periods * PERIOD_NS;
        }
        if self.timers.next_kupdate.is_none() {
            self.timers.next_kupdate = kupdate_interval(&self.config).map(|ns| now + ns);
        }
        if self.timers.next_kupdate.is_some_and(|k| now >= k) {
            self.kick_kupdate(now);
            self.timers.next_kupdate = kupdate_interval(&self.config).map(|ns| now + ns);
        }
        for d in 0..self.devices.len() {
            self.device_timers(now, DeviceId(d as u32));
        }
    }

    /// `device`'s deadlines due at `now`: its free-space report, wbt's
    /// pace, quiet phase and window.
    fn device_timers(&mut self, now: Instant, device: DeviceId) {
        self.space_progress(now, device);
        let dev = &mut self.devices[device.index()];
        let pace = &mut dev.wbt.pace;
        if pace.waiting && !pace.holds_at(now) {
            pace.waiting = false;
            self.pump(now, device);
        }
        let slice = &mut self.devices[device.index()].wbt.slice;
        if slice.retry_at.is_some_and(|at| now >= at) {
            slice.retry_at = None;
            self.pump(now, device);
        }
        let dev = &mut self.devices[device.index()];
        if dev.wbt.window_end.is_some_and(|end| now >= end) {
            let recent = dev.recent_dirty_sleep(now);
            dev.wbt.on_timer(now, recent);
            dev.stats.wbt_windows += 1;
            self.pump(now, device);
        }
    }

    /// Every 200 ms: the hard dirty limit, the bandwidth estimates, and
    /// the dirty rate limits of contexts whose writers are in the
    /// throttled zone; each device keeps its peak write bandwidth.
    fn update_bandwidths(&mut self, now: Instant) {
        let dirty = self.cache.nr_dirty + self.cache.nr_writeback;
        self.dom.update_dirty_limit(dirty);
        for w in 0..self.wbs.len() {
            let wb_id = WbId(w as u32);
            let elapsed = now.since_ns(self.wbs[w].bw.time_stamp);
            if !self.cache.wb(wb_id).has_io() || elapsed < BANDWIDTH_INTERVAL_NS {
                continue;
            }
            let dtc = self.dtc(wb_id);
            let device = self.wbs[w].device;
            let strict = self.devices[device.index()].config.strict_limit;
            self.wbs[w].update_bandwidth(now, elapsed, &dtc, strict);
            let dev = &self.devices[device.index()];
            let total: u64 = dev
                .wbs
                .iter()
                .map(|w| self.wbs[w.index()].bw.write_bw)
                .sum();
            let dev = &mut self.devices[device.index()];
            dev.write_bw_peak = dev.write_bw_peak.max(total);
        }
    }
}
