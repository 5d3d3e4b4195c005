//! The flusher of one writeback context (Linux's fs/fs-writeback.c).
//!
//! - Works, in order: queued works in FIFO order (a full queue folds into
//!   the coalescing "write everything" bit, WB_start_all), then the
//!   uncached writes' work (the WB_start_dontcache bit, dontcache/),
//!   then periodic (kupdate) writeback of files dirtied longer than
//!   dirty_expire_centisecs, then background writeback while the context is
//!   over its background threshold.
//! - Files in first-dirtied order (b_dirty); the flusher writes a chunk of
//!   one file (half a second of bandwidth, at most 1/8 of the dirty limit,
//!   in 4 MiB multiples) before moving to the next, so one big file cannot
//!   starve the others; within a file it continues where it stopped.
//! - Requests are as large as the device takes (max_sectors_kb) and, while
//!   reads compete, no larger than wbt's write cap.
//! - Past the end of the backing file, a file grows in order: the flusher
//!   never writes a page there while a page below it, also past that end,
//!   waits dirty (ours; see `next_writable_from_index`).
//! - Differs from Linux: the flusher is not a thread; `pump` (dispatch/)
//!   runs it whenever the device can take a write, and `handle_timeout`
//!   (here) runs the clocks that wake it (timers/).
//! - Room for pages (`reserve`, `trim_to_budget`): the page cache frees
//!   clean pages; when too few are clean every context's flusher is asked
//!   to write everything (reason vmscan, Linux's wakeup_flusher_threads).

pub(crate) mod work;

use crate::action::IoRequest;
use crate::action::WbReason;
use crate::bandwidth::estimate::{BANDWIDTH_INTERVAL_NS, INIT_BW_PAGES_S};
use crate::dispatch::class_of;
use crate::dontcache::dontcache_pages_for;
use crate::engine::Engine;
use crate::ids::{DeviceId, FileId, PageIndex, WbId};
use crate::proportions::PERIOD_NS;
use crate::time::Instant;
use crate::timers::{kupdate_interval, Busy};
use std::ops::Bound;

pub(crate) use crate::flusher::work::Work;

/// Linux's MIN_WRITEBACK_PAGES (4 MiB): chunks are multiples of it.
pub const MIN_WRITEBACK_PAGES: u64 = 1024;
/// Linux's DIRTY_SCOPE: a chunk is at most 1/8 of the dirty limit.
pub const DIRTY_SCOPE: u64 = 8;

/// Pages to write from one file before moving on (Linux's
/// writeback_chunk_size): half a second of bandwidth, at most 1/8 of the
/// dirty limit, rounded to 4 MiB so requests stay large.
pub fn writeback_chunk_size(avg_write_bw: u64, dirty_limit: u64, nr_pages: u64) -> u64 {
    let bw = if avg_write_bw == 0 {
        INIT_BW_PAGES_S
    } else {
        avg_write_bw
    };
    let pages = (bw / 2).min(dirty_limit / DIRTY_SCOPE).min(nr_pages);
    (pages + MIN_WRITEBACK_PAGES) / MIN_WRITEBACK_PAGES * MIN_WRITEBACK_PAGES
}

