//! Direct writes (O_DIRECT semantics): the data goes to the device without
//! the cache, as a baseline for buffered and uncached writes.
//!
//! 1. Cached pages of the range are written back and waited for, then
//!    dropped (Linux's filemap_write_and_wait_range and
//!    invalidate_inode_pages2_range), so the cache never holds stale data.
//! 2. The range goes to the device in requests of at most max_sectors_kb,
//!    each needing only a tag: O_DIRECT writes are REQ_SYNC | REQ_IDLE,
//!    which wbt does not throttle, and no dirty accounting applies.
//! 3. The writer waits (stall `direct_io`) until all of them complete; the
//!    file grows to the end of the write.
//!
//! Only the simulator issues these: the real runtime takes its data from
//! the cache's frames, and a direct request has none (it fails such a
//! request instead of writing anything).

pub(crate) mod phase;

use crate::action::{IoDir, IoErrorKind, IoRequest, StallReason, Step};
use crate::direct::phase::DirectPhase;
use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::{FileId, HandleId, PageIndex, TaskId, PAGE_SIZE};
use crate::page_cache::{PG_DIRTY, PG_READING, PG_WRITEBACK};
use crate::task::{Op, WaitKey};
use crate::time::Instant;

impl Engine {
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

    /// A direct write request finished: the writer is woken once all have.
    pub(crate) fn complete_direct(&mut self, req: &IoRequest, result: Result<(), IoErrorKind>) {
        let dev = &mut self.devices[req.device.index()];
        dev.stats.pages_written += req.pages as u64;
        let Some(task) = self.io.direct_ios.remove(&req.id) else {
            return;
        };
        if let Op::DirectWrite {
            phase: DirectPhase::InFlight { left, failed },
            ..
        } = &mut self.tasks[task.index()].op
        {
            *left -= 1;
            *failed = failed.or(result.err());
            if *left == 0 {
                self.tasks.wake(WaitKey::Direct(task), &mut self.actions);
            }
        }
    }

    fn set_direct_phase(&mut self, task: TaskId, next: DirectPhase) {
        if let Op::DirectWrite { phase, .. } = &mut self.tasks[task.index()].op {
            *phase = next;
        }
    }
}
