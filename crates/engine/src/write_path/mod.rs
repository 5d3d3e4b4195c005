//! The buffered write path: copy page by page into the cache (reading a
//! page first when only part of it is overwritten), mark pages dirty
//! (page_cache/dirty.rs), and meet every wait a writer meets before and
//! while it dirties pages: room on the backing filesystem (space/), the
//! dirty throttle (Linux's balance_dirty_pages, balance_dirty/; or the
//! 2007 global limit, dirty_throttle_2007.rs), and the uncached writers'
//! limit and pace (dontcache/). The policies are pure; this file applies
//! them to the engine's state and turns their answers into waits.

pub(crate) mod flags;

use crate::action::{StallReason, Step};
use crate::balance_dirty::{balance_dirty_pages, throttle_check_point};
use crate::config::{DirtyThrottle, DontcacheFlush};
use crate::dirty_throttle_2007::{stall_2007, waits_2007, work_2007};
use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::{FileId, HandleId, PageIndex, TaskId, WbId, PAGE_SIZE};
use crate::page_cache::{write_over, WriteOver, PG_DROPBEHIND, PG_READING};
use crate::space::Room;
use crate::task::{Op, WaitKey, WriteOp};
use crate::time::Instant;
use crate::write_path::flags::WriteFlags;

/// Pages `first..want_end` of `file` a write is about to fill.
#[derive(Clone, Copy, Debug)]
struct Stretch {
    file: FileId,
    first: PageIndex,
    want_end: PageIndex,
    /// The write covers the pages whole (else it is one page, partly
    /// overwritten).
    whole: bool,
    flags: WriteFlags,
}

impl Engine {
    /// Writes `len` bytes at `offset` through the cache.
    pub fn write(
        &mut self,
        now: Instant,
        task: TaskId,
        handle: HandleId,
        offset: u64,
        len: u64,
    ) -> Result<Step, EngineError> {
        self.write_with(now, task, handle, offset, len, WriteFlags::default())
    }

    /// As `write`, with `flags` (for example uncached).
    pub fn write_with(
        &mut self,
        now: Instant,
        task: TaskId,
        handle: HandleId,
        offset: u64,
        len: u64,
        flags: WriteFlags,
    ) -> Result<Step, EngineError> {
        self.file_in_use(handle, offset, len)?;
        let op = WriteOp::new(handle, (offset, offset + len), flags);
        self.tasks.begin(task, Op::Write(op))?;
        self.continue_write(now, task)
    }

    pub(crate) fn continue_write(
        &mut self,
        now: Instant,
        task: TaskId,
    ) -> Result<Step, EngineError> {
        let w = *self.tasks.write_op(task);
        let (start, mut pos, end, flags) = (w.start, w.pos, w.end, w.flags);
        let file = self.handle(w.handle)?.file;
        if pos == start {
            if let Some(stop) = self.write_space(now, task, file, (start, end), w.space_flushed) {
                return stop;
            }
        }
        // A write that woke from a dirty throttle checks it again.
        if w.wait_2007.is_some() {
            if let Some(step) = self.throttle_2007(now, task, file) {
                return Ok(step);
            }
        }
        if w.throttle_again {
            if let Some(step) = self.balance_dirty_pages(now, task, file) {
                return Ok(step);
            }
        }
        while pos < end {
            // The backing file still holds old data past the end: a queued
            // cut frees it first (backlog/).
            if self.extends_over_cut(file, end) {
                return Ok(self.wait_for_cut(now, task, file));
            }
            if flags.dontcache {
                if let Some(step) = self.dontcache_throttle(now, task, file) {
                    return Ok(step);
                }
            }
            pos = match self.write_stretch(now, task, file, (pos, end), flags) {
                Ok(pos) => pos,
                Err(step) => return Ok(step),
            };
            if let Some(step) = self.maybe_throttle(now, task, file) {
                return Ok(step);
            }
        }
        if flags.dontcache {
            if let Some(step) = self.dontcache_written(now, task, file, (start, end), w.flush_op) {
                return Ok(step);
            }
        }
        self.tasks.finish(task, Ok(Step::Done))
    }

