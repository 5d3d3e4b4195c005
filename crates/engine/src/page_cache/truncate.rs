//! Linux's mm/truncate.c page rules: which of a file's pages a change of
//! its backing file drops, and what holds them.
//!
//! - Truncation (truncate_inode_pages): pages past the new end go, dirty
//!   ones without being written; pages under I/O are waited for, and so
//!   is a now partial last page under writeback or locked (its tail is
//!   zeroed once the truncation returns, in the frame a write in flight
//!   may be reading, and its write must not land after the backing file
//!   is cut).
//! - Invalidation of a range (truncate_pagecache_range, for fallocate):
//!   the same within the range, partial pages at its ends included; the
//!   caller writes back first what it means to keep. Pages under I/O are
//!   waited for so that no write lands after the backing file changed and
//!   no read fills a page with what was there before.
//! - Before a direct write (invalidate_inode_pages2_range,
//!   `invalidate_for_direct`): dirty pages of the range are written back,
//!   not discarded, and the clean ones dropped once none is under I/O.
//!
//! A copy into a page (locked) holds it as I/O does; the wait is then for
//! the lock (stall `page_locked`), else for the I/O (stall `sync`).

use super::{PageCache, MAX_FILE_PAGES, PG_DIRTY, PG_LOCKED, PG_READING, PG_WRITEBACK};
use crate::action::{Action, StallReason};
use crate::ids::{FileId, PageIndex, PAGE_SIZE};
use crate::time::Instant;
use std::collections::VecDeque;

impl PageCache {
    /// Makes the dirty pages `first..end` of `file` clean without writing
    /// them (their data is gone). Returns when the file was first dirtied
    /// if it has no dirty page left (its place in its context's list of
    /// dirty files goes).
    pub fn discard_dirty(
        &mut self,
        file: FileId,
        first: PageIndex,
        end: PageIndex,
    ) -> Option<Instant> {
        let f = &mut self.files[file.index()];
        let before = f.counts();
        f.update(first, end, |flags| flags & !PG_DIRTY);
        self.account(file, before);
        let f = &mut self.files[file.index()];
        let when = if f.counts().dirty == 0 {
            f.dirtied_when.take()
        } else {
            None
        };
        self.note_clean(file, first, end);
        when
    }

    /// Drops `file`'s pages past a new length of `len` bytes that no I/O
    /// or copy holds (its dirty ones discarded first); the stall to wait
    /// in while some remain.
    pub fn truncate_pages(
        &mut self,
        file: FileId,
        len: u64,
        out: &mut VecDeque<Action>,
    ) -> Option<StallReason> {
        let first_gone = len.div_ceil(PAGE_SIZE);
        let mut busy = self.drop_unheld(file, (first_gone, MAX_FILE_PAGES), out);
        if !len.is_multiple_of(PAGE_SIZE) {
            busy |= self.files[file.index()]
                .run_at(len / PAGE_SIZE)
                .is_some_and(|(_, run)| run.flags & (PG_WRITEBACK | PG_LOCKED) != 0);
        }
        busy.then(|| self.held_by(file, len / PAGE_SIZE, MAX_FILE_PAGES))
    }

    /// Drops `file`'s pages `first..end` that no I/O or copy holds; the
    /// stall to wait in while some remain.
    pub fn invalidate_pages(
        &mut self,
        file: FileId,
        (first, end): (PageIndex, PageIndex),
        out: &mut VecDeque<Action>,
    ) -> Option<StallReason> {
        let busy = self.drop_unheld(file, (first, end), out);
        busy.then(|| self.held_by(file, first, end))
    }

    /// What holds pages of `first..end` the caller could not drop: a copy
    /// into one, else I/O.
    fn held_by(&self, file: FileId, first: PageIndex, end: PageIndex) -> StallReason {
        if self.any_locked(file, first, end) {
            StallReason::PageLocked
        } else {
            StallReason::Sync
        }
    }

    /// Whether any of pages `first..end` of `file` is under I/O (written
    /// back or read).
    pub fn io_over(&self, file: FileId, first: PageIndex, end: PageIndex) -> bool {
        self.files[file.index()].any_flags(first, end, PG_WRITEBACK | PG_READING)
    }

    /// Before a direct write (invalidate_inode_pages2_range): drops
    /// pages `first..end` of `file` when none is dirty or under I/O; else
    /// whether some are dirty (the caller writes them back, and waits).
    pub fn invalidate_for_direct(
        &mut self,
        file: FileId,
        (first, end): (PageIndex, PageIndex),
        out: &mut VecDeque<Action>,
    ) -> Option<bool> {
        let dirty = self.files[file.index()].any_flags(first, end, PG_DIRTY);
        if dirty || self.io_over(file, first, end) {
            return Some(dirty);
        }
        self.remove_pages(file, first, end, out);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_drops_what_no_io_holds() {
        let (mut cache, file) = super::super::one_file_cache();
        let mut out = VecDeque::new();
        // Pages 0..4 cached, 0..2 of them dirty; pages 4..6 being read.
        cache.insert_pages(file, 0, 4, 0, true, &mut out);
        cache.insert_pages(file, 4, 2, PG_READING, false, &mut out);
        let marks = cache.write_marks(false);
        cache.dirty_pages(Instant(5), file, (0, 2), marks);
        assert_eq!(cache.discard_dirty(file, 0, 2), Some(Instant(5)));
        assert_eq!((cache.nr_dirty, cache.nr_cached), (0, 6));
        // A length of 2 pages and a byte: page 3 goes, 4..6 are held.
        let held = cache.truncate_pages(file, 2 * PAGE_SIZE + 1, &mut out);
        assert_eq!(held, Some(StallReason::Sync));
        assert_eq!(cache.nr_cached, 5);
        // Before a direct write: 0..3 clean and idle go; 4..6 are read.
        assert_eq!(cache.invalidate_for_direct(file, (0, 3), &mut out), None);
        assert_eq!(cache.nr_cached, 2);
        let busy = cache.invalidate_for_direct(file, (4, 6), &mut out);
        assert_eq!(busy, Some(false));
        let held = cache.invalidate_pages(file, (0, MAX_FILE_PAGES), &mut out);
        assert_eq!(held, Some(StallReason::Sync));
    }
}
