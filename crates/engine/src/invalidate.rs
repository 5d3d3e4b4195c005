//! Dropping a range of cached pages for a change around the cache
//! (Linux's mm/truncate.c; the page rules: page_cache/truncate.rs).
//!
//! Invalidation (`Engine::invalidate_range`, Linux's
//! truncate_pagecache_range, which fallocate calls under the inode's
//! invalidate lock): a runtime is about to change the backing file under
//! a range (punch, zero, collapse, insert, unshare). Dirty pages in it are
//! discarded, partial pages at its ends included: the caller writes back
//! first what it means to keep (the library syncs the file's data
//! before). Pages under I/O are waited for: a write in flight must not
//! land after the backing file changed, and a read in flight must not fill
//! a page with what was there before. The file's length does not change.
//!
//! Direct writes (`Engine::write_direct`, direct/): the cached pages of
//! the range are written back and dropped first (Linux's
//! invalidate_inode_pages2_range), then the requests go around the cache.

use crate::action::{IoDir, StallReason, Step};
use crate::direct::phase::DirectPhase;
use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::{FileId, HandleId, PageIndex, TaskId, PAGE_SIZE};
use crate::page_cache::MAX_FILE_PAGES;
use crate::task::{Op, WaitKey};
use crate::time::Instant;

impl Engine {
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
        self.discard_dirty(file, first, end);
        let range = (first, end);
        if let Some(reason) = self.cache.invalidate_pages(file, range, &mut self.actions) {
            // I/O in flight in the range, or a copy into a page there: wait
            // for it, then drop the pages.
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
                // Its data would land where a queued cut is to free (backlog/).
                Ok(self.wait_for_cut(now, task, file))
            }
            DirectPhase::Invalidate => {
                if let Some(step) = self.invalidate_for_direct(now, task, file, first, last) {
                    return Ok(step);
                }
                let left = self.issue_direct(now, task, file, first, last);
                let phase = DirectPhase::InFlight { left, failed: None };
                self.tasks.set_direct_phase(task, phase);
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
        let dirty = self.cache.dirty_over(file, first, last);
        let busy = self.cache.io_over(file, first, last);
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
        let mut count = 0;
        for (page, pages) in crate::direct::requests(first, last, max_pages) {
            let span = (page, pages, pages * PAGE_SIZE);
            let req = self
                .io
                .request((device, file), IoDir::Write, span, None, true);
            self.io.direct_ios.insert(req.id, task);
            self.issue_or_queue(now, req);
            count += 1;
        }
        count
    }
}
