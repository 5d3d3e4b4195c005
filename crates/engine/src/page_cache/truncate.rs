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
//!   caller writes back first what it means to keep.
//! - Before a direct write (invalidate_inode_pages2_range): dirty pages
//!   of the range are written back, not discarded, and the clean ones
//!   dropped once none is under I/O.
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

    /// Whether any of pages `first..end` of `file` is dirty.
    pub fn dirty_over(&self, file: FileId, first: PageIndex, end: PageIndex) -> bool {
        self.files[file.index()].any_flags(first, end, PG_DIRTY)
    }
}
