//! Every wait a writer meets before and while it dirties pages: room on
//! the backing filesystem (space/), the dirty throttle (Linux's
//! balance_dirty_pages, balance_dirty/; or the 2007 global limit,
//! dirty_throttle_2007.rs), and the uncached writers' limit and pace
//! (dontcache/). The policies are pure; this file applies them to the
//! engine's state and turns their answers into waits.

use crate::action::{Stall, StallReason, Step, WbReason};
use crate::balance_dirty::{balance_dirty_pages, throttle_check_point, Balance};
use crate::config::{DirtyThrottle, DontcacheFlush};
use crate::dirty_limits::Dtc;
use crate::dirty_throttle_2007::{waits_2007, work_2007, CONGESTION_WAIT_NS};
use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::{DeviceId, FileId, TaskId, WbId, PAGE_SIZE};
use crate::space::Room;
use crate::task::{Op, WaitKey, WriteOp};
use crate::time::Instant;

impl Engine {
    /// Room on the backing filesystem for what the write adds, checked
    /// before any of it is in the cache (space/): Some(what to return)
    /// when the write waits or fails here. Too little room the first time
    /// writes back everything dirty on the device and waits for the free
    /// space reported after it (stall `sync`, bounded by that write-back,
    /// at most `SPACE_FLUSH_MAX_NS`).
    pub(super) fn write_space(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
        range: (u64, u64),
        space_flushed: bool,
    ) -> Option<Result<Step, EngineError>> {
        let device = self.cache.files[file.index()].device;
        let room = self.devices[device.index()].space.room_for(
            &self.cache.files[file.index()],
            range,
            space_flushed,
        );
        match room {
            Room::Enough => return None,
            Room::WaitForReport => {}
            Room::NoSpace {
                needed_pages,
                room_pages,
            } => {
                self.devices[device.index()].stats.enospc_writes += 1;
                let e = EngineError::NoSpace {
                    needed_bytes: needed_pages * PAGE_SIZE,
                    room_bytes: room_pages * PAGE_SIZE,
                };
                return Some(self.tasks.finish(task, Err(e)));
            }
            Room::FlushFirst => {
                self.write_op(task).space_flushed = true;
                self.start_space_flush(now, device);
            }
        }
        let key = WaitKey::Space(device);
        Some(Ok(self.tasks.wait_for(now, task, StallReason::Sync, key)))
    }

