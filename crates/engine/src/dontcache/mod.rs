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
//!   to the sum of its files' counters at every change (`PageCache::account`).
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
//! This file holds the rules, over a context (`Wb`) and the page cache;
//! the write path (write_path/) and the flusher (dispatch/) apply them.
//!
//! Differs from Linux: we drop marked pages whose writeback ends even when
//! a runtime noted a read of their frames only by clearing the mark (the
//! page stays, as an accessed page would).

pub(crate) mod stats;
pub(crate) mod written_rate;

use crate::action::{Action, Stall, StallReason, WbReason};
use crate::config::DontcacheCounter;
use crate::flusher::Work;
use crate::ids::{FileId, PageIndex};
use crate::page_cache::{PageCache, PG_DROPBEHIND};
use crate::time::{Instant, NS_PER_MS, NS_PER_SEC};
use crate::wb::Wb;
use std::collections::VecDeque;

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

/// The uncached pages a context may hold dirty or under writeback: its
/// device's writes in DONTCACHE_DIRTY_WINDOW_NS or in DONTCACHE_LATENCIES
/// full-write latencies (`full_write_ns`: the device's shortest recent
/// one, if known), whichever is more, at least DONTCACHE_DIRTY_MIN_PAGES.
pub(crate) fn dontcache_limit(wb: &Wb, full_write_ns: Option<u64>) -> u64 {
    let rate_pages_s = write_rate(wb) as u128;
    // A device slow per request but deep needs rate x latency in flight
    // to reach its rate, and the rate grows only when more is in flight
    // than that (it is what completed): twice, so it does.
    let latency_ns = full_write_ns
        .unwrap_or(0)
        .saturating_mul(DONTCACHE_LATENCIES);
    let window_ns = DONTCACHE_DIRTY_WINDOW_NS.max(latency_ns) as u128;
    let pages = rate_pages_s * window_ns / NS_PER_SEC as u128;
    (pages.min(u64::MAX as u128) as u64).max(DONTCACHE_DIRTY_MIN_PAGES)
}

/// A context's write rate in pages per second: the larger of its recent
/// completions and its bandwidth estimate (which, averaged over seconds,
/// trails a fast device for seconds after a start).
fn write_rate(wb: &Wb) -> u64 {
    wb.written_rate.pages_s.max(wb.bw.avg_write_bw).max(1)
}

/// How many pages a DONTCACHE work of `wb` writes: its own dirty uncached
/// pages (`wb_dontcache_dirty`), or under `global-split` its share, by
/// write bandwidth among its device's contexts (`device_bws`), of the
/// cache-wide count (Linux's wb_split_bdi_pages).
pub(crate) fn dontcache_pages_for(
    counter: DontcacheCounter,
    wb: &Wb,
    (wb_dontcache_dirty, nr_dontcache_dirty): (u64, u64),
    device_bws: impl Iterator<Item = u64>,
) -> u64 {
    match counter {
        DontcacheCounter::PerDomain => wb_dontcache_dirty,
        DontcacheCounter::GlobalSplit => {
            let total_bw: u64 = device_bws.sum();
            let this_bw = wb.bw.avg_write_bw;
            if total_bw == 0 || this_bw >= total_bw {
                return nr_dontcache_dirty;
            }
            (nr_dontcache_dirty as u128 * this_bw as u128).div_ceil(total_bw as u128) as u64
        }
    }
}

