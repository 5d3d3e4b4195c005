//! The buffered write path: copy page by page into the cache (reading a
//! page first when only part of it is overwritten), mark pages dirty
//! (page_cache/dirty.rs), and let the throttles decide whether the
//! writer sleeps (throttle.rs).

pub(crate) mod flags;
mod throttle;

use crate::action::{StallReason, Step};
use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::{FileId, HandleId, PageIndex, TaskId, PAGE_SIZE};
use crate::page_cache::{PG_DROPBEHIND, PG_READING, PG_WRITEBACK};
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
        let w = *self.write_op(task);
        let (start, mut pos, end, flags) = (w.start, w.pos, w.end, w.flags);
        let file = self.handle(w.handle)?.file;
        if pos == start {
            if let Some(stop) = self.write_space(now, task, file, (start, end), w.space_flushed) {
                return stop;
            }
        }
        if let Some(step) =
            self.write_throttles_again(now, task, file, w.wait_2007.is_some(), w.throttle_again)
        {
            return Ok(step);
        }
        while pos < end {
            // The backing file still holds old data past the end: a queued
            // cut frees it first (truncate.rs).
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

    /// A write that woke from a dirty throttle checks it again.
    fn write_throttles_again(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
        wait_2007: bool,
        throttle_again: bool,
    ) -> Option<Step> {
        if wait_2007 {
            if let Some(step) = self.throttle_2007(now, task, file) {
                return Some(step);
            }
        }
        if throttle_again {
            return self.balance_dirty_pages(now, task, file);
        }
        None
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
        let want_end = if whole {
            page + ((end - pos) / PAGE_SIZE).min(self.pages_before_throttle_check(task, file))
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
        self.write_op(task).pos = pos;
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
        let stable_wait = stable == crate::config::StableWrites::Wait;
        let mut p = first;
        while p < want_end {
            let f = &self.cache.files[file.index()];
            let Some((start, run)) = f.run_at(p) else {
                if p > first {
                    break;
                }
                return self.insert_for_write(now, task, stretch);
            };
            let wait = if run.flags & PG_READING != 0 {
                Some((StallReason::ReadIo, WaitKey::FileIo(file)))
            } else if run.flags & PG_WRITEBACK != 0 && stable_wait {
                // The device checksums data in flight: wait for the write to finish.
                Some((StallReason::StablePage, WaitKey::FileIo(file)))
            } else {
                None
            };
            if let Some((reason, key)) = wait {
                if p > first {
                    break;
                }
                return Err(self.tasks.wait_for(now, task, reason, key));
            }
            if run.flags & PG_WRITEBACK != 0 && stable == crate::config::StableWrites::Snapshot {
                // The write in flight keeps its frames; this writer gets copies.
                let end = (start + run.len).min(want_end);
                match self.snapshot_pages(file, p, end) {
                    Some(copied_end) => {
                        p = copied_end;
                        continue;
                    }
                    None if p > first => break,
                    None => {
                        return Err(self.tasks.wait_for(
                            now,
                            task,
                            StallReason::Memory,
                            WaitKey::Memory,
                        ))
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
        let free = self.cache.free_pages();
        if free < hole {
            self.cache.shrink(
                (hole - free).max(crate::page_cache::RECLAIM_BATCH),
                &mut self.actions,
            );
        }
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

    /// The runtime has copied the bytes of `task`'s CopyIn actions:
    /// unlocks their pages (page_cache/page_lock.rs), wakes whoever waits
    /// for them and starts the writeback they held up.
    pub fn write_end(&mut self, now: Instant, task: TaskId) -> Result<(), EngineError> {
        if task.index() >= self.tasks.len() {
            return Err(EngineError::BadTask(task));
        }
        let mine = self.cache.unlock_pages(task);
        for lock in &mine {
            self.tasks
                .wake(WaitKey::FileIo(lock.file), &mut self.actions);
        }
        let mut devices: Vec<_> = mine
            .iter()
            .map(|l| self.cache.files[l.file.index()].device)
            .collect();
        devices.sort_unstable_by_key(|d| d.index());
        devices.dedup();
        for device in devices {
            self.pump(now, device);
        }
        Ok(())
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
        let id = self.io.write_carrying(&f.inflight_writes, first);
        let write = self.io.inflight.get_mut(&id).expect("in flight");
        write.snapshot_frames.push((snap.from, snap.count));
        self.devices[f.device.index()].stats.snapshot_pages += snap.count;
        Some(first + snap.count)
    }
}