    /// Copies one stretch of the write at `pos` (of `pos..end`) into the
    /// cache and dirties it: the write's new position, or the step it
    /// waits in for its pages.
    fn write_stretch(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
        (mut pos, end): (u64, u64),
        flags: WriteFlags,
    ) -> Result<u64, Step> {
        let page = pos / PAGE_SIZE;
        let whole = pos % PAGE_SIZE == 0 && end - pos >= PAGE_SIZE;
        // Dirty no more new pages than the task may before its next
        // throttle check: the checks fall where a page-at-a-time loop
        // would make them.
        let (dirtied, limit) = self.throttle_check_point(task, file);
        let want_end = if whole {
            page + ((end - pos) / PAGE_SIZE).min(limit.saturating_sub(dirtied).max(1))
        } else {
            page + 1
        };
        let stretch = Stretch {
            file,
            first: page,
            want_end,
            whole,
            flags,
        };
        let ready_end = self.prepare_pages(now, task, stretch)?;
        self.dirty_pages(now, task, file, (page, ready_end), flags);
        let copied = pos;
        pos = end.min(ready_end * PAGE_SIZE);
        self.cache
            .copy_in(task, file, (copied, pos), &mut self.actions);
        if flags.deferred_copy && !flags.dontcache {
            self.cache.lock_pages(task, file, page, ready_end);
        }
        let f = &mut self.cache.files[file.index()];
        f.size = f.size.max(pos);
        self.tasks.write_op(task).pos = pos;
        Ok(pos)
    }

    /// Makes the stretch's pages from `first` (up to `want_end`) cached
    /// and modifiable. Returns the end of the pages made ready (past
    /// `first`), or the wait the task must make when not even `first` is
    /// ready. Inserts at most one run of new pages, so nothing it prepared
    /// can be reclaimed before the caller dirties it.
    fn prepare_pages(
        &mut self,
        now: Instant,
        task: TaskId,
        stretch: Stretch,
    ) -> Result<PageIndex, Step> {
        let Stretch {
            file,
            first,
            want_end,
            ..
        } = stretch;
        let stable = self.devices[self.cache.files[file.index()].device.index()].stable_mode();
        let mut p = first;
        while p < want_end {
            let f = &self.cache.files[file.index()];
            let Some((start, run)) = f.run_at(p) else {
                if p > first {
                    break;
                }
                return self.insert_for_write(now, task, stretch);
            };
            match write_over(run.flags, stable) {
                WriteOver::Modify => {}
                WriteOver::Wait(_) if p > first => break,
                WriteOver::Wait(reason) => {
                    return Err(self
                        .tasks
                        .wait_for(now, task, reason, WaitKey::FileIo(file)))
                }
                WriteOver::Copy => {
                    // The write in flight keeps its frames; this writer gets copies.
                    let end = (start + run.len).min(want_end);
                    match self.snapshot_pages(file, p, end) {
                        Some(copied_end) => {
                            p = copied_end;
                            continue;
                        }
                        None if p > first => break,
                        None => {
                            let key = WaitKey::Memory;
                            return Err(self.tasks.wait_for(now, task, StallReason::Memory, key));
                        }
                    }
                }
            }
            p = (start + run.len).min(want_end);
        }
        Ok(p)
    }

    /// Inserts the uncached pages from the stretch's `first` (up to
    /// `want_end`), as far as memory allows; see `prepare_pages`.
    fn insert_for_write(
        &mut self,
        now: Instant,
        task: TaskId,
        stretch: Stretch,
    ) -> Result<PageIndex, Step> {
        let Stretch {
            file,
            first: page,
            want_end,
            whole,
            flags,
        } = stretch;
        // Pages an uncached write brings in are marked to leave after
        // writeback; pages cached already keep their state (as Linux marks
        // only the folios it creates).
        let mark = if flags.dontcache { PG_DROPBEHIND } else { 0 };
        let f = &self.cache.files[file.index()];
        let on_disk = page * PAGE_SIZE < f.size;
        let hole = f.hole_len(page, want_end - page);
        // Room for the whole stretch at once: the clock hand runs once per
        // stretch rather than once per RECLAIM_BATCH pages.
        self.cache.make_room(hole, &mut self.actions);
        if self.cache.free_pages() == 0 && !self.reserve(now, 1) {
            return Err(self
                .tasks
                .wait_for(now, task, StallReason::Memory, WaitKey::Memory));
        }
        if on_disk && !whole {
            // Read-modify-write: the rest of the page must come from the device.
            self.cache
                .insert_pages(file, page, 1, PG_READING | mark, false, &mut self.actions);
            self.submit_read(now, file, page, 1);
            return Err(self
                .tasks
                .wait_for(now, task, StallReason::ReadIo, WaitKey::FileIo(file)));
        }
        let pages = hole.min(self.cache.free_pages());
        // Whole-page writes need no zeroed frames: their data is copied
        // over all of them first.
        self.cache
            .insert_pages(file, page, pages, mark, whole, &mut self.actions);
        Ok(page + pages)
    }

