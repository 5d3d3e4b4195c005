//! Letting go of files nobody uses: a runtime that meets many files (a FUSE
//! server walks whole trees) would otherwise keep every one of them, and
//! its backing descriptor, for ever.
//!
//! - A file is idle when it has no open handle and nothing dirty, under
//!   writeback or being read: what is left is clean cached data, which
//!   reclaim would drop anyway.
//! - A limit on live files (`set_max_files`; none by default). When adding
//!   a file passes it, idle files go, least recently used first (a use is
//!   an open, a close, a read or a write), until three quarters of the
//!   limit are left; when too few are idle, the next eighth of the limit's
//!   additions do not look again, so additions do not each scan every file,
//!   and the flusher is asked to write back the dirty pages of the oldest
//!   dirty files nobody has open (reason `vmscan`: reclaim of file slots),
//!   so that they are idle by the next look. Without that, a tree of small
//!   files written faster than they expire keeps every file (and its
//!   backing descriptor) live.
//! - A file going has its landed writes flushed first (`Action::MakeDurable`,
//!   durability/); once the flush is reported and the file is still idle
//!   and unchanged, its pages leave (`Action::Unmapped`) and
//!   `Action::Evict` tells the runtime to close its backing file. A failed
//!   flush keeps the file (still unsynced): the next sync reports it.
//! - `release_file` lets one file go at once, as soon as it is idle (a
//!   front end's unlinked file with no handle left).
//! - An evicted file's id is used again for a file added later, so the
//!   file table (and the runtime's tables beside it) stays as large as the
//!   most files live at once. Not before the runtime has taken every
//!   action queued when the file went (its `Evict` among them:
//!   `poll_action` came back empty), and not while an fsync or sync in
//!   progress still names it; the reclaim queue's leftover entries for the
//!   old file are dropped then.

//!
//! This file holds the stage's state and its rules (which files go);
//! the engine's side (flushing, dropping pages, the actions) is beside
//! `add_file` in engine.rs.

use crate::flusher::Work;
use crate::ids::FileId;
use crate::page_cache::CachedFile;
use std::collections::BTreeSet;

/// The eviction stage's state.
#[derive(Debug, Default)]
pub(crate) struct Eviction {
    /// Live files allowed at once; None: no limit.
    pub max_files: Option<usize>,
    /// Files known and not evicted.
    pub live: usize,
    next_use: u64,
    /// Additions left before looking for idle files again.
    skip_scans: usize,
    /// Files waiting for their flush before they go.
    pub flushing: BTreeSet<FileId>,
    /// Evicted files whose `Evict` the runtime may not have taken yet.
    retiring: Vec<FileId>,
    /// Evicted files whose ids may be used again.
    free: Vec<FileId>,
}

/// What a look for idle files found (`Eviction::scan`).
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// Idle files to let go, least recently used first.
    pub idle: Vec<FileId>,
    /// Too few were idle: how many of the oldest dirty files nobody has
    /// open to have written back, so that they are idle by the next look.
    pub write_back: usize,
}

impl Eviction {
    /// Sets the most files kept at once (None: no limit).
    pub fn set_max_files(&mut self, max_files: Option<usize>) {
        self.max_files = max_files.map(|n| n.max(1));
        self.skip_scans = 0;
    }

    /// Notes `uses` uses of `f` one after another: a stamp, so a read or
    /// write pays nothing more; the order is made only when files must go.
    pub fn touch(&mut self, f: &mut CachedFile, uses: u64) {
        self.next_use += uses;
        f.last_use = self.next_use;
    }

    /// A file was added, `added`: over the limit, the idle files to let go
    /// (never `added` itself) and what to write back (see the module
    /// docs).
    pub fn scan(&mut self, files: &[CachedFile], added: FileId) -> Scan {
        let Some(max) = self.max_files else {
            return Scan::default();
        };
        if self.live <= max {
            return Scan::default();
        }
        if self.skip_scans > 0 {
            self.skip_scans -= 1;
            return Scan::default();
        }
        let excess = self.live.saturating_sub(max * 3 / 4);
        let mut idle: Vec<(u64, FileId)> = (files.iter().enumerate())
            .map(|(i, f)| (f, FileId(i as u32)))
            .filter(|&(f, id)| id != added && f.evictable() && !self.flushing.contains(&id))
            .map(|(f, id)| (f.last_use, id))
            .collect();
        idle.sort_unstable();
        idle.truncate(excess);
        let mut scan = Scan {
            idle: idle.into_iter().map(|(_, f)| f).collect(),
            write_back: 0,
        };
        if scan.idle.len() < max / 8 {
            self.skip_scans = max / 8;
            scan.write_back = excess - scan.idle.len();
        }
        scan
    }

    /// `file` was evicted: its id waits until the runtime has taken its
    /// `Evict`.
    pub fn retired(&mut self, file: FileId) {
        self.live -= 1;
        self.retiring.push(file);
    }

    /// The runtime has taken every action queued so far: the retired ids
    /// may be used again.
    pub fn actions_taken(&mut self) {
        // Called after every drain of the actions: most often none.
        if !self.retiring.is_empty() {
            // Moved, not taken: the list keeps its room for the next ids.
            self.free.append(&mut self.retiring);
        }
    }

    /// An evicted file's id that a new file may take, if any: none for
    /// which `named` is true (a sync in progress names it).
    pub fn take_free(&mut self, named: impl Fn(FileId) -> bool) -> Option<FileId> {
        let pos = self.free.iter().position(|&id| !named(id))?;
        Some(self.free.swap_remove(pos))
    }
}

/// The flusher work that writes back the dirty pages of up to `files` of
/// the oldest dirty files (`dirty_files`, first-dirtied order) that no
/// handle has open, if they have any (reason `vmscan`).
pub(crate) fn closed_files_work(
    dirty_files: &BTreeSet<(crate::time::Instant, FileId)>,
    files: &[CachedFile],
    take: usize,
) -> Option<Work> {
    let nr_pages: u64 = dirty_files
        .iter()
        .map(|&(_, f)| &files[f.index()])
        .filter(|f| f.open_handles == 0)
        .take(take)
        .map(|f| f.counts().dirty)
        .sum();
    (nr_pages > 0).then_some(Work {
        reason: crate::action::WbReason::Vmscan,
        nr_pages,
        for_background: false,
        older_than: None,
    })
}
