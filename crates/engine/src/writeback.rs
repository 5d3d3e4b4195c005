//! Writeback: the flusher choosing what to write, admission through wbt
//! and the device's request tags, and what happens when I/O completes.

use crate::action::{Action, IoDir, IoErrorKind, IoRequest};
use crate::engine::{Engine, Inflight, WaitKey};
use crate::flusher::{writeback_chunk_size, WbReason, Work};
use crate::ids::{DeviceId, FileId, IoId, PageIndex, WbId};
use crate::page_cache::{PG_DIRTY, PG_READING, PG_REFERENCED, PG_WRITEBACK};
use crate::ratelimit::RatelimitInput;
use crate::time::Instant;
use crate::wbt::WbtClass;
use std::ops::Bound;

/// How many works one flusher looks at per request before giving up
/// (works that find nothing to write end at once).
const MAX_WORKS_PER_PICK: usize = 8;

/// The wbt class a flusher work's writes are admitted under.
fn class_of(reason: WbReason) -> WbtClass {
    match reason {
        // Integrity writeback is REQ_SYNC.
        WbReason::Sync => WbtClass::Sync,
        // Background and kupdate writeback is REQ_BACKGROUND.
        WbReason::Background | WbReason::Periodic => WbtClass::Background,
        WbReason::Vmscan | WbReason::BalanceDirty => WbtClass::Normal,
    }
}

impl Engine {
    pub(crate) fn kick_background(&mut self, now: Instant, wb: WbId) {
        let flusher = &mut self.wbs[wb.index()].flusher;
        if !flusher.background_kicked {
            flusher.background_kicked = true;
            let device = self.wbs[wb.index()].device;
            self.pump(now, device);
        }
    }

    /// The flusher's periodic wake-up (Linux's wb_workfn on its timer):
    /// contexts with files dirty for longer than dirty_expire_centisecs
    /// write them, and contexts over the background threshold resume
    /// background writeback that no writer kicked.
    pub(crate) fn kick_kupdate(&mut self, now: Instant) {
        let expire_ns = self.config.dirty_expire_centisecs as u64 * 10 * crate::time::NS_PER_MS;
        for w in 0..self.wbs.len() {
            let over_bg = self.wbs[w].dirty > 0 && self.over_bg_thresh(WbId(w as u32));
            let wb = &mut self.wbs[w];
            let expired = wb
                .dirty_files
                .first()
                .is_some_and(|&(t, _)| now.since_ns(t) >= expire_ns);
            wb.flusher.kupdate_due |= expired;
            wb.flusher.background_kicked |= over_bg;
            if expired || over_bg {
                let device = wb.device;
                self.pump(now, device);
            }
        }
    }

    /// Whether a context is over its background threshold (Linux's wb_over_bg_thresh).
    pub(crate) fn over_bg_thresh(&self, wb: WbId) -> bool {
        if self.nr_dirty > self.thresh.bg_thresh {
            return true;
        }
        let dtc = self.dtc(wb);
        self.wbs[wb.index()].dirty > dtc.wb_bg_thresh
    }

    /// Every 200 ms: bandwidth estimates, and the dirty rate limits of
    /// contexts whose writers are in the throttled zone.
    pub(crate) fn update_bandwidths(&mut self, now: Instant) {
        let dirty = self.nr_dirty + self.nr_writeback;
        // The hard limit follows the threshold up at once and down slowly.
        let target = self.thresh.thresh.max(dirty);
        if self.dirty_limit < self.thresh.thresh {
            self.dirty_limit = self.thresh.thresh;
        } else if self.dirty_limit > target {
            self.dirty_limit -= (self.dirty_limit - target) >> 5;
        }
        for w in 0..self.wbs.len() {
            let wb_id = WbId(w as u32);
            let elapsed = now.since_ns(self.wbs[w].bw.time_stamp);
            if !self.wbs[w].has_io() || elapsed < crate::bandwidth::BANDWIDTH_INTERVAL_NS {
                continue;
            }
            let dtc = self.dtc(wb_id);
            let strict = self.devices[self.wbs[w].device.index()].config.strict_limit;
            let (control_dirty, setpoint, freerun) = if strict {
                let wb_setpoint = if dtc.wb_dirty < 8 {
                    dtc.wb_dirty + 1
                } else {
                    (dtc.wb_thresh + dtc.wb_bg_thresh) / 2
                };
                (
                    dtc.wb_dirty,
                    wb_setpoint,
                    crate::dirty_limits::dirty_freerun_ceiling(dtc.wb_thresh, dtc.wb_bg_thresh),
                )
            } else {
                (dtc.dirty, dtc.setpoint(), dtc.freerun())
            };
            let wb = &mut self.wbs[w];
            if control_dirty > freerun {
                let pos_ratio =
                    crate::position_ratio::wb_position_ratio(&dtc, wb.bw.avg_write_bw, strict);
                wb.rl.update(RatelimitInput {
                    dirtied: wb.dirtied - wb.bw.dirtied_stamp,
                    elapsed_ns: elapsed,
                    pos_ratio,
                    write_bw: wb.bw.avg_write_bw,
                    dirty: control_dirty,
                    setpoint,
                });
            }
            wb.bw.update(now, wb.written);
            wb.bw.dirtied_stamp = wb.dirtied;
            wb.bw.time_stamp = now;
        }
    }

