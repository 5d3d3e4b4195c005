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

    /// Accounts a cached read that a runtime served from a page index of
    /// its own, without calling `read` (see `report_unmapped`): marks the
    /// pages `first..end` that are still cached referenced, as `read`
    /// would have, and moves the task's readahead position. Runtimes may
    /// batch these notes (as Linux batches folio references per CPU), so a
    /// note can arrive after its pages have gone; those are skipped.
    pub fn note_cached_read(
        &mut self,
        task: TaskId,
        file: FileId,
        first: PageIndex,
        end: PageIndex,
    ) -> Result<(), EngineError> {
        let t = self
            .tasks
            .get_mut(task.index())
            .ok_or(EngineError::BadTask(task))?;
        let f = self
            .files
            .get_mut(file.index())
            .ok_or(EngineError::BadFile(file))?;
        if first >= end {
            return Ok(());
        }
        for (_, page) in f.pages.range_mut(first..end) {
            if page.flags & PG_READING == 0 {
                page.flags |= PG_REFERENCED;
            }
        }
        t.last_read = Some((file, end));
        Ok(())
    }

    /// Marks the pages now in `frames` referenced, as reads of them would
    /// have (for runtimes that serve cached reads from an index of their
    /// own): a bit per frame, which reclaim reads with the page's flag, so
    /// a note costs no page-table search. A note that arrives after its
    /// frame went to another page only gives that page a second chance.
    /// Frames beyond the budget are ignored.
    pub fn note_referenced_frames(&mut self, frames: &[u32]) {
        let words = (self.memory_pages as usize).div_ceil(64);
        if self.frame_referenced.len() < words {
            self.frame_referenced.resize(words, 0);
        }
        for &frame in frames {
            if (frame as u64) < self.memory_pages {
                self.frame_referenced[frame as usize / 64] |= 1 << (frame % 64);
            }
        }
    }

    /// Takes the frame's referenced note, if any.
    pub(crate) fn take_frame_referenced(&mut self, frame: u32) -> bool {
        let Some(word) = self.frame_referenced.get_mut(frame as usize / 64) else {
            return false;
        };
        let bit = 1u64 << (frame % 64);
        let was = *word & bit != 0;
        *word &= !bit;
        was
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
            self.insert_page(file, q, PG_READING, false);
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
