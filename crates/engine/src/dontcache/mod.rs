//! Uncached writes (Linux's RWF_DONTCACHE, 6.14, and Layton's 2026 flusher
//! kick).
//!
//! - A DONTCACHE write dirties pages like any write, but the pages it
//!   brings into the cache carry PG_DROPBEHIND: once written back and
//!   clean they leave the cache at once (`drop_behind`, from the write's
//!   completion). An ordinary read or write of such a page takes the mark
//!   off, as Linux does.
//! - Each writeback context counts its dirty marked pages
//!   (`nr_dontcache_dirty`, Linux's per-wb WB_DONTCACHE_DIRTY), kept equal
//!   to the sum of its files' counters at every change (`Engine::account_pages`).
//! - `dontcache_flush = kick` (Layton 2026): when a DONTCACHE write
//!   returns it sets its context's start_dontcache bit (kicks while it is
//!   set coalesce, no allocation) and wakes the flusher. The flusher
//!   clears the bit before it reads the count, so a kick during the work
//!   is not lost, and writes that many pages from the oldest dirty files —
//!   not only marked ones, to keep requests large.
//! - `dontcache_flush = inline` (Linux 6.14–6.19): the writer submits
//!   writeback of the range it wrote before it returns, and waits for the
//!   submission (tags, wbt): stall `dontcache_flush`.
//! - `dontcache_counter = global-split` (the patch before Kara's review):
//!   the count is cache-wide and split among a device's contexts by write
//!   bandwidth, so a domain writing uncached beside a buffered one is asked
//!   for about half its pages.
//!
//! - Ours: a DONTCACHE writer keeps its context's uncached pages dirty or
//!   under writeback (`nr_dontcache_unclean`) within what the device
//!   writes in `DONTCACHE_DIRTY_WINDOW_NS`, or in `DONTCACHE_LATENCIES`
//!   times its full-write latency on a device slow per request but deep
//!   (the limit; write_latency.rs). An uncached page's
//!   only use is to carry data to the device, so there is no point in
//!   letting it wait in memory up to the dirty limit, as a buffered page
//!   may (to be overwritten or read again).
//!   - Below half the limit (the setpoint) the writers run free.
//!   - Above it they are paced (`pace_dontcache`): each page dirtied
//!     moves the context's `dontcache_paced_until` on by its time at the
//!     context's write rate (recent completions) times `pos`, which
//!     falls from 4 at the setpoint to 1/4 near the limit; a writer that
//!     finds that time ahead sleeps until it. So writers take evenly what
//!     the device gives, and the room between the setpoint and the limit
//!     absorbs a device that stops completing for a while (a slow
//!     request, a flush), instead of every writer waiting for the next
//!     completion at once.
//!   - At the limit the writer waits for the next write completion
//!     (`dontcache_throttle`).
//!
//! Differs from Linux: we drop marked pages whose writeback ends even when
//! a runtime noted a read of their frames only by clearing the mark (the
//! page stays, as an accessed page would).

pub(crate) mod stats;
pub(crate) mod written_rate;

use crate::action::WbReason;
use crate::action::{Stall, StallReason, Step};
use crate::config::{DontcacheCounter, DontcacheFlush};
use crate::engine::Engine;
use crate::flusher::Work;
use crate::ids::{FileId, PageIndex, TaskId, WbId, PAGE_SIZE};
use crate::page_cache::PG_DROPBEHIND;
use crate::task::{Op, WaitKey};
use crate::time::{Instant, NS_PER_MS, NS_PER_SEC};

/// How long the device takes to write a DONTCACHE writer's uncached
/// dirty pages at most (at its measured write bandwidth): enough to keep
/// the device busy between kicks, far below the dirty limits.
pub const DONTCACHE_DIRTY_WINDOW_NS: u64 = 50 * NS_PER_MS;
/// ...but never fewer than this many pages (4 MiB: one writeback chunk).
pub const DONTCACHE_DIRTY_MIN_PAGES: u64 = 1024;
/// ...nor less than the device writes in this many of its full-write
/// latencies (write_latency.rs): a deep device slow per request needs
/// rate x latency pages in flight to run at its rate (Little's law), and
/// the pace holds the unclean pages near 7/8 of the limit, some of them
/// still dirty. The rate is what completed, so it rises only when more
/// than rate x latency is in flight: on a 16-slot device taking 41 ms per
/// 1 MiB request (the engine's tests), a writer with the window alone ran
/// at 0.92x the device's rate, with twice the latency 0.98x.
pub const DONTCACHE_LATENCIES: u64 = 2;
/// An uncached writer's pace at the setpoint, in multiples of its
/// context's write rate: above 1 so the pace probes for more (the rate is
/// what completed, not what the device could take), which puts the
/// balance where pos = 1, at 7/8 of the limit.
pub const DONTCACHE_POS_AT_SETPOINT: u64 = 4;
/// A throttled DONTCACHE writer looks again after this long at the latest.
pub const DONTCACHE_WAIT_MAX_NS: u64 = 100 * NS_PER_MS;