    /// Issues whatever the device can take now: waiting reads first (they
    /// only need a tag), then integrity writes, then flusher writes in
    /// round robin over the device's contexts, each as wbt admits it.
    pub(crate) fn pump(&mut self, now: Instant, device: DeviceId) {
        loop {
            loop {
                let dev = &mut self.devices[device.index()];
                if dev.tags_used >= dev.config.nr_requests {
                    break;
                }
                let Some(req) = dev.tag_waiters.pop_front() else {
                    break;
                };
                self.issue(now, req, false);
            }
            let dev = &self.devices[device.index()];
            if dev.tags_used >= dev.config.nr_requests {
                return;
            }
            if self.pump_syncs(now, device) {
                continue;
            }
            let dev = &self.devices[device.index()];
            let n = dev.wbs.len();
            let start = dev.next_wb;
            let mut progress = false;
            for k in 0..n {
                let idx = (start + k) % n;
                let wb = self.devices[device.index()].wbs[idx];
                if self.pump_wb(now, wb) {
                    self.devices[device.index()].next_wb = idx + 1;
                    progress = true;
                    break;
                }
            }
            if !progress {
                return;
            }
        }
    }

    /// Picks the flusher's next work if it has none. Returns false if there is nothing to do.
    fn flusher_pick(&mut self, now: Instant, wb_id: WbId) -> bool {
        if self.wbs[wb_id.index()].flusher.current.is_some() {
            return true;
        }
        let expire_ns = self.config.dirty_expire_centisecs as u64 * 10 * crate::time::NS_PER_MS;
        let over_bg = self.over_bg_thresh(wb_id);
        let wb = &mut self.wbs[wb_id.index()];
        let flusher = &mut wb.flusher;
        let work = if let Some(work) = flusher.next_queued() {
            Some(work)
        } else if flusher.kupdate_due {
            flusher.kupdate_due = false;
            Some(Work {
                reason: WbReason::Periodic,
                nr_pages: wb.dirty,
                for_background: false,
                older_than: Some(now - expire_ns),
            })
        } else if flusher.background_kicked && over_bg {
            Some(Work::background())
        } else {
            flusher.background_kicked = false;
            None
        };
        let Some(work) = work else { return false };
        wb.flusher.current = Some(work);
        wb.flusher.chunk_left = 0;
        true
    }

    /// Issues one request from a context's flusher, if wbt and the work allow.
    fn pump_wb(&mut self, now: Instant, wb_id: WbId) -> bool {
        for _ in 0..MAX_WORKS_PER_PICK {
            if !self.flusher_pick(now, wb_id) {
                return false;
            }
            let reason = self.wbs[wb_id.index()]
                .flusher
                .current
                .as_ref()
                .map(|w| w.reason)
                .expect("picked");
            let device = self.wbs[wb_id.index()].device;
            let class = class_of(reason);
            let recent = self.recent_dirty_sleep(device, now);
            let wbt = &mut self.devices[device.index()].wbt;
            if !wbt.may_issue(class, now, recent) {
                wbt.note_refused();
                return false;
            }
            match self.flusher_build(now, wb_id) {
                Some(req) => {
                    self.issue(now, req, true);
                    return true;
                }
                None => {
                    // The work found nothing (more) to write: it is done.
                    self.wbs[wb_id.index()].flusher.current = None;
                }
            }
        }
        false
    }

    /// Moves the flusher's cursor to the next dirty file with something to
    /// write (files in first-dirtied order, wrapping once).
    fn flusher_next_file(&mut self, wb_id: WbId, older_than: Option<Instant>) -> Option<FileId> {
        let wb = &self.wbs[wb_id.index()];
        let after = match wb.cursor {
            Some(c) => Bound::Excluded(c),
            None => Bound::Unbounded,
        };
        let candidates = wb
            .dirty_files
            .range((after, Bound::Unbounded))
            .chain(wb.dirty_files.range(..))
            .take(wb.dirty_files.len());
        let mut found = None;
        for &(when, file) in candidates {
            if older_than.is_some_and(|limit| when > limit) {
                continue;
            }
            if self.files[file.index()].next_writable(0).is_some() {
                found = Some((when, file));
                break;
            }
        }
        let wb = &mut self.wbs[wb_id.index()];
        wb.cursor = found;
        found.map(|(_, f)| f)
    }

