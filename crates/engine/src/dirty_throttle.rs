//! Glue between the write path and the throttling policies: when a writer
//! looks at the limits, what it sees (the dirty_throttle_control), and the
//! 2007-style global limit kept for comparison.

use crate::action::{Stall, StallReason, Step};
use crate::balance_dirty::{freerun, throttle, Throttle, ThrottleInput};
use crate::config::DirtyThrottle;
use crate::dirty_limits::{dirty_freerun_ceiling, dirty_poll_interval, wb_calc_thresh};
use crate::engine::{Engine, Op, WaitKey};
use crate::flusher::{WbReason, Work};
use crate::ids::{FileId, TaskId, WbId};
use crate::position_ratio::{wb_position_ratio, Dtc};
use crate::time::{Instant, NS_PER_MS};

/// After this many pages dirtied by anyone, a 2007-style writer checks the
/// limit (Linux 2.6.22's ratelimit_pages on a large machine)...
pub const RATELIMIT_PAGES_2007: u64 = 1024;
/// ...or after this many once the limit was exceeded.
pub const RATELIMIT_EXCEEDED_2007: u64 = 8;
/// A 2007-style throttled writer is released once its own device wrote
/// this many pages (1.5 × ratelimit_pages: "we've done our duty").
pub const WRITE_CHUNK_2007: u64 = RATELIMIT_PAGES_2007 * 3 / 2;
/// ...and otherwise looks again after congestion_wait(HZ/10).
pub const CONGESTION_WAIT_NS: u64 = 100 * NS_PER_MS;
/// When the writeback context exceeds its share, check every 8 pages
/// (Linux: 32 >> (PAGE_SHIFT - 10)).
pub const RATELIMIT_EXCEEDED: u64 = 8;

impl Engine {
    /// The throttle control for a writeback context, in pages.
    pub(crate) fn dtc(&self, wb_id: WbId) -> Dtc {
        let wb = &self.wbs[wb_id.index()];
        let device = &self.devices[wb.device.index()].config;
        let (num, den) = wb.completions.fraction(&self.completions);
        let sum_min: u32 = self
            .devices
            .iter()
            .map(|d| d.config.min_ratio)
            .sum::<u32>()
            .min(100);
        let thresh = self.thresh.thresh;
        let wb_thresh = wb_calc_thresh(
            thresh,
            num,
            den,
            device.min_ratio,
            device.max_ratio,
            sum_min,
        );
        Dtc {
            dirty: self.nr_dirty + self.nr_writeback,
            thresh,
            bg_thresh: self.thresh.bg_thresh,
            limit: self.hard_limit_pages(),
            wb_dirty: wb.dirty + wb.writeback,
            wb_thresh,
            wb_bg_thresh: wb_thresh * self.thresh.bg_thresh / thresh.max(1),
        }
    }

    /// After dirtying a page: does the writer look at the limits now?
    /// How many more pages `task` may newly dirty in `file` before
    /// `maybe_throttle` looks at the limits (at least one).
    pub(crate) fn pages_before_throttle_check(&self, task: TaskId, file: FileId) -> u64 {
        let t = &self.tasks[task.index()];
        let left = match self.config.dirty_throttle {
            DirtyThrottle::IoLess => {
                let wb = self.files[file.index()].wb;
                let mut ratelimit = t.dirty.nr_dirtied_pause;
                if self.wbs[wb.index()].dirty_exceeded {
                    ratelimit = ratelimit.min(RATELIMIT_EXCEEDED);
                }
                ratelimit.saturating_sub(t.dirty.nr_dirtied)
            }
            DirtyThrottle::Global2007 => {
                let limit = if self.dirty_exceeded_2007 {
                    RATELIMIT_EXCEEDED_2007
                } else {
                    RATELIMIT_PAGES_2007
                };
                limit.saturating_sub(t.ratelimit_2007)
            }
        };
        left.max(1)
    }

    pub(crate) fn maybe_throttle(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
    ) -> Option<Step> {
        match self.config.dirty_throttle {
            DirtyThrottle::IoLess => {
                let wb = self.files[file.index()].wb;
                let t = &self.tasks[task.index()].dirty;
                let mut ratelimit = t.nr_dirtied_pause;
                if self.wbs[wb.index()].dirty_exceeded {
                    ratelimit = ratelimit.min(RATELIMIT_EXCEEDED);
                }
                if t.nr_dirtied < ratelimit {
                    return None;
                }
                self.balance_dirty_pages(now, task, file)
            }
            DirtyThrottle::Global2007 => {
                let limit = if self.dirty_exceeded_2007 {
                    RATELIMIT_EXCEEDED_2007
                } else {
                    RATELIMIT_PAGES_2007
                };
                let t = &mut self.tasks[task.index()];
                if t.ratelimit_2007 < limit {
                    return None;
                }
                t.ratelimit_2007 = 0;
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
        let wb_id = self.files[file.index()].wb;
        let device = self.wbs[wb_id.index()].device;
        let strict = self.devices[device.index()].config.strict_limit;
        // Start background writeback as soon as there is more dirty than
        // the background threshold, well before anyone is throttled.
        if self.nr_dirty > self.thresh.bg_thresh {
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
                };
                Some(self.stall(task, now, stall, None))
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
        let wb_id = self.files[file.index()].wb;
        let over = self.nr_dirty + self.nr_writeback > self.thresh.thresh;
        if self.nr_dirty > self.thresh.bg_thresh {
            self.kick_background(now, wb_id);
        }
        let written = self.wbs[wb_id.index()].written;
        let Op::Write { wait_2007, .. } = &mut self.tasks[task.index()].op else {
            unreachable!("2007 throttle outside a write");
        };
        let baseline = *wait_2007.get_or_insert(written);
        if !over || written - baseline >= WRITE_CHUNK_2007 {
            *wait_2007 = None;
            self.dirty_exceeded_2007 = over;
            return None;
        }
        self.dirty_exceeded_2007 = true;
        let wb = &mut self.wbs[wb_id.index()];
        if wb.dirty > 0 && wb.flusher.current.is_none() && !wb.flusher.has_queued() {
            wb.flusher.queue(Work {
                reason: WbReason::BalanceDirty,
                nr_pages: WRITE_CHUNK_2007,
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
        };
        Some(self.stall(task, now, stall, Some(WaitKey::WbWritten(wb_id))))
    }
}
