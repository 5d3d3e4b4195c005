//! Dropping cached pages of a file for a change of its backing file
//! (Linux's mm/truncate.c): a new length, or a range about to change.
//!
//! ## Truncation
//!
//! Changing a file's length (ftruncate): pages past the new end are
//! dropped, dirty ones without being written; writes already in flight
//! past the end, and of a page the new end cuts, are waited for, so they
//! cannot land after the backing file is shortened.
//!
//! Shortening the backing file frees its blocks (ext4: about half a second
//! a GiB). Up to one release step's worth (`RELEASE_STEP_BYTES`) the
//! runtime does it at once; more is a cut queued on the device's backlog
//! (backlog/), carried out in steps behind the caller, which a producer
//! of such cuts is throttled by as one of removals is. Until the cut is
//! done the backing file still holds the old data past the new end, so a
//! write or truncation that extends the file waits for it.
//!
//! ## Invalidation
//!
//! Dropping a range of a file's cached pages, for a runtime that is about
//! to change the backing file under them (fallocate's punch, zero,
//! collapse, insert and unshare): the next access reads the range from the
//! backing file again. Linux's truncate_pagecache_range, which fallocate
//! calls under the inode's invalidate lock.
//!
//! Dirty pages in the range are discarded, partial pages at its ends
//! included: the caller writes back first what it means to keep (the
//! library syncs the file's data before). Pages under I/O are waited for:
//! a write in flight must not land after the backing file changed, and a
//! read in flight must not fill a page with what was there before. The
//! file's length does not change here.
//!
//! ## Direct writes
//!
//! A direct write (direct/) writes back and drops the cached pages of its
//! range first (Linux's invalidate_inode_pages2_range, here too), then
//! sends its requests around the cache.

use crate::action::{IoDir, StallReason, Step};
use crate::backing_len::resize_now;
use crate::backlog::RELEASE_STEP_BYTES;
use crate::direct::phase::DirectPhase;
use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::{FileId, HandleId, PageIndex, TaskId, PAGE_SIZE};
use crate::page_cache::{MAX_FILE_PAGES, PG_DIRTY, PG_LOCKED, PG_READING, PG_WRITEBACK};
use crate::task::{Op, WaitKey};
use crate::time::Instant;

impl Engine {
    /// Sets the file's length. The backing file's length follows as
    /// backing_len/ says: set by the runtime before this returns
    /// (`Action::SetLength`), cut in steps by the backlog
    /// ([`Engine::cut_queued`], `Action::Release`), or, lengthened over
    /// data not yet written, by the next flush. The cached tail of a now
    /// partial last page must read as zeros if the file grows again (the
    /// runtime zeroes it).
    pub fn set_len(
        &mut self,
        now: Instant,
        task: TaskId,
        handle: HandleId,
        len: u64,
    ) -> Result<Step, EngineError> {
        let file = self.handle(handle)?.file;
        crate::handle::page_range(len, 0)?;
        self.tasks.begin(
            task,
            Op::Truncate {
                file,
                len,
                flush_until: None,
                resize: None,
            },
        )?;
        self.continue_truncate(now, task)
    }

    pub(crate) fn continue_truncate(
        &mut self,
        now: Instant,
        task: TaskId,
    ) -> Result<Step, EngineError> {
        let Op::Truncate {
            file,
            len,
            flush_until,
            resize,
        } = self.tasks[task.index()].op.clone()
        else {
            unreachable!("continue_truncate on a task that is not truncating");
        };
        if let Some(id) = resize {
            // The file is cut in the cache; its backing file's length is
            // being set.
            return match self.resizes.take(id) {
                Some(result) => {
                    let result = result.map(|()| Step::Done).map_err(EngineError::Resize);
                    self.tasks.finish(task, result)
                }
                None => {
                    Ok(self
                        .tasks
                        .wait_for(now, task, StallReason::Sync, WaitKey::FileIo(file)))
                }
            };
        }
        if self.cache.files[file.index()].resizing.is_some() {
            // Another truncation's length change first: lengths reach the
            // backing file in the order they were set.
            return Ok(self
                .tasks
                .wait_for(now, task, StallReason::Sync, WaitKey::FileIo(file)));
        }
        if self.extends_over_cut(file, len) {
            return Ok(self.wait_for_cut(now, task, file));
        }
        if let Some(reason) = self.drop_past_end(file, len) {
            // I/O in flight past the new end, or a copy into a page there:
            // wait for it, then drop the pages.
            return Ok(self
                .tasks
                .wait_for(now, task, reason, WaitKey::FileIo(file)));
        }
        let old_size = self.cache.files[file.index()].size;
        let cut = old_size.saturating_sub(len) > RELEASE_STEP_BYTES;
        if cut || self.cache.files[file.index()].cut_pending {
            // A cut for the backlog: the producer is throttled first.
            let device = self.cache.files[file.index()].device;
            let mut until = flush_until;
            if let Some(step) = self.backlog_throttle(now, task, device, &mut until) {
                self.tasks[task.index()].op = Op::Truncate {
                    file,
                    len,
                    flush_until: until,
                    resize: None,
                };
                return Ok(step);
            }
        }
        self.set_len_now(now, task, file, len, flush_until)
    }