    /// Builds the flusher's next write request from its current work.
    fn flusher_build(&mut self, now: Instant, wb_id: WbId) -> Option<IoRequest> {
        let work = self.wbs[wb_id.index()]
            .flusher
            .current
            .clone()
            .expect("picked");
        if work.nr_pages == 0 || (work.for_background && !self.over_bg_thresh(wb_id)) {
            return None;
        }
        let wb = &self.wbs[wb_id.index()];
        let current_ok = wb.flusher.chunk_left > 0
            && wb.cursor.is_some_and(|(_, f)| {
                wb.dirty_files.contains(&wb.cursor.expect("checked"))
                    && self.files[f.index()].next_writable(0).is_some()
            });
        let file = if current_ok {
            wb.cursor.expect("checked").1
        } else {
            let file = self.flusher_next_file(wb_id, work.older_than)?;
            let wb = &mut self.wbs[wb_id.index()];
            wb.flusher.chunk_left = if work.reason == WbReason::Sync {
                u64::MAX
            } else {
                writeback_chunk_size(
                    wb.bw.avg_write_bw,
                    self.thresh.thresh.max(self.dirty_limit),
                    work.nr_pages,
                )
            };
            file
        };
        let f = &self.files[file.index()];
        let start = f
            .next_writable(f.writeback_index)
            .or_else(|| f.next_writable(0))?;
        let wb = &self.wbs[wb_id.index()];
        let dev = &self.devices[wb.device.index()];
        let max_pages = (dev.config.max_sectors_kb as u64 / 4)
            .min(dev.wbt.write_pages_cap(now, wb.bw.avg_write_bw))
            .min(wb.flusher.chunk_left)
            .min(work.nr_pages);
        let pages = self.writable_run(file, start, max_pages);
        let wb = &mut self.wbs[wb_id.index()];
        wb.flusher.chunk_left = wb.flusher.chunk_left.saturating_sub(pages);
        if let Some(w) = wb.flusher.current.as_mut() {
            w.nr_pages = w.nr_pages.saturating_sub(pages);
        }
        Some(self.start_writeback(file, start, pages, class_of(work.reason), work.reason))
    }

    /// Length of the run of writable pages from `start`, at most `max`.
    pub(crate) fn writable_run(&self, file: FileId, start: PageIndex, max: u64) -> u64 {
        let n = self.files[file.index()].writable_len(start, max);
        assert!(n >= 1, "run starts at a writable page");
        n
    }

    /// Moves pages from dirty to under writeback and builds their request.
    pub(crate) fn start_writeback(
        &mut self,
        file: FileId,
        start: PageIndex,
        pages: u64,
        class: WbtClass,
        reason: WbReason,
    ) -> IoRequest {
        let f = &mut self.files[file.index()];
        let before = f.counts();
        f.update(start, start + pages, |flags| {
            assert!(flags & PG_DIRTY != 0 && flags & PG_WRITEBACK == 0);
            (flags & !PG_DIRTY) | PG_WRITEBACK
        });
        assert_eq!(
            before.dirty - f.counts().dirty,
            pages,
            "all pages were dirty"
        );
        f.writeback_index = start + pages;
        let wb = &mut self.wbs[f.wb.index()];
        wb.dirty -= pages;
        wb.writeback += pages;
        if f.counts().dirty == 0 {
            if let Some(when) = f.dirtied_when.take() {
                wb.dirty_files.remove(&(when, file));
            }
        }
        let device = f.device;
        self.nr_dirty -= pages;
        self.nr_writeback += pages;
        self.note_peaks();
        let id = IoId(self.next_io);
        self.next_io += 1;
        IoRequest {
            id,
            device,
            file,
            dir: IoDir::Write,
            first_page: start,
            pages: pages as u32,
            class: Some(class),
            reason: Some(reason),
        }
    }

    /// Hands a request to the runtime.
    pub(crate) fn issue(&mut self, now: Instant, req: IoRequest, tracked: bool) {
        let dev = &mut self.devices[req.device.index()];
        assert!(
            dev.tags_used < dev.config.nr_requests,
            "issue without a free tag"
        );
        dev.tags_used += 1;
        dev.stats.inflight_peak = dev.stats.inflight_peak.max(dev.tags_used);
        match req.dir {
            IoDir::Write => {
                if tracked {
                    dev.wbt.on_write_issue(now);
                }
                dev.stats.writes += 1;
                self.files[req.file.index()].inflight_writes.insert(req.id);
            }
            IoDir::Read => {
                dev.wbt.on_read_issue(now, req.id);
                dev.stats.reads += 1;
            }
        }
        self.inflight.insert(
            req.id,
            Inflight {
                req: req.clone(),
                issued_at: now,
                tracked,
            },
        );
        self.actions.push_back(Action::Submit(req));
    }

