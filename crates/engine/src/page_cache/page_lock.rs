//! Page locks: a writer's bytes copied outside the runtime's lock.
//!
//! A runtime that serialises engine calls behind one lock would hold it
//! for the whole copy of a large write, and every other thread's read,
//! write or completion would wait behind the memcpy. With
//! `WriteFlags::deferred_copy`, the engine prepares the write as usual
//! (frames found or inserted, pages dirtied and accounted, `CopyIn`
//! actions emitted) but also locks the pages (`PG_LOCKED`, Linux's folio
//! lock held from write_begin to write_end); the runtime releases its
//! lock, copies, and calls `write_end`, which unlocks them.
//!
//! While locked, a page's frame is the writer's: it is not written back
//! (a write request would carry a half-copied page and then call it
//! clean), not reclaimed or truncated away (its frame would go to another
//! page mid-copy), and not read through the engine (a new page's frame
//! holds whatever it held before). Those wait (`StallReason::PageLocked`)
//! or skip the page, and are woken or pumped at `write_end`. Another
//! writer may copy into a locked page at once: copies of one page are
//! ordered by the runtime's frame lock, as Linux's page lock orders them.
//!
//! The runtime calls `write_end` after carrying out the CopyIn actions of
//! each engine call, before anything else: a task never waits with pages
//! locked, so a page lock lasts one memcpy.

use super::{PageCache, PG_LOCKED};
use crate::ids::{FileId, PageIndex, TaskId};

/// Pages `first..end` of `file`, locked by `task`'s write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PageLock {
    pub task: TaskId,
    pub file: FileId,
    pub first: PageIndex,
    pub end: PageIndex,
}

impl PageCache {
    /// Locks pages `first..end` of `file` for `task`'s copy (see the
    /// module docs).
    pub fn lock_pages(&mut self, task: TaskId, file: FileId, first: PageIndex, end: PageIndex) {
        assert!(first < end, "locks at least one page");
        self.files[file.index()].update(first, end, |flags| flags | PG_LOCKED);
        self.page_locks.push(PageLock {
            task,
            file,
            first,
            end,
        });
    }

    /// Unlocks the pages `task` locked, but those another writer is
    /// copying into; returns its locks. A page truncation made clean
    /// meanwhile goes (back) to reclaim.
    pub fn unlock_pages(&mut self, task: TaskId) -> Vec<PageLock> {
        let (mine, others): (Vec<PageLock>, Vec<PageLock>) = std::mem::take(&mut self.page_locks)
            .into_iter()
            .partition(|l| l.task == task);
        self.page_locks = others;
        for lock in &mine {
            self.update_and_queue(lock.file, lock.first, lock.end, |flags| flags & !PG_LOCKED);
            let f = &mut self.files[lock.file.index()];
            for other in self.page_locks.iter().filter(|o| o.file == lock.file) {
                let (first, end) = (other.first.max(lock.first), other.end.min(lock.end));
                if first < end {
                    f.update(first, end, |flags| flags | PG_LOCKED);
                }
            }
        }
        mine
    }
    /// Whether any of pages `first..end` of `file` is locked.
    pub fn any_locked(&self, file: FileId, first: PageIndex, end: PageIndex) -> bool {
        !self.page_locks.is_empty()
            && self.files[file.index()]
                .runs_over(first, end)
                .any(|(_, run)| run.flags & PG_LOCKED != 0)
    }

    /// Checks that every lock's pages are cached and locked (the
    /// invariants' walk over the runs checks the converse,
    /// `check_locked_run`).
    pub fn check_page_locks(&self) {
        for lock in &self.page_locks {
            let f = &self.files[lock.file.index()];
            assert!(
                f.all_match(lock.first, lock.end, PG_LOCKED, 0),
                "locked pages {}..{} of {:?} are cached and locked",
                lock.first,
                lock.end,
                lock.file
            );
        }
    }

    /// Checks that pages `start..start + len` of `file`, locked, each
    /// belong to a lock (a run may join the pages of overlapping locks).
    pub fn check_locked_run(&self, file: FileId, start: PageIndex, len: u64) {
        let covered = (start..start + len).all(|p| {
            self.page_locks
                .iter()
                .any(|l| l.file == file && l.first <= p && p < l.end)
        });
        assert!(covered, "{file:?}: pages at {start} locked by nobody");
    }
}