    /// Truncation's last step: the file takes length `len` (its pages
    /// past it are gone) and its backing file follows (backing_len/).
    fn set_len_now(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
        len: u64,
        flush_until: Option<u64>,
    ) -> Result<Step, EngineError> {
        let old_size = self.cache.files[file.index()].size;
        let first_gone = len.div_ceil(PAGE_SIZE);
        crate::space::truncated(&mut self.cache.files[file.index()], len);
        let f = &mut self.cache.files[file.index()];
        f.size = len;
        f.writeback_index = f.writeback_index.min(first_gone);
        // The backlog cuts the backing file in steps, or the runtime sets
        // its length now (and no write of the file starts until it has),
        // or, lengthened over data not yet written, the next flush does.
        self.queue_cut(now, file, len, old_size);
        self.durability
            .mark_unsynced(&mut self.cache.files[file.index()]);
        if self.cut_queued(file) {
            // Writes past the new end wait for the cut (extends_over_cut).
            self.cache.files[file.index()].disk_size = len;
        } else if resize_now(&self.cache.files[file.index()], &self.io, len) {
            let f = &mut self.cache.files[file.index()];
            let id = self.resizes.request(file, f, len, &mut self.actions);
            self.tasks[task.index()].op = Op::Truncate {
                file,
                len,
                flush_until,
                resize: Some(id),
            };
            return Ok(self
                .tasks
                .wait_for(now, task, StallReason::Sync, WaitKey::FileIo(file)));
        }
        self.tasks.finish(task, Ok(Step::Done))
    }

    /// Drops `file`'s pages past a new length of `len` bytes that no
    /// I/O or copy holds; the stall to wait in while some remain (then
    /// the truncation waits and comes back).
    fn drop_past_end(&mut self, file: FileId, len: u64) -> Option<StallReason> {
        let first_gone = len.div_ceil(PAGE_SIZE);
        self.discard_dirty(file, first_gone);
        let range = (first_gone, MAX_FILE_PAGES);
        let mut busy = self.cache.drop_unheld(file, range, &mut self.actions);
        // A now partial last page under writeback: its tail is zeroed once
        // this returns (by the runtime, in the page's frame, which a write
        // in flight may be reading), and its write must not land after
        // the backing file is cut. Wait for it too.
        if !len.is_multiple_of(PAGE_SIZE) {
            busy |= self.cache.files[file.index()]
                .run_at(len / PAGE_SIZE)
                .is_some_and(|(_, run)| run.flags & (PG_WRITEBACK | PG_LOCKED) != 0);
        }
        if !busy {
            return None;
        }
        Some(
            if self.cache.any_locked(file, len / PAGE_SIZE, MAX_FILE_PAGES) {
                StallReason::PageLocked
            } else {
                StallReason::Sync
            },
        )
    }

    /// Whether a cut of `file`'s backing file is queued on its device's
    /// backlog (then the runtime leaves its length to the backlog).
    pub fn cut_queued(&self, file: FileId) -> bool {
        self.cache
            .files
            .get(file.index())
            .is_some_and(|f| f.cut_pending)
    }

    /// Makes the dirty pages from `first` on clean without writing them
    /// (their data is gone).
    pub(crate) fn discard_dirty(&mut self, file: FileId, first: PageIndex) {
        self.discard_dirty_range(file, first, MAX_FILE_PAGES);
    }

    /// Makes the dirty pages `first..end` clean without writing them.
    pub(crate) fn discard_dirty_range(&mut self, file: FileId, first: PageIndex, end: PageIndex) {
        let f = &mut self.cache.files[file.index()];
        let before = f.counts();
        f.update(first, end, |flags| flags & !PG_DIRTY);
        self.cache.account(file, before);
        let f = &mut self.cache.files[file.index()];
        let wb = &mut self.wbs[f.wb.index()];
        if f.counts().dirty == 0 {
            if let Some(when) = f.dirtied_when.take() {
                wb.dirty_files.remove(&(when, file));
            }
        }
        self.cache.note_clean(file, first, end);
        let f = &mut self.cache.files[file.index()];
        self.devices[f.device.index()]
            .space
            .unreserve_discarded(f, first, end);
    }

