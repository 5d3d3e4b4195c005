//! The 2007 global dirty limit (Linux before 2.6.24), kept to show the
//! pathology Sekiyama reported (`dirty_throttle = "global-2007"`).
//!
//! - One global threshold; every `ratelimit_pages_2007` pages dirtied
//!   (memory / 32, within [16, 1024]) a writer looks at it.
//! - Over it, the writer queues writeback of its own device and waits
//!   until that device has written 1.5 × that many pages or the global
//!   count is under the threshold, looking again every congestion_wait.
//! - A writer to an idle fast device therefore waits for a slow device
//!   that holds most of the dirty memory: the bug the per-device limits of
//!   balance_dirty/ fixed.

use crate::action::WbReason;
use crate::action::{Stall, StallReason, Step};
use crate::engine::Engine;
use crate::flusher::Work;
use crate::ids::{FileId, TaskId};
use crate::task::{Op, WaitKey};
use crate::time::{Instant, NS_PER_MS};

/// At most this many pages dirtied between a 2007-style writer's looks at
/// the limit (Linux 2.6.22's ratelimit_pages cap: 4 MiB)...
pub const RATELIMIT_PAGES_2007: u64 = 1024;
/// ...and at least this many.
pub const RATELIMIT_PAGES_MIN_2007: u64 = 16;
/// ...or after this many once the limit was exceeded.
pub const RATELIMIT_EXCEEDED_2007: u64 = 8;

/// Linux 2.6.22's writeback_set_ratelimit for one CPU: memory / 32 pages
/// between looks at the limit, within [16, 1024], so a small cache does
/// not run past its threshold by a fixed 4 MiB.
pub fn ratelimit_pages_2007(memory_pages: u64) -> u64 {
    (memory_pages / 32).clamp(RATELIMIT_PAGES_MIN_2007, RATELIMIT_PAGES_2007)
}

/// A 2007-style throttled writer is released once its own device wrote
/// this many pages (1.5 × ratelimit_pages: "we've done our duty").
pub fn write_chunk_2007(memory_pages: u64) -> u64 {
    ratelimit_pages_2007(memory_pages) * 3 / 2
}
/// ...and otherwise looks again after congestion_wait(HZ/10).
pub const CONGESTION_WAIT_NS: u64 = 100 * NS_PER_MS;
impl Engine {
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
