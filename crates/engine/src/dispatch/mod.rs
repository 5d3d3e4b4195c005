//! The writeback path: the flusher (flusher/: which work, which file,
//! how many pages) and dispatch, below.
//!
//! Dispatch: handing requests to the device. Reads need only a request
//! tag (they queue for one in arrival order); writes need a tag and wbt's
//! admission for their class. `pump` issues what the device can take now:
//! waiting reads first, then integrity (sync) writes, then flusher writes
//! in round robin over the device's writeback contexts. Direct writes
//! (direct/) skip the cache: their requests need only a tag, as reads do.
//!
//! A device with `extending_writes = one-per-file` takes a file's
//! write-backs that make it longer one at a time, in order: `issue` holds
//! such a write while another of the file is in flight, and its
//! completion hands the held one over (extending.rs, with the reasons: a
//! killed process must leave no hole below a higher write, and ext4 and
//! XFS run these writes one at a time anyway).

pub(crate) mod extending;
pub(crate) mod inflight;

use crate::action::{IoDir, IoRequest, StallReason, Step, WbReason, WbtClass};
use crate::config::ExtendingWrites;
use crate::direct::phase::DirectPhase;
use crate::dirty_limits::Dtc;
use crate::dispatch::extending::extends_backing;
use crate::dispatch::inflight::Inflight;
use crate::dontcache::dontcache_pages_for;
use crate::engine::Engine;
use crate::error::EngineError;
use crate::flusher::{class_of, writeback_chunk_size, Work};
use crate::ids::{DeviceId, FileId, HandleId, PageIndex, TaskId, WbId, PAGE_SIZE};
use crate::page_cache::write_bytes;
use crate::task::{Op, WaitKey};
use crate::time::Instant;

/// How many works one flusher looks at per request before giving up
/// (works that find nothing to write end at once).
const MAX_WORKS_PER_PICK: usize = 8;

