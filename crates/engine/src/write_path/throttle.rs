//! Every wait a writer meets before and while it dirties pages: room on
//! the backing filesystem (space/), the dirty throttle (Linux's
//! balance_dirty_pages, balance_dirty/; or the 2007 global limit,
//! dirty_throttle_2007.rs), and the uncached writers' limit and pace
//! (dontcache/). The policies are pure; this file applies them to the
//! engine's state and turns their answers into waits.

use crate::action::{Stall, StallReason, Step, ThrottleDetail, WbReason};
use crate::balance_dirty::{freerun, throttle, Throttle, ThrottleInput, RATELIMIT_EXCEEDED};
use crate::config::{DirtyThrottle, DontcacheFlush};
use crate::dirty_limits::{dirty_freerun_ceiling, dirty_poll_interval, wb_calc_thresh};
use crate::dirty_throttle_2007::{
    ratelimit_pages_2007, write_chunk_2007, CONGESTION_WAIT_NS, RATELIMIT_EXCEEDED_2007,
};
use crate::dontcache::{dontcache_limit, DONTCACHE_WAIT_MAX_NS};
use crate::engine::Engine;
use crate::error::EngineError;
use crate::flusher::Work;
use crate::ids::{DeviceId, FileId, TaskId, WbId, PAGE_SIZE};
use crate::position_ratio::{wb_position_ratio, Dtc};
use crate::space::Room;
use crate::task::{Op, WaitKey};
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
                if let Op::Write { space_flushed, .. } = &mut self.tasks[task.index()].op {
                    *space_flushed = true;
                }
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
        let limit = self.dontcache_limit(now, wb_id);
        let paced_until = self.wbs[wb_id.index()].dontcache_paced_until;
        let at_limit = self.cache.wb(wb_id).dontcache_unclean >= limit;
        if !at_limit && paced_until <= now {
            return None;
        }
        // The flusher may be idle between kicks: let it write meanwhile.
        self.kick_dontcache(now, wb_id);
        let (until, key) = if at_limit {
            (now + DONTCACHE_WAIT_MAX_NS, Some(WaitKey::WbWritten(wb_id)))
        } else {
            (paced_until.min(now + DONTCACHE_WAIT_MAX_NS), None)
        };
        let stall = Stall {
            reason: StallReason::DirtyThrottle,
            until,
            wakeable: at_limit,
            throttle: None,
        };
        Some(self.tasks.stall(task, now, stall, key))
    }

    /// `wb_id`'s limit of uncached pages dirty or under writeback.
    fn dontcache_limit(&self, now: Instant, wb_id: WbId) -> u64 {
        let wb = &self.wbs[wb_id.index()];
        let latency = self.devices[wb.device.index()]
            .full_write_latency
            .min_ns(now);
        dontcache_limit(wb, latency)
    }

    /// `pages` uncached pages of `wb_id` were just dirtied: the pace
    /// (`Wb::pace_dontcache`). Inline writers are never paced.
    pub(super) fn pace_dontcache(&mut self, now: Instant, wb_id: WbId, pages: u64) {
        if self.config.dontcache_flush == DontcacheFlush::Inline {
            return;
        }
        let wb = &mut self.wbs[wb_id.index()];
        let measured = wb.written_rate.update(now, wb.written);
        let limit = self.dontcache_limit(now, wb_id);
        let unclean = self.cache.wb(wb_id).dontcache_unclean;
        self.wbs[wb_id.index()].pace_dontcache(now, pages, (limit, unclean), measured);
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
            if let Op::Write { flush_op, .. } = &mut self.tasks[task.index()].op {
                *flush_op = Some(id);
            }
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

    /// The throttle control for a writeback context, in pages.
    pub(crate) fn dtc(&self, wb_id: WbId) -> Dtc {
        let wb = &self.wbs[wb_id.index()];
        let pages = self.cache.wb(wb_id);
        let device = &self.devices[wb.device.index()].config;
        let (num, den) = wb.completions.fraction(&self.dom.completions);
        let sum_min: u32 = self
            .devices
            .iter()
            .map(|d| d.config.min_ratio)
            .sum::<u32>()
            .min(100);
        let thresh = self.dom.thresh.thresh;
        let wb_thresh = wb_calc_thresh(
            thresh,
            num,
            den,
            device.min_ratio,
            device.max_ratio,
            sum_min,
        );
        Dtc {
            dirty: self.cache.nr_dirty + self.cache.nr_writeback,
            thresh,
            bg_thresh: self.dom.thresh.bg_thresh,
            limit: self.hard_limit_pages(),
            wb_dirty: pages.dirty + pages.writeback,
            wb_thresh,
            wb_bg_thresh: wb_thresh * self.dom.thresh.bg_thresh / thresh.max(1),
        }
    }

    /// After dirtying a page: does the writer look at the limits now?
    /// How many more pages `task` may newly dirty in `file` before
    /// `maybe_throttle` looks at the limits (at least one).
    pub(crate) fn pages_before_throttle_check(&self, task: TaskId, file: FileId) -> u64 {
        let (dirtied, limit) = self.throttle_check_point(task, file);
        limit.saturating_sub(dirtied).max(1)
    }

    /// The task's pages dirtied since its last look at the limits, and how
    /// many it may dirty before it looks again (Linux's ratelimit, in the
    /// configured throttle's terms).
    fn throttle_check_point(&self, task: TaskId, file: FileId) -> (u64, u64) {
        let t = &self.tasks[task.index()];
        match self.config.dirty_throttle {
            DirtyThrottle::IoLess => {
                let wb = self.cache.files[file.index()].wb;
                let mut ratelimit = t.dirty.nr_dirtied_pause;
                if self.wbs[wb.index()].dirty_exceeded {
                    ratelimit = ratelimit.min(RATELIMIT_EXCEEDED);
                }
                (t.dirty.nr_dirtied, ratelimit)
            }
            DirtyThrottle::Global2007 => {
                let limit = if self.dirty_exceeded_2007 {
                    RATELIMIT_EXCEEDED_2007
                } else {
                    ratelimit_pages_2007(self.cache.memory_pages)
                };
                (t.ratelimit_2007, limit)
            }
        }
    }

    pub(crate) fn maybe_throttle(
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
                self.tasks[task.index()].ratelimit_2007 = 0;
                self.throttle_2007(now, task, file)
            }
        }
    }

    fn set_throttle_again(&mut self, task: TaskId, again: bool) {
        if let Op::Write { throttle_again, .. } = &mut self.tasks[task.index()].op {
            *throttle_again = again;
        }
    }

    /// Linux's balance_dirty_pages, one pass. Returns a pause, if any.
    pub(crate) fn balance_dirty_pages(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
    ) -> Option<Step> {
        let wb_id = self.cache.files[file.index()].wb;
        let device = self.wbs[wb_id.index()].device;
        let strict = self.devices[device.index()].config.strict_limit;
        // Start background writeback as soon as there is more dirty than
        // the background threshold, well before anyone is throttled.
        if self.cache.nr_dirty > self.dom.thresh.bg_thresh {
            self.kick_background(now, wb_id);
        }
        let dtc = self.dtc(wb_id);
        let (dirty, ceiling, thresh) = if strict {
            (
                dtc.wb_dirty,
                dirty_freerun_ceiling(dtc.wb_thresh, dtc.wb_bg_thresh),
                dtc.wb_thresh,
            )
        } else {
            (dtc.dirty, dtc.freerun(), dtc.thresh)
        };
        if dirty <= ceiling {
            freerun(
                &mut self.tasks[task.index()].dirty,
                now,
                dirty_poll_interval(dirty, thresh),
            );
            self.set_throttle_again(task, false);
            return None;
        }
        self.kick_background(now, wb_id);
        let wb = &mut self.wbs[wb_id.index()];
        let pos_ratio = wb_position_ratio(&dtc, wb.bw.avg_write_bw, strict);
        wb.dirty_exceeded = dtc.wb_dirty > dtc.wb_thresh && (dtc.dirty > dtc.thresh || strict);
        let input = ThrottleInput {
            dirty_ratelimit: wb.rl.dirty_ratelimit,
            pos_ratio,
            avg_write_bw: wb.bw.avg_write_bw,
            wb_dirty: dtc.wb_dirty,
        };
        let dirty_ratelimit = input.dirty_ratelimit;
        match throttle(&mut self.tasks[task.index()].dirty, now, input) {
            Throttle::Proceed => {
                self.set_throttle_again(task, false);
                None
            }
            Throttle::Pause { pause_ns, again } => {
                self.set_throttle_again(task, again);
                self.devices[device.index()].last_bdp_sleep = Some(now);
                let stall = Stall {
                    reason: StallReason::DirtyThrottle,
                    until: now + pause_ns,
                    wakeable: false,
                    throttle: Some(ThrottleDetail {
                        pause_ns,
                        pos_ratio_permille: (pos_ratio * 1000.0) as u64,
                        task_ratelimit_pages_s: (dirty_ratelimit as f64 * pos_ratio) as u64,
                        dirty_pages: dtc.dirty,
                        thresh_pages: dtc.thresh,
                        limit_pages: dtc.limit,
                        wb_dirty_pages: dtc.wb_dirty,
                        wb_thresh_pages: dtc.wb_thresh,
                    }),
                };
                Some(self.tasks.stall(task, now, stall, None))
            }
        }
    }

    /// The 2007 global limit: over it, a writer waits until its own device
    /// has written a chunk or the global count is back under the limit,
    /// looking again every 100 ms. A writer to an idle device with few
    /// dirty pages of its own can only wait for the global count: the
    /// pathology Sekiyama fixed.
    pub(crate) fn throttle_2007(
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
        let written = self.wbs[wb_id.index()].written;
        let Op::Write { wait_2007, .. } = &mut self.tasks[task.index()].op else {
            unreachable!("2007 throttle outside a write");
        };
        let baseline = *wait_2007.get_or_insert(written);
        if !over || written - baseline >= write_chunk_2007(self.cache.memory_pages) {
            *wait_2007 = None;
            self.dirty_exceeded_2007 = over;
            return None;
        }
        self.dirty_exceeded_2007 = true;
        let dirty = self.cache.wb(wb_id).dirty;
        let wb = &mut self.wbs[wb_id.index()];
        if dirty > 0 && wb.flusher.current.is_none() && !wb.flusher.has_queued() {
            wb.flusher.queue(Work {
                reason: WbReason::BalanceDirty,
                nr_pages: write_chunk_2007(self.cache.memory_pages),
                for_background: false,
                older_than: None,
            });
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
        Some(
            self.tasks
                .stall(task, now, stall, Some(WaitKey::WbWritten(wb_id))),
        )
    }
}