impl Wb {
    /// `pages` uncached pages were just dirtied, the context holding
    /// `unclean` of at most `limit`: above the setpoint (half the limit)
    /// they move the context's pace on by their time at `pos` times its
    /// write rate; pos falls from DONTCACHE_POS_AT_SETPOINT at the
    /// setpoint (so a device that can take more soon shows it) to 1/4
    /// near the limit. Below the setpoint, and before a first rate was
    /// measured (`measured`), the writers run free (no debt kept).
    pub(crate) fn pace_dontcache(
        &mut self,
        now: Instant,
        pages: u64,
        (limit, unclean): (u64, u64),
        measured: bool,
    ) {
        let setpoint = limit / 2;
        if !measured || unclean < setpoint {
            self.dontcache_paced_until = now;
            return;
        }
        // pos = POS_AT_SETPOINT * room / span, room at least span / 16.
        let span = limit - setpoint;
        let room = limit.saturating_sub(unclean).max(span / 16).max(1);
        let rate_pages_s = write_rate(self) as u128;
        let ns = pages as u128 * NS_PER_SEC as u128 * span as u128
            / (DONTCACHE_POS_AT_SETPOINT as u128 * rate_pages_s * room as u128);
        let from = self.dontcache_paced_until.max(now);
        let ns = (ns.min(DONTCACHE_WAIT_MAX_NS as u128) as u64)
            .min((now + DONTCACHE_WAIT_MAX_NS).since_ns(from));
        self.dontcache_paced_until = from + ns;
    }

    /// `pages` uncached pages were just dirtied, the context holding
    /// `unclean` and its device's shortest recent full write taking
    /// `full_write_ns`: the context's write rate is measured first, then
    /// its pace moves on (`pace_dontcache`) within its limit.
    pub(crate) fn dontcache_dirtied(
        &mut self,
        now: Instant,
        pages: u64,
        full_write_ns: Option<u64>,
        unclean: u64,
    ) {
        let measured = self.written_rate.update(now, self.written);
        let limit = dontcache_limit(self, full_write_ns);
        self.pace_dontcache(now, pages, (limit, unclean), measured);
    }

    /// An uncached writer's wait, its context holding `unclean` of at
    /// most `limit` uncached pages: at the limit, for the next write
    /// completion or DONTCACHE_WAIT_MAX_NS (true: a completion wakes
    /// it); ahead of the pace, until the pace catches up, as long at
    /// most. None: it goes on.
    pub(crate) fn dontcache_wait(
        &self,
        now: Instant,
        (limit, unclean): (u64, u64),
    ) -> Option<(Instant, bool)> {
        let latest = now + DONTCACHE_WAIT_MAX_NS;
        if unclean >= limit {
            return Some((latest, true));
        }
        (self.dontcache_paced_until > now).then(|| (self.dontcache_paced_until.min(latest), false))
    }

    /// `dontcache_wait` as the writer's stall (`dirty_throttle`), the
    /// limit that of `dontcache_limit` (its device's shortest recent full
    /// write taking `full_write_ns`), the context holding `unclean`.
    pub(crate) fn dontcache_stall(
        &self,
        now: Instant,
        full_write_ns: Option<u64>,
        unclean: u64,
    ) -> Option<Stall> {
        let limit = dontcache_limit(self, full_write_ns);
        let (until, at_limit) = self.dontcache_wait(now, (limit, unclean))?;
        Some(Stall {
            reason: StallReason::DirtyThrottle,
            until,
            wakeable: at_limit,
            throttle: None,
        })
    }

    /// Sets the start_dontcache bit (Linux's
    /// filemap_dontcache_kick_writeback); whether the flusher must be
    /// woken (false: the bit was set, the kick coalesces).
    pub(crate) fn kick_dontcache(&mut self) -> bool {
        if self.flusher.start_dontcache {
            self.dontcache.kicks_coalesced += 1;
            return false;
        }
        self.flusher.start_dontcache = true;
        self.dontcache.kicks += 1;
        true
    }

    /// Clears the start_dontcache bit; whether it was set (Linux's
    /// wb_check_start_dontcache: cleared first, so a kick made while the
    /// work runs starts another).
    pub(crate) fn take_dontcache_bit(&mut self) -> bool {
        std::mem::take(&mut self.flusher.start_dontcache)
    }