    /// Writes back everything dirty on `device`; the free space is asked
    /// for once that is done (`space_progress`).
    fn start_space_flush(&mut self, now: Instant, device: DeviceId) {
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

    /// A DONTCACHE writer whose context holds its limit of uncached pages
    /// dirty or under writeback waits for the next write completion
    /// (woken, or after DONTCACHE_WAIT_MAX_NS); below that, one ahead of
    /// its context's pace sleeps until the pace catches up (dontcache/).
    pub(super) fn dontcache_throttle(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
    ) -> Option<Step> {
        // Inline is Linux 6.14 as it was: the writer's own submission is
        // its only brake.
        if self.config.dontcache_flush == DontcacheFlush::Inline {
            return None;
        }
        let wb_id = self.cache.files[file.index()].wb;
        let wb = &self.wbs[wb_id.index()];
        let latency = self.devices[wb.device.index()]
            .full_write_latency
            .min_ns(now);
        let limit = crate::dontcache::dontcache_limit(wb, latency);
        let unclean = self.cache.wb(wb_id).dontcache_unclean;
        let (until, at_limit) = wb.dontcache_wait(now, (limit, unclean))?;
        // The flusher may be idle between kicks: let it write meanwhile.
        self.kick_dontcache(now, wb_id);
        let stall = Stall {
            reason: StallReason::DirtyThrottle,
            until,
            wakeable: at_limit,
            throttle: None,
        };
        let key = at_limit.then_some(WaitKey::WbWritten(wb_id));
        Some(self.tasks.stall(task, now, stall, key))
    }

    /// `pages` uncached pages of `wb_id` were just dirtied: the pace
    /// (`Wb::dontcache_dirtied`). Inline writers are never paced.
    pub(super) fn pace_dontcache(&mut self, now: Instant, wb_id: WbId, pages: u64) {
        if self.config.dontcache_flush == DontcacheFlush::Inline {
            return;
        }
        let device = self.wbs[wb_id.index()].device;
        let latency = self.devices[device.index()].full_write_latency.min_ns(now);
        let unclean = self.cache.wb(wb_id).dontcache_unclean;
        self.wbs[wb_id.index()].dontcache_dirtied(now, pages, latency, unclean);
    }
    /// An uncached write has copied its bytes `start..end` of `file`: kick
    /// the flusher, or (inline) submit the range and wait for that.
    /// Returns the wait, or None when the write may return.
    pub(super) fn dontcache_written(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
        (start, end): (u64, u64),
        flush_op: Option<u64>,
    ) -> Option<Step> {
        if self.config.dontcache_flush == DontcacheFlush::Kick {
            self.kick_dontcache(now, self.cache.files[file.index()].wb);
            return None;
        }
        let id = flush_op.unwrap_or_else(|| {
            let (first, last) = (start / PAGE_SIZE, end.div_ceil(PAGE_SIZE));
            let id = self.start_submission(now, file, first, last);
            self.write_op(task).flush_op = Some(id);
            id
        });
        if self.submission_done(id) {
            return None;
        }
        let key = WaitKey::Sync(id);
        Some(
            self.tasks
                .wait_for(now, task, StallReason::DontcacheFlush, key),
        )
    }

    /// Sets the context's start_dontcache bit and wakes its flusher, if it
    /// has dirty pages.
    fn kick_dontcache(&mut self, now: Instant, wb_id: WbId) {
        if self.cache.wb(wb_id).dirty > 0 && self.wbs[wb_id.index()].kick_dontcache() {
            self.pump(now, self.wbs[wb_id.index()].device);
        }
    }

    /// The throttle control for a writeback context, in pages (the
    /// domain's share for it: dirty_limits.rs).
    pub(crate) fn dtc(&self, wb_id: WbId) -> Dtc {
        let wb = &self.wbs[wb_id.index()];
        let pages = self.cache.wb(wb_id);
        let device = &self.devices[wb.device.index()].config;
        let sum_min: u32 = self.devices.iter().map(|d| d.config.min_ratio).sum();
        let dirty = (
            self.cache.nr_dirty + self.cache.nr_writeback,
            pages.dirty + pages.writeback,
        );
        let ratios = (device.min_ratio, device.max_ratio);
        self.dom
            .dtc(dirty, &wb.completions, ratios, sum_min.min(100))
    }

    /// How many more pages `task` may newly dirty in `file` before
    /// `maybe_throttle` looks at the limits (at least one).
    pub(super) fn pages_before_throttle_check(&self, task: TaskId, file: FileId) -> u64 {
        let (dirtied, limit) = self.throttle_check_point(task, file);
        limit.saturating_sub(dirtied).max(1)
    }

    /// `task`'s pages dirtied since its last look at the limits, and how
    /// many it may dirty before it looks again (balance_dirty/).
    fn throttle_check_point(&self, task: TaskId, file: FileId) -> (u64, u64) {
        let wb = self.cache.files[file.index()].wb;
        let exceeded = (
            self.wbs[wb.index()].dirty_exceeded,
            self.dirty_exceeded_2007,
        );
        let t = &self.tasks[task.index()].dirty;
        throttle_check_point(
            self.config.dirty_throttle,
            t,
            exceeded,
            self.cache.memory_pages,
        )
    }

    /// After dirtying a stretch: past its check point, the writer looks
    /// at the limits of the configured throttle.
    pub(super) fn maybe_throttle(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
    ) -> Option<Step> {
        let (dirtied, limit) = self.throttle_check_point(task, file);
        if dirtied < limit {
            return None;
        }
        match self.config.dirty_throttle {
            DirtyThrottle::IoLess => self.balance_dirty_pages(now, task, file),
            DirtyThrottle::Global2007 => {
                self.tasks[task.index()].dirty.ratelimit_2007 = 0;
                self.throttle_2007(now, task, file)
            }
        }
    }

    /// The progress of `task`'s write.
    pub(super) fn write_op(&mut self, task: TaskId) -> &mut WriteOp {
        match &mut self.tasks[task.index()].op {
            Op::Write(op) => op,
            _ => unreachable!("a write path step on a task that is not writing"),
        }
    }

    /// Linux's balance_dirty_pages, one pass (balance_dirty/): kicks
    /// background writeback and returns a pause, if any.
    pub(super) fn balance_dirty_pages(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
    ) -> Option<Step> {
        let wb_id = self.cache.files[file.index()].wb;
        let device = self.wbs[wb_id.index()].device;
        // Start background writeback as soon as there is more dirty than
        // the background threshold, well before anyone is throttled.
        if self.cache.nr_dirty > self.dom.thresh.bg_thresh {
            self.kick_background(now, wb_id);
        }
        let dtc = self.dtc(wb_id);
        let strict = self.devices[device.index()].config.strict_limit;
        let wb = &self.wbs[wb_id.index()];
        let rates = (wb.bw.avg_write_bw, wb.rl.dirty_ratelimit);
        let t = &mut self.tasks[task.index()].dirty;
        let (dirty_exceeded, pause) = match balance_dirty_pages(t, now, &dtc, strict, rates) {
            Balance::Freerun => (None, None),
            Balance::Proceed { dirty_exceeded } => (Some(dirty_exceeded), None),
            Balance::Pause {
                dirty_exceeded,
                again,
                detail,
            } => (Some(dirty_exceeded), Some((again, detail))),
        };
        if let Some(exceeded) = dirty_exceeded {
            self.kick_background(now, wb_id);
            self.wbs[wb_id.index()].dirty_exceeded = exceeded;
        }
        let Some((again, detail)) = pause else {
            self.write_op(task).throttle_again = false;
            return None;
        };
        self.write_op(task).throttle_again = again;
        self.devices[device.index()].last_bdp_sleep = Some(now);
        let stall = Stall {
            reason: StallReason::DirtyThrottle,
            until: now + detail.pause_ns,
            wakeable: false,
            throttle: Some(detail),
        };
        Some(self.tasks.stall(task, now, stall, None))
    }

    /// The 2007 global limit (dirty_throttle_2007.rs): over it, a writer
    /// waits until its own device has written a chunk or the global count
    /// is back under the limit, looking again every 100 ms. A writer to an
    /// idle device with few dirty pages of its own can only wait for the
    /// global count: the pathology Sekiyama fixed.
    pub(super) fn throttle_2007(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
    ) -> Option<Step> {
        let wb_id = self.cache.files[file.index()].wb;
        let over = self.cache.nr_dirty + self.cache.nr_writeback > self.dom.thresh.thresh;
        if self.cache.nr_dirty > self.dom.thresh.bg_thresh {
            self.kick_background(now, wb_id);
        }
        let (written, memory_pages) = (self.wbs[wb_id.index()].written, self.cache.memory_pages);
        if !waits_2007(
            over,
            written,
            &mut self.write_op(task).wait_2007,
            memory_pages,
        ) {
            self.dirty_exceeded_2007 = over;
            return None;
        }
        self.dirty_exceeded_2007 = true;
        let wb = &mut self.wbs[wb_id.index()];
        if self.cache.wb(wb_id).dirty > 0 {
            wb.flusher.queue_if_idle(work_2007(memory_pages));
        }
        let device = wb.device;
        self.devices[device.index()].last_bdp_sleep = Some(now);
        self.pump(now, device);
        let stall = Stall {
            reason: StallReason::DirtyThrottle,
            until: now + CONGESTION_WAIT_NS,
            wakeable: true,
            throttle: None,
        };
        let key = Some(WaitKey::WbWritten(wb_id));
        Some(self.tasks.stall(task, now, stall, key))
    }
}
