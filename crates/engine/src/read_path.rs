//! The read path: cached pages are copied out; a miss reads from the
//! device, with readahead for sequential readers.

use crate::action::{StallReason, Step};
use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::{FileId, HandleId, PageIndex, TaskId, PAGE_SIZE};
use crate::page_cache::{PG_DROPBEHIND, PG_LOCKED, PG_READING};
use crate::task::{Op, WaitKey};
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
        let file = self.handle(handle)?.file;
        Self::page_range(offset, len)?;
        let max = self.memory_pages / 4 * crate::ids::PAGE_SIZE;
        if len > max {
            return Err(EngineError::ReadTooLarge { len, max });
        }
        self.touch_file(file);
        self.readahead_before_read(now, task, file, offset, len);
        // Most reads hit one valid run: done at once, with no operation in
        // progress to keep (a busy or unknown task takes the full path,
        // whose `begin` reports it).
        let idle = self
            .tasks
            .get(task.index())
            .is_some_and(|t| t.op == Op::Idle);
        if idle {
            self.start_read_marks(task, file, offset);
            if self.read_from_one_run(task, file, offset, len) {
                return Ok(Step::Done);
            }
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

    /// Serves a read whose pages (up to the end of the file) lie in one
    /// valid run, or that starts at or past the end: marks the run
    /// referenced and takes an ordinary read's drop-behind mark off, as
    /// Linux does, and moves the task's readahead position. False: pages
    /// are missing or being read, take the full path.
    fn read_from_one_run(&mut self, task: TaskId, file: FileId, offset: u64, len: u64) -> bool {
        let f = &self.files[file.index()];
        let end = (offset + len).min(f.size);
        if offset >= end {
            return true;
        }
        let (first, last) = (offset / PAGE_SIZE, end.div_ceil(PAGE_SIZE));
        let Some((start, run)) = f.run_at(first) else {
            return false;
        };
        if start + run.len < last || run.flags & (PG_READING | PG_LOCKED) != 0 {
            return false;
        }
        self.mark_read(task, file, first, last);
        if run.flags & PG_DROPBEHIND != 0 {
            self.clear_dropbehind(file, first, last);
        }
        self.read_served(task, file, last);
        true
    }

    /// A read of `first..last` is served: the task's readahead position
    /// moves.
    fn read_served(&mut self, task: TaskId, file: FileId, last: PageIndex) {
        self.tasks[task.index()].last_read = Some((file, last));
    }

    /// Accounts a cached read that a runtime served from a page index of
    /// its own, without calling `read` (see `Action::Unmapped`): marks the
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
        if self.files.get(file.index()).is_none() {
            return Err(EngineError::BadFile(file));
        }
        let t = self
            .tasks
            .get_mut(task.index())
            .ok_or(EngineError::BadTask(task))?;
        if first >= end {
            return Ok(());
        }
        t.last_read = Some((file, end));
        self.mark_accessed(file, first, end);
        Ok(())
    }

    /// A read by `task` of `file` from byte `offset` begins: it will mark
    /// its pages accessed, except a first page the task's previous read of
    /// the file ended in (filemap_read marks a folio once for a reader
    /// going through it in small steps).
    fn start_read_marks(&mut self, task: TaskId, file: FileId, offset: u64) {
        let first = offset / PAGE_SIZE;
        let t = &mut self.tasks[task.index()];
        let same_page = t.last_read == Some((file, first + 1)) && !offset.is_multiple_of(PAGE_SIZE);
        t.read_marked = Some((file, first + same_page as u64));
    }

    /// The read in progress consumed valid pages `first..end`: marks those
    /// it has not marked yet.
    fn mark_read(&mut self, task: TaskId, file: FileId, first: PageIndex, end: PageIndex) {
        let t = &mut self.tasks[task.index()];
        let from = match t.read_marked {
            Some((f, p)) if f == file => p.max(first),
            _ => first,
        };
        if from >= end {
            return;
        }
        t.read_marked = Some((file, end));
        self.mark_accessed(file, from, end);
    }

    /// Marks the pages now in `frames` referenced, as reads of them would
    /// have (for runtimes that serve cached reads from an index of their
    /// own; see frame_notes.rs). Frames beyond the budget are ignored.
    pub fn note_referenced_frames(&mut self, frames: &[u32]) {
        self.frame_notes.note(frames);
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
        if self.read_from_one_run(task, file, offset, len) {
            return self.finish(task, Ok(Step::Done));
        }
        let end = (offset + len).min(self.files[file.index()].size);
        let (first, last) = (offset / PAGE_SIZE, end.div_ceil(PAGE_SIZE));
        let f = &self.files[file.index()];
        if f.run_at(first).is_none() {
            // A miss at the first page (a sequential reader past its
            // readahead): nothing cached to reference or wait for.
            return self.read_missing(now, task, file, first, first, last);
        }
        let missing = f.first_hole(first, last);
        let cached_end = missing.unwrap_or(last);
        let reading = f
            .runs_over(first, cached_end)
            .any(|(_, r)| r.flags & PG_READING != 0);
        self.clear_dropbehind(file, first, cached_end);
        if reading {
            return Ok(self.wait_for(now, task, StallReason::ReadIo, WaitKey::FileIo(file)));
        }
        if self.any_locked(file, first, cached_end) {
            // A writer is copying into a page: its frame may not hold the
            // page's data yet (page_lock.rs).
            return Ok(self.wait_for(now, task, StallReason::PageLocked, WaitKey::FileIo(file)));
        }
        self.mark_read(task, file, first, cached_end);
        let Some(p) = missing else {
            self.read_served(task, file, last);
            return self.finish(task, Ok(Step::Done));
        };
        self.read_missing(now, task, file, first, p, last)
    }

    /// Reads from the device the pages from `p`, the first uncached page
    /// of the task's read `first..last`, and waits for them.
    fn read_missing(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
        first: PageIndex,
        p: PageIndex,
        last: PageIndex,
    ) -> Result<Step, EngineError> {
        if let Some(e) = self.files[file.index()].read_error.take() {
            return self.finish(task, Err(EngineError::Read(e)));
        }
        let sequential = self.sequential_read(task, file, first);
        let want = self.readahead_pages(file, sequential, p, last);
        if sequential {
            // A readahead window (Linux marks a page of it): the stream
            // reads ahead asynchronously from now on.
            self.tasks[task.index()].ra_file = Some(file);
        }
        if !self.reserve(now, want) && !self.reserve(now, 1) {
            return Ok(self.wait_for(now, task, StallReason::Memory, WaitKey::Memory));
        }
        let room = self.free_pages();
        let pages = self.files[file.index()].hole_len(p, want.min(room)).max(1);
        self.insert_pages(file, p, pages, PG_READING, false);
        self.submit_read(now, file, p, pages);
        Ok(self.wait_for(now, task, StallReason::ReadIo, WaitKey::FileIo(file)))
    }

    /// How many pages to read at a miss on page `p`: the rest of the request,
    /// or the readahead window for a sequential reader (one that starts at
    /// the beginning of the file or where it last stopped).
    fn readahead_pages(
        &self,
        file: FileId,
        sequential: bool,
        p: PageIndex,
        last: PageIndex,
    ) -> u64 {
        let f = &self.files[file.index()];
        let dev = &self.devices[f.device.index()].config;
        let mut want = last - p;
        if sequential {
            want = want.max(dev.read_ahead_kb as u64 / 4);
        }
        let file_pages = f.size.div_ceil(PAGE_SIZE);
        want.min(file_pages - p).min(dev.max_request_pages()).max(1)
    }
}
