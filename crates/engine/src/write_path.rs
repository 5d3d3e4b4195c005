//! The buffered write path: copy page by page into the cache (reading a
//! page first when only part of it is overwritten), mark pages dirty, and
//! let the dirty throttle decide whether the writer sleeps.

use crate::action::{StallReason, Step};
use crate::engine::{Engine, Op, WaitKey};
use crate::error::EngineError;
use crate::ids::{FileId, HandleId, PageIndex, TaskId, PAGE_SIZE};
use crate::page_cache::{PG_DIRTY, PG_READING, PG_REFERENCED, PG_WRITEBACK};
use crate::time::Instant;

/// Whether a page may be modified now.
pub(crate) enum PageReady {
    Ready,
    Wait(Step),
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
        self.handle(handle)?;
        Self::page_range(offset, len)?;
        let end = offset + len;
        self.begin(
            task,
            Op::Write {
                handle,
                pos: offset,
                end,
                throttle_again: false,
                wait_2007: None,
            },
        )?;
        self.continue_write(now, task)
    }

    pub(crate) fn continue_write(
        &mut self,
        now: Instant,
        task: TaskId,
    ) -> Result<Step, EngineError> {
        let Op::Write {
            handle,
            mut pos,
            end,
            throttle_again,
            wait_2007,
        } = self.tasks[task.index()].op.clone()
        else {
            unreachable!("continue_write on a task that is not writing");
        };
        let file = self.handle(handle)?.file;
        if wait_2007.is_some() {
            if let Some(step) = self.throttle_2007(now, task, file) {
                return Ok(step);
            }
        }
        if throttle_again {
            if let Some(step) = self.balance_dirty_pages(now, task, file) {
                return Ok(step);
            }
        }
        while pos < end {
            let page = pos / PAGE_SIZE;
            let page_end = end.min((page + 1) * PAGE_SIZE);
            let whole = pos % PAGE_SIZE == 0 && page_end - pos == PAGE_SIZE;
            if let PageReady::Wait(step) = self.prepare_page(now, task, file, page, whole) {
                return Ok(step);
            }
            self.dirty_page(now, task, file, page);
            pos = page_end;
            let f = &mut self.files[file.index()];
            f.size = f.size.max(pos);
            if let Op::Write { pos: p, .. } = &mut self.tasks[task.index()].op {
                *p = pos;
            }
            if let Some(step) = self.maybe_throttle(now, task, file) {
                return Ok(step);
            }
        }
        self.finish(task, Ok(Step::Done))
    }

    /// Makes sure `page` is in the cache and may be modified.
    fn prepare_page(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
        page: PageIndex,
        whole: bool,
    ) -> PageReady {
        let f = &self.files[file.index()];
        match f.flags(page) {
            None => {
                let on_disk = page * PAGE_SIZE < f.size;
                if !self.reserve(now, 1) {
                    return PageReady::Wait(self.wait_for(
                        now,
                        task,
                        StallReason::Memory,
                        WaitKey::Memory,
                    ));
                }
                if on_disk && !whole {
                    // Read-modify-write: the rest of the page must come from the device.
                    self.insert_page(file, page, PG_READING, false);
                    self.submit_read(now, file, page, 1);
                    return PageReady::Wait(self.wait_for(
                        now,
                        task,
                        StallReason::ReadIo,
                        WaitKey::FileIo(file),
                    ));
                }
                // A whole-page write needs no zeroed frame: its data is
                // copied over all of it first.
                self.insert_page(file, page, 0, whole);
                PageReady::Ready
            }
            Some(flags) if flags & PG_READING != 0 => PageReady::Wait(self.wait_for(
                now,
                task,
                StallReason::ReadIo,
                WaitKey::FileIo(file),
            )),
            Some(flags)
                if flags & PG_WRITEBACK != 0
                    && self.devices[f.device.index()].config.stable_writes
                        == crate::config::StableWrites::Wait =>
            {
                // The device checksums data in flight: wait for the write to finish.
                PageReady::Wait(self.wait_for(
                    now,
                    task,
                    StallReason::StablePage,
                    WaitKey::FileIo(file),
                ))
            }
            Some(_) => PageReady::Ready,
        }
    }

    /// Marks a cached page dirty and accounts it.
    fn dirty_page(&mut self, now: Instant, task: TaskId, file: FileId, page: PageIndex) {
        let f = &mut self.files[file.index()];
        let flags = f.flags_mut(page).expect("page prepared");
        let was_dirty = *flags & PG_DIRTY != 0;
        *flags |= PG_DIRTY | PG_REFERENCED;
        if was_dirty {
            return;
        }
        f.dirty.insert(page);
        let wb_id = f.wb;
        let newly_dirty_file = f.dirtied_when.is_none();
        if newly_dirty_file {
            f.dirtied_when = Some(now);
        }
        let wb = &mut self.wbs[wb_id.index()];
        if newly_dirty_file {
            wb.dirty_files.insert((now, file));
        }
        if !wb.has_io() {
            wb.bw.restart(now, wb.written, wb.dirtied);
        }
        wb.dirty += 1;
        wb.dirtied += 1;
        self.nr_dirty += 1;
        self.stats.dirtied_pages += 1;
        let t = &mut self.tasks[task.index()];
        t.dirty.nr_dirtied += 1;
        t.ratelimit_2007 += 1;
        self.note_peaks();
    }
}