impl Engine {
    /// A DONTCACHE writer whose context holds more uncached pages dirty or
    /// under writeback than its device writes in DONTCACHE_DIRTY_WINDOW_NS
    /// waits for the next write completion (woken, or after
    /// DONTCACHE_WAIT_MAX_NS); below that, one ahead of its context's pace
    /// sleeps until the pace catches up.
    pub(crate) fn dontcache_throttle(
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
        let wb = &self.wbs[wb_id.index()];
        if self.cache.wb(wb_id).dontcache_unclean < limit {
            let paced_until = wb.dontcache_paced_until;
            if paced_until <= now {
                return None;
            }
            // The flusher may be idle between kicks: let it write meanwhile.
            self.kick_dontcache(now, wb_id);
            let stall = Stall {
                reason: StallReason::DirtyThrottle,
                until: paced_until.min(now + DONTCACHE_WAIT_MAX_NS),
                wakeable: false,
                throttle: None,
            };
            return Some(self.tasks.stall(task, now, stall, None));
        }
        // The flusher may be idle between kicks: make sure it writes them.
        self.kick_dontcache(now, wb_id);
        let stall = Stall {
            reason: StallReason::DirtyThrottle,
            until: now + DONTCACHE_WAIT_MAX_NS,
            wakeable: true,
            throttle: None,
        };
        Some(
            self.tasks
                .stall(task, now, stall, Some(WaitKey::WbWritten(wb_id))),
        )
    }

    /// `pages` uncached pages of `wb_id` were just dirtied: above the
    /// setpoint (half the limit) they move the context's pace on by their
    /// time at `pos` times the context's write rate; pos falls from
    /// DONTCACHE_POS_AT_SETPOINT at the setpoint (so a device that can
    /// take more soon shows it) to 1/4 near the limit. Below
    /// the setpoint, and before a first rate was measured, the writers run
    /// free (no debt kept).
    pub(crate) fn pace_dontcache(&mut self, now: Instant, wb_id: WbId, pages: u64) {
        // Inline writers are never paced (dontcache_throttle).
        if self.config.dontcache_flush == DontcacheFlush::Inline {
            return;
        }
        let measured = {
            let wb = &mut self.wbs[wb_id.index()];
            wb.written_rate.update(now, wb.written)
        };
        let limit = self.dontcache_limit(now, wb_id);
        let unclean = self.cache.wb(wb_id).dontcache_unclean;
        let wb = &mut self.wbs[wb_id.index()];
        let setpoint = limit / 2;
        if !measured || unclean < setpoint {
            wb.dontcache_paced_until = now;
            return;
        }
        // pos = POS_AT_SETPOINT * room / span, room at least span / 16.
        let span = limit - setpoint;
        let room = limit.saturating_sub(unclean).max(span / 16).max(1);
        let rate_pages_s = Self::write_rate(wb) as u128;
        let ns = pages as u128 * NS_PER_SEC as u128 * span as u128
            / (DONTCACHE_POS_AT_SETPOINT as u128 * rate_pages_s * room as u128);
        let from = wb.dontcache_paced_until.max(now);
        let ns = (ns.min(DONTCACHE_WAIT_MAX_NS as u128) as u64)
            .min((now + DONTCACHE_WAIT_MAX_NS).since_ns(from));
        wb.dontcache_paced_until = from + ns;
    }

    /// The uncached pages a context may hold dirty or under writeback: its
    /// device's writes in DONTCACHE_DIRTY_WINDOW_NS or in
    /// DONTCACHE_LATENCIES full-write latencies, whichever is more, at
    /// least DONTCACHE_DIRTY_MIN_PAGES.
    fn dontcache_limit(&self, now: Instant, wb_id: WbId) -> u64 {
        let wb = &self.wbs[wb_id.index()];
        let rate_pages_s = Self::write_rate(wb) as u128;
        // A device slow per request but deep needs rate x latency in
        // flight to reach its rate, and the rate grows only when more is in
        // flight than that (it is what completed): twice, so it does.
        let latency_ns = self.devices[wb.device.index()]
            .full_write_latency
            .min_ns(now)
            .unwrap_or(0)
            .saturating_mul(DONTCACHE_LATENCIES);
        let window_ns = DONTCACHE_DIRTY_WINDOW_NS.max(latency_ns) as u128;
        let pages = rate_pages_s * window_ns / NS_PER_SEC as u128;
        (pages.min(u64::MAX as u128) as u64).max(DONTCACHE_DIRTY_MIN_PAGES)
    }

    /// A context's write rate in pages per second: the larger of its
    /// recent completions and its bandwidth estimate (which, averaged
    /// over seconds, trails a fast device for seconds after a start).
    fn write_rate(wb: &crate::wb::Wb) -> u64 {
        wb.written_rate.pages_s.max(wb.bw.avg_write_bw).max(1)
    }