    /// Drops the cached pages of bytes `offset..offset + len` of the
    /// handle's file (a `len` reaching past the largest file: to the end).
    /// Done once none is left; the runtime then changes the backing file.
    pub fn invalidate_range(
        &mut self,
        now: Instant,
        task: TaskId,
        handle: HandleId,
        offset: u64,
        len: u64,
    ) -> Result<Step, EngineError> {
        let file = self.handle(handle)?.file;
        let first = (offset / PAGE_SIZE).min(MAX_FILE_PAGES);
        let end = offset
            .saturating_add(len)
            .div_ceil(PAGE_SIZE)
            .min(MAX_FILE_PAGES);
        self.tasks
            .begin(task, Op::Invalidate { file, first, end })?;
        self.continue_invalidate(now, task)
    }

    pub(crate) fn continue_invalidate(
        &mut self,
        now: Instant,
        task: TaskId,
    ) -> Result<Step, EngineError> {
        let Op::Invalidate { file, first, end } = self.tasks[task.index()].op.clone() else {
            unreachable!("continue_invalidate on a task that is not invalidating");
        };
        self.discard_dirty_range(file, first, end);
        let busy = self
            .cache
            .drop_unheld(file, (first, end), &mut self.actions);
        if busy {
            // I/O in flight in the range, or a copy into a page there: wait
            // for it, then drop the pages.
            let reason = if self.cache.any_locked(file, first, end) {
                StallReason::PageLocked
            } else {
                StallReason::Sync
            };
            return Ok(self
                .tasks
                .wait_for(now, task, reason, WaitKey::FileIo(file)));
        }
        // The backing file is about to change: the next sync flushes it.
        self.durability
            .mark_unsynced(&mut self.cache.files[file.index()]);
        self.tasks.finish(task, Ok(Step::Done))
    }

    // Direct writes (direct/).

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
        match phase {
            DirectPhase::Invalidate if self.extends_over_cut(file, end) => {
                // Its data would land where a queued cut is to free (truncate.rs).
                Ok(self.wait_for_cut(now, task, file))
            }
            DirectPhase::Invalidate => {
                if let Some(step) = self.invalidate_for_direct(now, task, file, first, last) {
                    return Ok(step);
                }
                let left = self.issue_direct(now, task, file, first, last);
                self.set_direct_phase(task, DirectPhase::InFlight { left, failed: None });
                Ok(self
                    .tasks
                    .wait_for(now, task, StallReason::DirectIo, WaitKey::Direct(task)))
            }
            DirectPhase::InFlight { left, .. } if left > 0 => {
                Ok(self
                    .tasks
                    .wait_for(now, task, StallReason::DirectIo, WaitKey::Direct(task)))
            }
            DirectPhase::InFlight { failed, .. } => {
                if let Some(e) = failed {
                    return self.tasks.finish(task, Err(EngineError::WriteBack(e)));
                }
                let f = &mut self.cache.files[file.index()];
                f.size = f.size.max(end);
                self.durability
                    .mark_unsynced(&mut self.cache.files[file.index()]);
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
        let f = &self.cache.files[file.index()];
        let dirty = f
            .runs_over(first, last)
            .any(|(_, r)| r.flags & PG_DIRTY != 0);
        let busy = f
            .runs_over(first, last)
            .any(|(_, r)| r.flags & (PG_WRITEBACK | PG_READING) != 0);
        if dirty {
            let id = self.start_submission(now, file, first, last);
            // Only the submission matters; the wait is for its completions.
            self.submission_done(id);
        }
        if dirty || busy {
            return Some(self.tasks.wait_for(
                now,
                task,
                StallReason::DirectIo,
                WaitKey::FileIo(file),
            ));
        }
        self.cache
            .remove_pages(file, first, last, &mut self.actions);
        None
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
        let mut page = first;
        let mut count = 0;
        while page < last {
            let pages = max_pages.min(last - page);
            let at = (self.cache.files[file.index()].device, file);
            let span = (page, pages, pages * PAGE_SIZE);
            let req = self.io.request(at, IoDir::Write, span, None, true);
            self.io.direct_ios.insert(req.id, task);
            self.issue_or_queue(now, req);
            page += pages;
            count += 1;
        }
        count
    }

    fn set_direct_phase(&mut self, task: TaskId, next: DirectPhase) {
        if let Op::DirectWrite { phase, .. } = &mut self.tasks[task.index()].op {
            *phase = next;
        }
    }
}
