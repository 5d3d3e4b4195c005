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

use crate::action::{StallReason, Step};
use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::{HandleId, TaskId, PAGE_SIZE};
use crate::page_cache::{MAX_FILE_PAGES, PG_LOCKED, PG_READING, PG_WRITEBACK};
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
        self.begin(task, Op::Invalidate { file, first, end })?;
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
        let runs: Vec<_> = self.cache.files[file.index()]
            .runs_over(first, end)
            .collect();
        let mut busy = false;
        for (start, run) in runs {
            if run.flags & (PG_WRITEBACK | PG_READING | PG_LOCKED) != 0 {
                busy = true;
            } else {
                self.cache.remove_pages(
                    file,
                    start.max(first),
                    (start + run.len).min(end),
                    &mut self.actions,
                );
            }
        }
        if busy {
            // I/O in flight in the range, or a copy into a page there: wait
            // for it, then drop the pages.
            let reason = if self.cache.any_locked(file, first, end) {
                StallReason::PageLocked
            } else {
                StallReason::Sync
            };
            return Ok(self.wait_for(now, task, reason, WaitKey::FileIo(file)));
        }
        // The backing file is about to change: the next sync flushes it.
        self.mark_unsynced(file);
        self.finish(task, Ok(Step::Done))
    }
}