    /// The DONTCACHE work of `nr_pages` pages, counted (`dontcache_dirty`:
    /// the context's dirty uncached pages now); None for no pages.
    pub(crate) fn dontcache_work(&mut self, nr_pages: u64, dontcache_dirty: u64) -> Option<Work> {
        if nr_pages == 0 {
            return None;
        }
        self.dontcache.works += 1;
        self.dontcache.work_pages += nr_pages;
        self.dontcache.dirty_at_work += dontcache_dirty;
        Some(Work {
            reason: WbReason::Dontcache,
            nr_pages,
            for_background: false,
            older_than: None,
        })
    }
}

impl PageCache {
    /// Pages `first..end` of `file` finished writeback: those marked
    /// drop-behind that came out clean leave the cache now. Returns how
    /// many left.
    pub(crate) fn drop_behind(
        &mut self,
        file: FileId,
        (first, end): (PageIndex, PageIndex),
        out: &mut VecDeque<Action>,
    ) -> u64 {
        // Every write completion passes here: most files have no marked page.
        if self.files[file.index()].counts().dropbehind == 0 {
            return 0;
        }
        let stretches: Vec<(PageIndex, PageIndex, u32)> = self.files[file.index()]
            .runs_over(first, end)
            .filter(|(_, run)| run.flags & PG_DROPBEHIND != 0 && run.reclaimable())
            .map(|(start, run)| {
                let (a, b) = (start.max(first), (start + run.len).min(end));
                (a, b, run.frame + (a - start) as u32)
            })
            .collect();
        let mut dropped = 0;
        for (a, b, frame) in stretches {
            if self.frame_notes.first_noted(frame, b - a).is_some() {
                // Read through the runtime meanwhile: an ordinary access.
                self.files[file.index()].update(a, b, |fl| fl & !PG_DROPBEHIND);
                continue;
            }
            self.remove_pages(file, a, b, out);
            dropped += b - a;
        }
        dropped
    }

    /// An ordinary read of pages `first..end` takes their drop-behind mark off.
    pub(crate) fn clear_dropbehind(&mut self, file: FileId, first: PageIndex, end: PageIndex) {
        let f = &mut self.files[file.index()];
        if f.counts().dropbehind == 0
            || !f
                .runs_over(first, end)
                .any(|(_, r)| r.flags & PG_DROPBEHIND != 0)
        {
            return;
        }
        let before = f.counts();
        f.update(first, end, |fl| fl & !PG_DROPBEHIND);
        self.account(file, before);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{DeviceId, DomainId};

    #[test]
    fn an_uncached_writer_at_the_least_limit_stalls_until_a_completion() {
        let now = Instant(NS_PER_SEC);
        let mut wb = Wb::new(DeviceId(0), DomainId(0), now);
        // 1000 pages/s for 50 ms is 50 pages, under the least limit:
        // DONTCACHE_DIRTY_MIN_PAGES, 1024.
        wb.bw.avg_write_bw = 1000;
        let stall = Stall {
            reason: StallReason::DirtyThrottle,
            until: Instant(NS_PER_SEC + 100 * NS_PER_MS),
            wakeable: true,
            throttle: None,
        };
        assert_eq!(wb.dontcache_stall(now, None, 1024), Some(stall));
        assert_eq!(wb.dontcache_stall(now, None, 1023), None);
    }

    #[test]
    fn an_uncached_writer_waits_at_the_limit_or_ahead_of_its_pace() {
        let now = Instant(NS_PER_SEC);
        let mut wb = Wb::new(DeviceId(0), DomainId(0), now);
        let latest = now + 100 * NS_PER_MS;
        assert_eq!(wb.dontcache_wait(now, (100, 100)), Some((latest, true)));
        assert_eq!(wb.dontcache_wait(now, (100, 99)), None, "paced up to now");
        wb.dontcache_paced_until = now + 30 * NS_PER_MS;
        let paced = Some((now + 30 * NS_PER_MS, false));
        assert_eq!(wb.dontcache_wait(now, (100, 10)), paced);
        wb.dontcache_paced_until = now + 500 * NS_PER_MS;
        assert_eq!(wb.dontcache_wait(now, (100, 10)), Some((latest, false)));
    }
}