impl Engine {
    /// Issues whatever the device can take now: waiting reads first (they
    /// only need a tag), then integrity writes, then flusher writes in
    /// round robin over the device's contexts, each as wbt admits it.
    pub(crate) fn pump(&mut self, now: Instant, device: DeviceId) {
        // An unlinked file's release may have waited for this I/O.
        self.pump_backlog(now, device);
        loop {
            loop {
                let dev = &mut self.devices[device.index()];
                // Reads go in arrival order, no more in flight than the
                // device may reorder without favouring one reader.
                if dev.tags_used >= dev.config.nr_requests
                    || dev.reads_inflight >= dev.read_depth_max
                {
                    break;
                }
                // A write phase holds reads (`wbt_slice.rs`); what
                // arrived after a held read waits behind it.
                let held = |r: &IoRequest| r.dir == IoDir::Read && dev.wbt.holds_reads(now);
                if dev.tag_waiters.front().is_none_or(held) {
                    break;
                }
                let Some(req) = dev.tag_waiters.pop_front() else {
                    break;
                };
                self.issue(now, req, false, false);
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
            let recent = self.devices[device.index()].recent_dirty_sleep(now);
            let wbt = &mut self.devices[device.index()].wbt;
            if !wbt.may_issue(class, now, recent) {
                wbt.note_refused(class, now);
                return false;
            }
            match self.flusher_build(now, wb_id) {
                Some(req) => {
                    self.issue(now, req, true, false);
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

    /// Moves pages from dirty to under writeback and builds their request.
    pub(crate) fn start_writeback(
        &mut self,
        file: FileId,
        start: PageIndex,
        pages: u64,
        class: WbtClass,
        reason: WbReason,
    ) -> IoRequest {
        let now_clean = self.cache.start_writeback(file, start, pages);
        let f = &mut self.cache.files[file.index()];
        if now_clean {
            if let Some(when) = f.dirtied_when.take() {
                self.wbs[f.wb.index()].dirty_files.remove(&(when, file));
            }
        }
        let span = (start, pages, write_bytes(f.size, start, pages));
        let at = (f.device, file);
        let c = &self.cache;
        self.stats
            .note_peaks(c.nr_dirty, c.nr_writeback, c.nr_cached);
        self.io
            .request(at, IoDir::Write, span, Some((class, reason)), false)
    }

    /// Hands a request to the runtime. `commit`: a write of an fsync that
    /// tagged at most `COMMIT_WRITE_MAX_PAGES` in all, someone's commit
    /// waiting (wbt.rs; sync/ decides).
    /// A write-back that extends its file may be held behind another
    /// (extending.rs): it is issued all the same, and handed over later.
    pub(crate) fn issue(&mut self, now: Instant, mut req: IoRequest, tracked: bool, commit: bool) {
        req.commit = commit;
        req.extends = extends_backing(&req, &self.cache.files[req.file.index()]);
        self.devices[req.device.index()].on_issue(now, &req, tracked, commit);
        if req.dir == IoDir::Write {
            self.cache.files[req.file.index()]
                .inflight_writes
                .insert(req.id);
        }
        let inflight = Inflight {
            req: req.clone(),
            issued_at: now,
            tracked,
            commit,
            snapshot_frames: Vec::new(),
        };
        self.io.inflight.insert(req.id, inflight);
        let device = &self.devices[req.device.index()].config;
        let one_per_file = device.extending_writes == ExtendingWrites::OnePerFile;
        let out = &mut self.actions;
        self.io.growing.submit_or_hold(req, one_per_file, out);
    }

    /// Issues an untracked request (a read, a direct write) if a tag is
    /// free and none waits before it (and, for a read, the device may
    /// take another); else it waits for a tag in arrival order.
    pub(crate) fn issue_or_queue(&mut self, now: Instant, req: IoRequest) {
        let dev = &mut self.devices[req.device.index()];
        let read_room = req.dir != IoDir::Read || dev.reads_inflight < dev.read_depth_max;
        let held = req.dir == IoDir::Read && dev.wbt.holds_reads(now);
        let tag_free = dev.tags_used < dev.config.nr_requests && dev.tag_waiters.is_empty();
        if tag_free && read_room && !held {
            self.issue(now, req, false, false);
        } else {
            if held {
                dev.wbt.slice.note_read_held(now, req.id);
            }
            dev.tag_waiters.push_back(req);
        }
    }

    // The flusher (flusher/): kicks, works, requests.

    pub(crate) fn kick_background(&mut self, now: Instant, wb: WbId) {
        let flusher = &mut self.wbs[wb.index()].flusher;
        if !flusher.background_kicked {
            flusher.background_kicked = true;
            let device = self.wbs[wb.index()].device;
            self.pump(now, device);
        }
    }

    /// Writes back everything dirty on `device`; the free space is asked
    /// for once that is done (`space_progress`).
    pub(crate) fn start_space_flush(&mut self, now: Instant, device: DeviceId) {
        self.devices[device.index()].space.flush_started = Some(now);
        self.devices[device.index()].stats.space_flushes += 1;
        for &wb in &self.devices[device.index()].wbs {
            if self.cache.wb(wb).dirty > 0 {
                self.wbs[wb.index()].flusher.start_all(WbReason::Sync);
            }
        }
        self.pump(now, device);
        self.space_progress(now, device);
    }

    /// Sets the context's start_dontcache bit and wakes its flusher, if it
    /// has dirty pages.
    pub(crate) fn kick_dontcache(&mut self, now: Instant, wb_id: WbId) {
        if self.cache.wb(wb_id).dirty > 0 && self.wbs[wb_id.index()].kick_dontcache() {
            self.pump(now, self.wbs[wb_id.index()].device);
        }
    }

    /// The throttle control for a writeback context, in pages (the
    /// domain's share for it: dirty_limits.rs).
    pub(crate) fn dtc(&self, wb_id: WbId) -> Dtc {
        let wb = &self.wbs[wb_id.index()];
        let (c, pages) = (&self.cache, self.cache.wb(wb_id));
        let device = &self.devices[wb.device.index()].config;
        let sum_min: u32 = self.devices.iter().map(|d| d.config.min_ratio).sum();
        let dirty = (c.nr_dirty + c.nr_writeback, pages.dirty + pages.writeback);
        let ratios = (device.min_ratio, device.max_ratio);
        let sum_min = sum_min.min(100);
        self.dom.dtc(dirty, &wb.completions, ratios, sum_min)
    }

    /// The flusher's periodic wake-up (Linux's wb_workfn on its timer):
    /// contexts with files dirty for longer than dirty_expire_centisecs
    /// write them, and contexts over the background threshold resume
    /// background writeback that no writer kicked.
    pub(crate) fn kick_kupdate(&mut self, now: Instant) {
        let expire_ns = self.config.dirty_expire_centisecs as u64 * 10 * crate::time::NS_PER_MS;
        for w in 0..self.wbs.len() {
            let over_bg = self.cache.wb_pages[w].dirty > 0 && self.over_bg_thresh(WbId(w as u32));
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
        if self.cache.nr_dirty > self.dom.thresh.bg_thresh {
            return true;
        }
        let dtc = self.dtc(wb);
        self.cache.wb(wb).dirty > dtc.wb_bg_thresh
    }

    /// The flusher's DONTCACHE work, if the bit is set and there are
    /// pages to write (dontcache/).
    fn dontcache_work(&mut self, wb_id: WbId) -> Option<Work> {
        if !self.wbs[wb_id.index()].take_dontcache_bit() {
            return None;
        }
        let wb = &self.wbs[wb_id.index()];
        let pages = self.cache.wb(wb_id);
        let counts = (pages.dontcache_dirty, self.cache.nr_dontcache_dirty);
        let device = &self.devices[wb.device.index()];
        let bws = device
            .wbs
            .iter()
            .map(|w| self.wbs[w.index()].bw.avg_write_bw);
        let nr_pages = dontcache_pages_for(self.config.dontcache_counter, wb, counts, bws);
        self.wbs[wb_id.index()].dontcache_work(nr_pages, pages.dontcache_dirty)
    }

    /// Picks the flusher's next work if it has none. Returns false if there is nothing to do.
    pub(crate) fn flusher_pick(&mut self, now: Instant, wb_id: WbId) -> bool {
        if self.wbs[wb_id.index()].flusher.current.is_some() {
            return true;
        }
        // Linux's wb_do_writeback order: queued works and start-all, then
        // the DONTCACHE bit, then kupdate, then background.
        let work = match self.wbs[wb_id.index()].flusher.next_queued() {
            Some(work) => Some(work),
            None => self.dontcache_work(wb_id),
        };
        let work = work.or_else(|| self.kupdate_or_background_work(now, wb_id));
        let Some(work) = work else { return false };
        let wb = &mut self.wbs[wb_id.index()];
        wb.flusher.current = Some(work);
        wb.flusher.chunk_left = 0;
        true
    }

    /// Periodic work if due, else background work if kicked and still
    /// over the background threshold.
    fn kupdate_or_background_work(&mut self, now: Instant, wb_id: WbId) -> Option<Work> {
        let expire_ns = self.config.dirty_expire_centisecs as u64 * 10 * crate::time::NS_PER_MS;
        let over_bg = self.over_bg_thresh(wb_id);
        let wb_dirty = self.cache.wb(wb_id).dirty;
        let flusher = &mut self.wbs[wb_id.index()].flusher;
        flusher.periodic_or_background(wb_dirty, now - expire_ns, over_bg)
    }

    /// Builds the flusher's next write request from its current work.
    pub(crate) fn flusher_build(&mut self, now: Instant, wb_id: WbId) -> Option<IoRequest> {
        let work = self.wbs[wb_id.index()]
            .flusher
            .current
            .clone()
            .expect("picked");
        if work.nr_pages == 0 || (work.for_background && !self.over_bg_thresh(wb_id)) {
            return None;
        }
        // Stay in the current file while its chunk lasts and it has
        // writable pages (Linux's writeback_sb_inodes per-inode chunk).
        let wb = &self.wbs[wb_id.index()];
        let current = wb
            .cursor
            .filter(|c| wb.flusher.chunk_left > 0 && wb.dirty_files.contains(c))
            .filter(|&(_, f)| self.cache.files[f.index()].resizing.is_none())
            .and_then(|(_, f)| Some((f, self.cache.files[f.index()].next_writable_from_index()?)));
        let (file, start) = match current {
            Some(found) => found,
            None => {
                let wb = &mut self.wbs[wb_id.index()];
                let file = wb.next_file(&self.cache.files, work.older_than)?;
                wb.flusher.chunk_left = if work.reason == WbReason::Sync {
                    u64::MAX
                } else {
                    writeback_chunk_size(
                        wb.bw.avg_write_bw,
                        self.dom.thresh.thresh.max(self.dom.dirty_limit),
                        work.nr_pages,
                    )
                };
                (
                    file,
                    self.cache.files[file.index()].next_writable_from_index()?,
                )
            }
        };
        let wb = &self.wbs[wb_id.index()];
        let dev = &self.devices[wb.device.index()];
        let max_pages = dev
            .config
            .max_request_pages()
            .min(
                dev.wbt
                    .write_pages_cap(now, dev.write_bw_peak.max(wb.bw.avg_write_bw)),
            )
            .min(wb.flusher.chunk_left)
            .min(work.nr_pages);
        let pages = self.cache.files[file.index()].writable_len(start, max_pages);
        assert!(pages >= 1, "run starts at a writable page");
        let wb = &mut self.wbs[wb_id.index()];
        wb.flusher.chunk_left = wb.flusher.chunk_left.saturating_sub(pages);
        if let Some(w) = wb.flusher.current.as_mut() {
            w.nr_pages = w.nr_pages.saturating_sub(pages);
        }
        Some(self.start_writeback(file, start, pages, class_of(work.reason), work.reason))
    }

    // Direct writes (direct/): around the cache, straight to dispatch.

    /// Writes `len` bytes at `offset` straight to the device (O_DIRECT).
    pub fn write_direct(
        &mut self,
        now: Instant,
        task: TaskId,
        handle: HandleId,
        offset: u64,
        len: u64,
    ) -> Result<Step, EngineError> {
        self.file_in_use(handle, offset, len)?;
        self.tasks.begin(
            task,
            Op::DirectWrite {
                handle,
                offset,
                end: offset + len,
                phase: DirectPhase::Invalidate,
            },
        )?;
        self.continue_direct(now, task)
    }

    pub(crate) fn continue_direct(
        &mut self,
        now: Instant,
        task: TaskId,
    ) -> Result<Step, EngineError> {
        let Op::DirectWrite {
            handle,
            offset,
            end,
            phase,
        } = self.tasks[task.index()].op.clone()
        else {
            unreachable!("continue_direct on a task that is not writing directly");
        };
        let file = self.handle(handle)?.file;
        let (first, last) = (offset / PAGE_SIZE, end.div_ceil(PAGE_SIZE));
        let (reason, key) = (StallReason::DirectIo, WaitKey::Direct(task));
        match phase {
            DirectPhase::Invalidate if self.extends_over_cut(file, end) => {
                // Its data would land where a queued cut is to free (backlog/).
                Ok(self.wait_for_cut(now, task, file))
            }
            DirectPhase::Invalidate => {
                if let Some(step) = self.invalidate_for_direct(now, task, file, first, last) {
                    return Ok(step);
                }
                let left = self.issue_direct(now, task, file, first, last);
                let phase = DirectPhase::InFlight { left, failed: None };
                self.tasks.set_direct_phase(task, phase);
                Ok(self.tasks.wait_for(now, task, reason, key))
            }
            DirectPhase::InFlight { left, .. } if left > 0 => {
                Ok(self.tasks.wait_for(now, task, reason, key))
            }
            DirectPhase::InFlight { failed, .. } => {
                if let Some(e) = failed {
                    return self.tasks.finish(task, Err(EngineError::WriteBack(e)));
                }
                let f = &mut self.cache.files[file.index()];
                f.size = f.size.max(end);
                self.durability.mark_unsynced(f);
                self.tasks.finish(task, Ok(Step::Done))
            }
        }
    }

    /// Step 1: writes back what is dirty in `first..last` and drops the
    /// clean pages; returns the wait while anything is dirty or in flight.
    fn invalidate_for_direct(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
        first: PageIndex,
        last: PageIndex,
    ) -> Option<Step> {
        let range = (first, last);
        let dirty = self
            .cache
            .invalidate_for_direct(file, range, &mut self.actions)?;
        if dirty {
            let id = self.start_submission(now, file, first, last);
            // Only the submission matters; the wait is for its completions.
            self.submission_done(id);
        }
        let key = WaitKey::FileIo(file);
        Some(self.tasks.wait_for(now, task, StallReason::DirectIo, key))
    }

    /// Step 2: the requests; returns how many.
    fn issue_direct(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
        first: PageIndex,
        last: PageIndex,
    ) -> u32 {
        let device = self.cache.files[file.index()].device;
        let max_pages = self.devices[device.index()].config.max_request_pages();
        let mut count = 0;
        for (page, pages) in crate::direct::requests(first, last, max_pages) {
            let span = (page, pages, pages * PAGE_SIZE);
            let req = self
                .io
                .request((device, file), IoDir::Write, span, None, true);
            self.io.direct_ios.insert(req.id, task);
            self.issue_or_queue(now, req);
            count += 1;
        }
        count
    }
}