    /// Reads pages that were inserted as PG_READING.
    pub(crate) fn submit_read(
        &mut self,
        now: Instant,
        file: FileId,
        first_page: PageIndex,
        pages: u64,
    ) {
        let device = self.files[file.index()].device;
        let id = IoId(self.next_io);
        self.next_io += 1;
        let req = IoRequest {
            id,
            device,
            file,
            dir: IoDir::Read,
            first_page,
            pages: pages as u32,
            class: None,
            reason: None,
        };
        let dev = &mut self.devices[device.index()];
        if dev.tags_used < dev.config.nr_requests && dev.tag_waiters.is_empty() {
            self.issue(now, req, false);
        } else {
            dev.tag_waiters.push_back(req);
        }
    }

    /// The runtime finished a request. Unknown ids are ignored (and counted
    /// nowhere): a runtime bug must not corrupt the cache.
    pub fn io_complete(&mut self, now: Instant, id: IoId, result: Result<(), IoErrorKind>) {
        let Some(inflight) = self.inflight.remove(&id) else {
            return;
        };
        let req = inflight.req;
        let latency = now.since_ns(inflight.issued_at);
        let dev = &mut self.devices[req.device.index()];
        dev.tags_used -= 1;
        dev.tags_draining &= dev.tags_used > dev.config.nr_requests;
        match req.dir {
            IoDir::Read => {
                dev.wbt.on_read_done(now, id, latency);
                self.complete_read(&req, result);
            }
            IoDir::Write => {
                if inflight.tracked {
                    dev.wbt.on_write_done();
                }
                self.complete_write(&req, result);
                self.check_syncs();
            }
        }
        self.pump(now, req.device);
    }

    fn complete_read(&mut self, req: &IoRequest, result: Result<(), IoErrorKind>) {
        let dev = &mut self.devices[req.device.index()];
        dev.stats.pages_read += req.pages as u64;
        let (first, end) = (req.first_page, req.first_page + req.pages as u64);
        if result.is_ok() {
            self.update_and_queue(req.file, first, end, |flags| {
                assert!(flags & PG_READING != 0);
                (flags & !PG_READING) | PG_REFERENCED
            });
        } else {
            // Pages truncated meanwhile are gone already; the rest goes.
            self.remove_pages(req.file, first, end);
        }
        if let Err(e) = result {
            self.files[req.file.index()].read_error = Some(e);
        }
        self.wake(WaitKey::FileIo(req.file));
        self.wake(WaitKey::Memory);
    }

    fn complete_write(&mut self, req: &IoRequest, result: Result<(), IoErrorKind>) {
        let pages = req.pages as u64;
        let file = req.file;
        let f = &mut self.files[file.index()];
        f.inflight_writes.remove(&req.id);
        let wb_id = f.wb;
        let before = f.counts();
        let failed = result.is_err();
        self.update_and_queue(file, req.first_page, req.first_page + pages, |flags| {
            assert!(
                flags & PG_WRITEBACK != 0,
                "page under writeback stays cached"
            );
            // A failed write leaves the data dirty: never silently clean.
            (flags & !PG_WRITEBACK) | if failed { PG_DIRTY } else { 0 }
        });
        let after = self.files[file.index()].counts();
        assert_eq!(before.writeback - after.writeback, pages);
        let redirtied = after.dirty - before.dirty;
        self.nr_writeback -= pages;
        self.wbs[wb_id.index()].writeback -= pages;
        match result {
            Ok(()) => {
                self.account_written(wb_id, req, pages);
            }
            Err(e) => {
                let f = &mut self.files[file.index()];
                f.err_seq += 1;
                f.last_err = Some(e);
                self.devices[req.device.index()].stats.write_errors += 1;
                self.redirty_after_error(file, redirtied);
            }
        }
        self.wake(WaitKey::FileIo(file));
        self.wake(WaitKey::Memory);
        self.wake(WaitKey::WbWritten(wb_id));
    }

    fn account_written(&mut self, wb_id: WbId, req: &IoRequest, pages: u64) {
        let max_ratio = self.devices[req.device.index()].config.max_ratio;
        let wb = &mut self.wbs[wb_id.index()];
        wb.written += pages;
        wb.completions.add(&mut self.completions, pages, max_ratio);
        self.stats.written_pages += pages;
        if let Some(reason) = req.reason {
            self.stats.written_by_reason[reason.index()] += pages;
        }
        self.devices[req.device.index()].stats.pages_written += pages;
    }

    /// Accounts pages a failed write made dirty again; the file goes to the
    /// back of the flusher's order so other files are not starved by retries.
    fn redirty_after_error(&mut self, file: FileId, redirtied: u64) {
        let f = &mut self.files[file.index()];
        let wb = &mut self.wbs[f.wb.index()];
        wb.dirty += redirtied;
        self.nr_dirty += redirtied;
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
}