    /// An uncached write has copied its bytes `start..end` of `file`: kick
    /// the flusher, or (inline) submit the range and wait for that.
    /// Returns the wait, or None when the write may return.
    pub(crate) fn dontcache_written(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
        start: u64,
        end: u64,
        flush_op: Option<u64>,
    ) -> Option<Step> {
        match self.config.dontcache_flush {
            DontcacheFlush::Kick => {
                self.kick_dontcache(now, self.cache.files[file.index()].wb);
                None
            }
            DontcacheFlush::Inline => {
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
                Some(
                    self.tasks
                        .wait_for(now, task, StallReason::DontcacheFlush, WaitKey::Sync(id)),
                )
            }
        }
    }

    /// Sets the context's start_dontcache bit and wakes its flusher
    /// (Linux's filemap_dontcache_kick_writeback), if it has dirty pages.
    fn kick_dontcache(&mut self, now: Instant, wb_id: WbId) {
        if self.cache.wb(wb_id).dirty == 0 {
            return;
        }
        let wb = &mut self.wbs[wb_id.index()];
        if wb.flusher.start_dontcache {
            wb.dontcache.kicks_coalesced += 1;
            return;
        }
        wb.flusher.start_dontcache = true;
        wb.dontcache.kicks += 1;
        let device = wb.device;
        self.pump(now, device);
    }

    /// The flusher's DONTCACHE work, if the bit is set and there are
    /// pages to write (Linux's wb_check_start_dontcache). Clears the bit
    /// first, so a kick made while the work runs starts another.
    pub(crate) fn dontcache_work(&mut self, wb_id: WbId) -> Option<Work> {
        let wb = &mut self.wbs[wb_id.index()];
        if !std::mem::take(&mut wb.flusher.start_dontcache) {
            return None;
        }
        let nr_pages = self.dontcache_pages_for(wb_id);
        if nr_pages == 0 {
            return None;
        }
        let dontcache_dirty = self.cache.wb(wb_id).dontcache_dirty;
        let wb = &mut self.wbs[wb_id.index()];
        wb.dontcache.works += 1;
        wb.dontcache.work_pages += nr_pages;
        wb.dontcache.dirty_at_work += dontcache_dirty;
        Some(Work {
            reason: WbReason::Dontcache,
            nr_pages,
            for_background: false,
            older_than: None,
        })
    }

    /// How many pages a DONTCACHE work of `wb_id` writes.
    fn dontcache_pages_for(&self, wb_id: WbId) -> u64 {
        let wb = &self.wbs[wb_id.index()];
        match self.config.dontcache_counter {
            DontcacheCounter::PerDomain => self.cache.wb(wb_id).dontcache_dirty,
            DontcacheCounter::GlobalSplit => {
                // Linux's wb_split_bdi_pages: this context's share of the
                // device's write bandwidth.
                let total_bw: u64 = self.devices[wb.device.index()]
                    .wbs
                    .iter()
                    .map(|w| self.wbs[w.index()].bw.avg_write_bw)
                    .sum();
                let this_bw = wb.bw.avg_write_bw;
                if total_bw == 0 || this_bw >= total_bw {
                    return self.cache.nr_dontcache_dirty;
                }
                (self.cache.nr_dontcache_dirty as u128 * this_bw as u128).div_ceil(total_bw as u128)
                    as u64
            }
        }
    }

    /// Pages `first..end` of `file` finished writeback: those marked
    /// drop-behind that came out clean leave the cache now.
    pub(crate) fn drop_behind(&mut self, file: FileId, first: PageIndex, end: PageIndex) {
        // Every write completion passes here: most files have no marked page.
        if self.cache.files[file.index()].counts().dropbehind == 0 {
            return;
        }
        let stretches: Vec<(PageIndex, PageIndex, u32)> = self.cache.files[file.index()]
            .runs_over(first, end)
            .filter(|(_, run)| run.flags & PG_DROPBEHIND != 0 && run.reclaimable())
            .map(|(start, run)| {
                let (a, b) = (start.max(first), (start + run.len).min(end));
                (a, b, run.frame + (a - start) as u32)
            })
            .collect();
        for (a, b, frame) in stretches {
            if self.cache.frame_notes.first_noted(frame, b - a).is_some() {
                // Read through the runtime meanwhile: an ordinary access.
                self.cache.files[file.index()].update(a, b, |fl| fl & !PG_DROPBEHIND);
                continue;
            }
            self.cache.remove_pages(file, a, b, &mut self.actions);
            self.wbs[self.cache.files[file.index()].wb.index()]
                .dontcache
                .dropped_pages += b - a;
        }
    }

    /// An ordinary read of pages `first..end` takes their drop-behind mark off.
    pub(crate) fn clear_dropbehind(&mut self, file: FileId, first: PageIndex, end: PageIndex) {
        let f = &mut self.cache.files[file.index()];
        if f.counts().dropbehind == 0
            || !f
                .runs_over(first, end)
                .any(|(_, r)| r.flags & PG_DROPBEHIND != 0)
        {
            return;
        }
        let before = f.counts();
        f.update(first, end, |fl| fl & !PG_DROPBEHIND);
        self.cache.account(file, before);
    }
}