    /// Marks cached pages `first..end` dirty (page_cache/dirty.rs) and
    /// counts those that were not for their context, the task and the
    /// uncached writers' pace.
    fn dirty_pages(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
        (first, end): (PageIndex, PageIndex),
        flags: WriteFlags,
    ) {
        let marks = self.cache.write_marks(flags.dontcache);
        // Overwriting pages that are dirty (and referenced) already changes
        // no state: no split of their run, no accounting.
        if self.cache.files[file.index()].all_match(first, end, marks.0, marks.1) {
            return;
        }
        self.wake_timers(now, false);
        let dirtied = self.cache.dirty_pages(now, file, (first, end), marks);
        let f = &mut self.cache.files[file.index()];
        self.devices[f.device.index()]
            .space
            .reserve_dirtied(f, first, end);
        if dirtied.newly == 0 {
            return;
        }
        let wb_id = f.wb;
        self.wbs[wb_id.index()].dirtied(now, file, dirtied);
        if flags.dontcache {
            self.pace_dontcache(now, wb_id, dirtied.newly);
        }
        self.stats.dirtied_pages += dirtied.newly;
        self.tasks[task.index()].dirty.dirtied(dirtied.newly);
        let c = &self.cache;
        self.stats
            .note_peaks(c.nr_dirty, c.nr_writeback, c.nr_cached);
    }

    /// Stable pages by copy (page_cache/stable.rs): pages `first..end` of
    /// `file`, in one run under writeback, get frames of their own, and
    /// the write in flight that carries them keeps the old ones until it
    /// completes. Returns the end of the pages copied, or None when no
    /// frame is free even after reclaim.
    fn snapshot_pages(
        &mut self,
        file: FileId,
        first: PageIndex,
        end: PageIndex,
    ) -> Option<PageIndex> {
        let snap = self.cache.snapshot(file, first, end, &mut self.actions)?;
        let f = &self.cache.files[file.index()];
        self.io
            .keep_frames(&f.inflight_writes, first, (snap.from, snap.count));
        self.devices[f.device.index()].stats.snapshot_pages += snap.count;
        Some(first + snap.count)
    }

    /// Room on the backing filesystem for what the write adds, checked
    /// before any of it is in the cache (space/): Some(what to return)
    /// when the write waits or fails here. Too little room the first time
    /// writes back everything dirty on the device and waits for the free
    /// space reported after it (stall `sync`, bounded by that write-back,
    /// at most `SPACE_FLUSH_MAX_NS`).
    fn write_space(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
        range: (u64, u64),
        space_flushed: bool,
    ) -> Option<Result<Step, EngineError>> {
        let f = &self.cache.files[file.index()];
        let device = f.device;
        let room = self.devices[device.index()]
            .space
            .room_for(f, range, space_flushed);
        match room {
            Room::Enough => return None,
            Room::WaitForReport => {}
            Room::NoSpace(e) => {
                self.devices[device.index()].stats.enospc_writes += 1;
                return Some(self.tasks.finish(task, Err(e)));
            }
            Room::FlushFirst => {
                self.tasks.write_op(task).space_flushed = true;
                self.start_space_flush(now, device);
            }
        }
        let key = WaitKey::Space(device);
        Some(Ok(self.tasks.wait_for(now, task, StallReason::Sync, key)))
    }