impl Engine {
    /// The next time `handle_timeout` must be called; None when no timer
    /// has anything to do (timers/).
    pub fn poll_timeout(&self) -> Option<Instant> {
        // Runtimes call this after every event: plain comparisons.
        let timers = self.timers.next(self.timers_busy());
        let devices = self.devices.iter().filter_map(|d| d.next_timeout()).min();
        timers.into_iter().chain(devices).min()
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

    /// Ensures room for `pages` more cached pages. On failure, has the
    /// dirty pages written (Linux's wakeup_flusher_threads(WB_REASON_VMSCAN));
    /// the caller must wait (reason Memory).
    pub(crate) fn reserve(&mut self, now: Instant, pages: u64) -> bool {
        if self.cache.make_room(pages, &mut self.actions) {
            return true;
        }
        for w in 0..self.wbs.len() {
            if self.cache.wb_pages[w].dirty > 0 {
                self.wbs[w].flusher.start_all(WbReason::Vmscan);
                let device = self.wbs[w].device;
                self.pump(now, device);
            }
        }
        false
    }

    /// Brings the cache within a lowered budget: frees clean pages now,
    /// and while that is not enough has the dirty ones written back
    /// (reason vmscan, as `reserve` does) and frees them as they come
    /// clean (`io_complete`, `handle_timeout`). Returns whether the cache
    /// is still over its budget.
    pub(crate) fn trim_to_budget(&mut self) -> bool {
        if !self.cache.trim(&mut self.actions) {
            return false;
        }
        let pages = &self.cache.wb_pages;
        for (wb, _) in self.wbs.iter_mut().zip(pages).filter(|(_, p)| p.dirty > 0) {
            wb.flusher.start_all(WbReason::Vmscan);
        }
        true
    }

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
        let wb = &mut self.wbs[wb_id.index()];
        let flusher = &mut wb.flusher;
        if flusher.kupdate_due {
            flusher.kupdate_due = false;
            Some(Work {
                reason: WbReason::Periodic,
                nr_pages: wb_dirty,
                for_background: false,
                older_than: Some(now - expire_ns),
            })
        } else if flusher.background_kicked && over_bg {
            Some(Work::background())
        } else {
            flusher.background_kicked = false;
            None
        }
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
            let f = &self.cache.files[file.index()];
            if f.next_writable(0).is_some() && f.resizing.is_none() {
                found = Some((when, file));
                break;
            }
        }
        let wb = &mut self.wbs[wb_id.index()];
        wb.cursor = found;
        found.map(|(_, f)| f)
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
            .and_then(|(_, f)| Some((f, self.next_writable_from_index(f)?)));
        let (file, start) = match current {
            Some(found) => found,
            None => {
                let file = self.flusher_next_file(wb_id, work.older_than)?;
                let wb = &mut self.wbs[wb_id.index()];
                wb.flusher.chunk_left = if work.reason == WbReason::Sync {
                    u64::MAX
                } else {
                    writeback_chunk_size(
                        wb.bw.avg_write_bw,
                        self.dom.thresh.thresh.max(self.dom.dirty_limit),
                        work.nr_pages,
                    )
                };
                (file, self.next_writable_from_index(file)?)
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
        let pages = self.writable_run(file, start, max_pages);
        let wb = &mut self.wbs[wb_id.index()];
        wb.flusher.chunk_left = wb.flusher.chunk_left.saturating_sub(pages);
        if let Some(w) = wb.flusher.current.as_mut() {
            w.nr_pages = w.nr_pages.saturating_sub(pages);
        }
        Some(self.start_writeback(file, start, pages, class_of(work.reason), work.reason))
    }

    /// The file's next writable page from where the flusher left it,
    /// wrapping to the start (Linux's writeback_index cyclic range); but
    /// past the end of the backing file (`disk_pages`), the lowest page
    /// waiting there first. A write past that end makes the backing file
    /// longer: were a dirty page below it still unwritten, a crash of the
    /// process would leave the backing file reading zeros there, which the
    /// file may never have held (ours: Linux's i_disksize may run ahead of
    /// a hole, which a power cut shows). Pages under writeback below are
    /// fine: their write was issued first, and where a crash could land
    /// the later one without it, the device takes a file's growing
    /// writes one at a time, in order (`extending_writes`, dispatch/).
    fn next_writable_from_index(&self, file: FileId) -> Option<PageIndex> {
        let f = &self.cache.files[file.index()];
        let start = f
            .next_writable(f.writeback_index)
            .or_else(|| f.next_writable(0))?;
        if start > f.disk_pages {
            return f.next_writable(f.disk_pages);
        }
        Some(start)
    }

    /// Length of the run of writable pages from `start`, at most `max`.
    pub(crate) fn writable_run(&self, file: FileId, start: PageIndex, max: u64) -> u64 {
        let n = self.cache.files[file.index()].writable_len(start, max);
        assert!(n >= 1, "run starts at a writable page");
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_sizes() {
        // 150 MB/s: half a second is 18310 pages, limit/8 = 25k: rounds to 18432.
        assert_eq!(writeback_chunk_size(36_621, 200_000, u64::MAX), 18_432);
        // A slow USB stick: still at least 4 MiB.
        assert_eq!(
            writeback_chunk_size(100, 200_000, u64::MAX),
            MIN_WRITEBACK_PAGES
        );
        assert_eq!(
            writeback_chunk_size(36_621, 200_000, 10),
            MIN_WRITEBACK_PAGES
        );
    }
}
