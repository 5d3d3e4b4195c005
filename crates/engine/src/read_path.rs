//! The read path: cached pages are copied out; a miss reads from the
//! device, with readahead for sequential readers.

use crate::action::{StallReason, Step};
use crate::engine::{Engine, Op, WaitKey};
use crate::error::EngineError;
use crate::ids::{FileId, HandleId, PageIndex, TaskId, PAGE_SIZE};
use crate::page_cache::{PG_READING, PG_REFERENCED};
use crate::time::Instant;

impl Engine {
    /// Reads `len` bytes at `offset` (short at end of file).
    pub fn read(
        &mut self,
        now: Instant,
        task: TaskId,
        handle: HandleId,
        offset: u64,
        len: u64,
    ) -> Result<Step, EngineError> {
        self.handle(handle)?;
        Self::page_range(offset, len)?;
        let max = self.memory_pages / 4 * crate::ids::PAGE_SIZE;
        if len > max {
            return Err(EngineError::ReadTooLarge { len, max });
        }
        self.begin(
            task,
            Op::Read {
                handle,
                offset,
                len,
            },
        )?;
        self.continue_read(now, task)
    }

    /// The cached-read fast path: if every page of the range (up to the end
    /// of the file) is cached and valid, counts the read as `read` would
    /// (pages referenced, the task's read position for readahead), puts the
    /// pages' frames in `frames` in order and returns true; the caller
    /// copies. Otherwise returns false: use `read`.
    pub fn read_hit(
        &mut self,
        task: TaskId,
        handle: HandleId,
        offset: u64,
        len: u64,
        frames: &mut Vec<u32>,
    ) -> Result<bool, EngineError> {
        let file = self.handle(handle)?.file;
        Self::page_range(offset, len)?;
        if self
            .tasks
            .get(task.index())
            .ok_or(EngineError::BadTask(task))?
            .op
            != Op::Idle
        {
            return Err(EngineError::Busy(task));
        }
        frames.clear();
        let f = &mut self.files[file.index()];
        let end = (offset + len).min(f.size);
        if offset >= end {
            return Ok(true);
        }
        let (first, last) = (offset / PAGE_SIZE, end.div_ceil(PAGE_SIZE));
        // One pass: marking pages referenced before knowing all are there is
        // harmless (the slow path would mark them too).
        for (&p, page) in f.pages.range_mut(first..last) {
            if p != first + frames.len() as u64 || page.flags & PG_READING != 0 {
                return Ok(false);
            }
            page.flags |= PG_REFERENCED;
            frames.push(page.frame);
        }
        if frames.len() as u64 != last - first {
            return Ok(false);
        }
        self.tasks[task.index()].last_read = Some((file, last));
        Ok(true)
    }

    pub(crate) fn continue_read(
        &mut self,
        now: Instant,
        task: TaskId,
    ) -> Result<Step, EngineError> {
        let Op::Read {
            handle,
            offset,
            len,
            ..
        } = self.tasks[task.index()].op.clone()
        else {
            unreachable!("continue_read on a task that is not reading");
        };
        let file = self.handle(handle)?.file;
        let end = (offset + len).min(self.files[file.index()].size);
        if offset >= end {
            return self.finish(task, Ok(Step::Done));
        }
        let (first, last) = (offset / PAGE_SIZE, end.div_ceil(PAGE_SIZE));
        let mut missing = None;
        for p in first..last {
            match self.files[file.index()].flags_mut(p) {
                None => {
                    missing = Some(p);
                    break;
                }
                Some(flags) if *flags & PG_READING != 0 => {
                    return Ok(self.wait_for(
                        now,
                        task,
                        StallReason::ReadIo,
                        WaitKey::FileIo(file),
                    ));
                }
                Some(flags) => *flags |= PG_REFERENCED,
            }
        }
        let Some(p) = missing else {
            self.tasks[task.index()].last_read = Some((file, last));
            return self.finish(task, Ok(Step::Done));
        };
        if let Some(e) = self.files[file.index()].read_error.take() {
            return self.finish(task, Err(EngineError::Read(e)));
        }
        let want = self.readahead_pages(task, file, first, p, last);
        if !self.reserve(now, want) && !self.reserve(now, 1) {
            return Ok(self.wait_for(now, task, StallReason::Memory, WaitKey::Memory));
        }
        let room = self.memory_pages - self.nr_cached;
        let pages = self.absent_run(file, p, want.min(room));
        for q in p..p + pages {
            self.insert_page(file, q, PG_READING);
        }
        self.submit_read(now, file, p, pages);
        Ok(self.wait_for(now, task, StallReason::ReadIo, WaitKey::FileIo(file)))
    }

    /// How many pages to read at a miss on page `p`: the rest of the request,
    /// or the readahead window for a sequential reader (one that starts at
    /// the beginning of the file or where it last stopped).
    fn readahead_pages(
        &self,
        task: TaskId,
        file: FileId,
        first: PageIndex,
        p: PageIndex,
        last: PageIndex,
    ) -> u64 {
        let f = &self.files[file.index()];
        let dev = &self.devices[f.device.index()].config;
        let sequential = first == 0 || self.tasks[task.index()].last_read == Some((file, first));
        let mut want = last - p;
        if sequential {
            want = want.max(dev.read_ahead_kb as u64 / 4);
        }
        let file_pages = f.size.div_ceil(PAGE_SIZE);
        want.min(file_pages - p)
            .min(dev.max_sectors_kb as u64 / 4)
            .max(1)
    }

    /// Length of the run of uncached pages from `start`, at most `max`.
    fn absent_run(&self, file: FileId, start: PageIndex, max: u64) -> u64 {
        let f = &self.files[file.index()];
        let mut n = 0;
        while n < max && f.flags(start + n).is_none() {
            n += 1;
        }
        n.max(1)
    }
}