    /// A DONTCACHE writer whose context holds its limit of uncached pages
    /// dirty or under writeback waits for the next write completion
    /// (woken, or after DONTCACHE_WAIT_MAX_NS); below that, one ahead of
    /// its context's pace sleeps until the pace catches up (dontcache/).
    fn dontcache_throttle(&mut self, now: Instant, task: TaskId, file: FileId) -> Option<Step> {
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
        let unclean = self.cache.wb(wb_id).dontcache_unclean;
        let stall = wb.dontcache_stall(now, latency, unclean)?;
        // The flusher may be idle between kicks: let it write meanwhile.
        self.kick_dontcache(now, wb_id);
        let key = stall.wakeable.then_some(WaitKey::WbWritten(wb_id));
        Some(self.tasks.stall(task, now, stall, key))
    }

    /// `pages` uncached pages of `wb_id` were just dirtied: the pace
    /// (`Wb::dontcache_dirtied`). Inline writers are never paced.
    fn pace_dontcache(&mut self, now: Instant, wb_id: WbId, pages: u64) {
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
    fn dontcache_written(
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
            self.tasks.write_op(task).flush_op = Some(id);
            id
        });
        if self.submission_done(id) {
            return None;
        }
        let (reason, key) = (StallReason::DontcacheFlush, WaitKey::Sync(id));
        Some(self.tasks.wait_for(now, task, reason, key))
    }

    /// `task`'s pages dirtied since its last look at the limits, and how
    /// many it may dirty before it looks again (balance_dirty/).
    fn throttle_check_point(&self, task: TaskId, file: FileId) -> (u64, u64) {
        let wb = &self.wbs[self.cache.files[file.index()].wb.index()];
        let exceeded = (wb.dirty_exceeded, self.dirty_exceeded_2007);
        let (mode, memory) = (self.config.dirty_throttle, self.cache.memory_pages);
        throttle_check_point(mode, &self.tasks[task.index()].dirty, exceeded, memory)
    }

    /// After dirtying a stretch: past its check point, the writer looks
    /// at the limits of the configured throttle.
    fn maybe_throttle(&mut self, now: Instant, task: TaskId, file: FileId) -> Option<Step> {
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

    /// Linux's balance_dirty_pages, one pass (balance_dirty/): kicks
    /// background writeback and returns a pause, if any.
    fn balance_dirty_pages(&mut self, now: Instant, task: TaskId, file: FileId) -> Option<Step> {
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
        let balance = balance_dirty_pages(t, now, &dtc, strict, rates);
        if let Some(exceeded) = balance.dirty_exceeded() {
            self.kick_background(now, wb_id);
            self.wbs[wb_id.index()].dirty_exceeded = exceeded;
        }
        let pause = balance.pause(now);
        self.tasks.write_op(task).throttle_again = pause.is_some_and(|(_, again)| again);
        let (stall, _) = pause?;
        self.devices[device.index()].last_bdp_sleep = Some(now);
        Some(self.tasks.stall(task, now, stall, None))
    }

    /// The 2007 global limit (dirty_throttle_2007.rs): over it, a writer
    /// waits until its own device has written a chunk or the global count
    /// is back under the limit, looking again every 100 ms. A writer to an
    /// idle device with few dirty pages of its own can only wait for the
    /// global count: the pathology Sekiyama fixed.
    fn throttle_2007(&mut self, now: Instant, task: TaskId, file: FileId) -> Option<Step> {
        let wb_id = self.cache.files[file.index()].wb;
        let over = self.cache.nr_dirty + self.cache.nr_writeback > self.dom.thresh.thresh;
        if self.cache.nr_dirty > self.dom.thresh.bg_thresh {
            self.kick_background(now, wb_id);
        }
        let (written, memory_pages) = (self.wbs[wb_id.index()].written, self.cache.memory_pages);
        let since = &mut self.tasks.write_op(task).wait_2007;
        if !waits_2007(over, written, since, memory_pages) {
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
        let key = Some(WaitKey::WbWritten(wb_id));
        Some(self.tasks.stall(task, now, stall_2007(now), key))
    }
}
