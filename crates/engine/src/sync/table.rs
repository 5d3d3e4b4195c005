//! The fsync and sync operations in progress: what each tagged, where
//! its writing is, and what it waits for.

use crate::action::WbReason;
use crate::ids::{DeviceId, FileId, HandleId, IoId, PageIndex};
use crate::page_cache::{CachedFile, PG_DIRTY};
use crate::time::Instant;
use std::collections::BTreeMap;

/// The fsync and sync operations in progress, by id.
#[derive(Debug)]
pub(crate) struct SyncTable {
    pub ops: BTreeMap<u64, SyncOp>,
    pub next_id: u64,
}

impl Default for SyncTable {
    fn default() -> SyncTable {
        SyncTable {
            ops: BTreeMap::new(),
            next_id: 1,
        }
    }
}

impl SyncTable {
    /// Whether a sync in progress names `file` (its id may not be reused).
    pub fn names(&self, file: FileId) -> bool {
        self.ops
            .values()
            .any(|op| op.files.iter().any(|sf| sf.file == file))
    }
}

#[derive(Debug)]
pub(crate) struct SyncFile {
    pub file: FileId,
    /// Pages dirty at the start, as ranges in page order; pages before
    /// `ranges[range]` and before `pos` are handled.
    pub ranges: Vec<(PageIndex, PageIndex)>,
    pub range: usize,
    pub pos: PageIndex,
    pub err_seq_start: u64,
}

impl SyncFile {
    pub(super) fn new(file: FileId, f: &CachedFile) -> SyncFile {
        SyncFile {
            file,
            ranges: f.dirty_ranges(),
            range: 0,
            pos: 0,
            err_seq_start: f.err_seq,
        }
    }

    /// Only the pages of `first..end` that are dirty now.
    pub(super) fn new_range(
        file: FileId,
        f: &CachedFile,
        first: PageIndex,
        end: PageIndex,
    ) -> SyncFile {
        let mut sf = SyncFile::new(file, f);
        sf.ranges = sf
            .ranges
            .iter()
            .map(|&(a, b)| (a.max(first), b.min(end)))
            .filter(|&(a, b)| a < b)
            .collect();
        sf
    }

    /// The first tagged page that is still dirty, as (range, page).
    /// Tagged pages that are no longer dirty were written by someone
    /// else, and the barrier makes us wait for that write.
    pub(super) fn first_dirty(&self, f: &CachedFile) -> Option<(usize, PageIndex)> {
        let (mut range, mut pos) = (self.range, self.pos);
        while let Some(&(first, end)) = self.ranges.get(range) {
            pos = pos.max(first);
            if pos >= end {
                range += 1;
                continue;
            }
            match f.run_from(pos) {
                Some((start, run)) if start <= pos && run.flags & PG_DIRTY != 0 => {
                    return Some((range, pos));
                }
                Some((start, run)) if start <= pos => pos = start + run.len,
                Some((start, _)) => pos = start,
                None => pos = end,
            }
        }
        None
    }

    /// Skips tagged pages that are no longer dirty; returns the first that is.
    pub(super) fn skip_clean(&mut self, f: &CachedFile) -> Option<PageIndex> {
        match self.first_dirty(f) {
            Some((range, pos)) => {
                (self.range, self.pos) = (range, pos);
                Some(pos)
            }
            None => {
                self.range = self.ranges.len();
                None
            }
        }
    }
}

#[derive(Debug)]
pub(crate) struct SyncOp {
    pub handle: Option<HandleId>,
    pub files: Vec<SyncFile>,
    /// Set once all tagged pages are issued: wait for writes up to this id.
    pub barrier: Option<IoId>,
    /// Flush metadata too (fsync rather than fdatasync).
    pub metadata: bool,
    /// Set once the writes are done and the flushes asked for.
    pub flushes_asked: bool,
    pub flushes_left: u32,
    pub flush_error: Option<crate::action::IoErrorKind>,
    /// Why the writes are made: `Sync` for fsync and sync (integrity,
    /// REQ_SYNC), `Dontcache` for an uncached write's own submission.
    pub reason: WbReason,
    /// Done once every page is submitted (Linux's WB_SYNC_NONE
    /// filemap_fdatawrite_range): no wait for completion, no flush, and
    /// pages already under writeback are skipped rather than waited for.
    pub issue_only: bool,
    /// Done once every write has landed, without a flush (Linux's
    /// filemap_write_and_wait): what a crash of the process would lose is
    /// then on the device (`write_back_file`).
    pub no_flush: bool,
    /// A commit (an fsync of one file that tagged at most
    /// `COMMIT_WRITE_MAX_PAGES`): its device and when it began; wbt hears
    /// how long it took once its flush is done (durability/).
    pub commit: Option<(DeviceId, Instant)>,
}

impl SyncOp {
    /// Whether this is a commit: an fsync or sync that tagged at most
    /// `COMMIT_WRITE_MAX_PAGES` in all (wbt.rs). Fixed for the op's life:
    /// its ranges are set when it begins.
    pub(super) fn is_commit(&self) -> bool {
        self.reason == WbReason::Sync
            && self.tagged_at_most(crate::wbt::COMMIT_WRITE_MAX_PAGES as u64)
    }

    /// Whether the op tagged at most `limit` pages in all (looks at no
    /// more than `limit + 1` ranges: every range holds a page).
    pub(super) fn tagged_at_most(&self, limit: u64) -> bool {
        let mut pages = 0;
        for &(first, end) in self.files.iter().flat_map(|sf| sf.ranges.iter()) {
            pages += end - first;
            if pages > limit {
                return false;
            }
        }
        true
    }
}
