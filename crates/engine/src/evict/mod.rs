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

pub(crate) mod state;

use crate::action::Action;
use crate::durability::state::FlushFor;
use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::FileId;
use crate::page_cache::MAX_FILE_PAGES;

impl Engine {
    /// Whether `file` could be evicted now (see `evict_file`).
    pub fn file_idle(&self, file: FileId) -> bool {
        let Some(f) = self.cache.files.get(file.index()) else {
            return false;
        };
        // Every cached page clean and valid: nothing dirty, under
        // writeback or being read.
        !f.evicted
            && f.open_handles == 0
            && f.inflight_writes.is_empty()
            && f.counts().cached == f.counts().reclaimable
    }

    /// Idle, and not unlinked (an unlinked file leaves through its
    /// device's backlog, backlog/) nor waiting for a cut of its backing
    /// file. False for an unknown id.
    fn evictable(&self, file: FileId) -> bool {
        self.file_idle(file)
            && self
                .cache
                .files
                .get(file.index())
                .is_some_and(|f| !f.unlinked && !f.cut_pending)
    }

    /// Sets the most files the engine keeps at once (None: no limit).
    pub fn set_max_files(&mut self, max_files: Option<usize>) {
        self.eviction.max_files = max_files.map(|n| n.max(1));
        self.eviction.skip_scans = 0;
    }

    /// Files known and not evicted.
    pub fn live_files(&self) -> usize {
        self.eviction.live
    }

    /// Notes a use of `file`: a stamp, so a read or write pays nothing
    /// more; the order is made only when files must go.
    pub(crate) fn touch_file(&mut self, file: FileId) {
        self.touch_file_times(file, 1);
    }

    /// `uses` uses of `file` one after another (as many `touch_file`).
    pub(crate) fn touch_file_times(&mut self, file: FileId, uses: u64) {
        self.eviction.next_use += uses;
        self.cache.files[file.index()].last_use = self.eviction.next_use;
    }

    /// `added` was added: over the limit, let idle files go (see the
    /// header), never `added` itself.
    pub(crate) fn make_room_for_files(&mut self, now: crate::time::Instant, added: FileId) {
        let Some(max) = self.eviction.max_files else {
            return;
        };
        if self.live_files() <= max {
            return;
        }
        if self.eviction.skip_scans > 0 {
            self.eviction.skip_scans -= 1;
            return;
        }
        let keep = max * 3 / 4;
        let excess = self.live_files().saturating_sub(keep);
        let mut idle: Vec<(u64, FileId)> = (0..self.cache.files.len() as u32)
            .map(FileId)
            .filter(|&f| f != added && self.evictable(f) && !self.eviction.flushing.contains(&f))
            .map(|f| (self.cache.files[f.index()].last_use, f))
            .collect();
        idle.sort_unstable();
        idle.truncate(excess);
        let idle: Vec<FileId> = idle.into_iter().map(|(_, f)| f).collect();
        if idle.len() < max / 8 {
            self.eviction.skip_scans = max / 8;
            self.write_back_closed_files(now, excess - idle.len());
        }
        for file in idle {
            self.let_go(file);
        }
    }

    /// Asks each writeback context's flusher for the dirty pages of up to
    /// `files` of its oldest dirty files that no handle has open (the
    /// flusher writes in first-dirtied order), so that they can go.
    fn write_back_closed_files(&mut self, now: crate::time::Instant, files: usize) {
        for w in 0..self.wbs.len() {
            let nr_pages: u64 = self.wbs[w]
                .dirty_files
                .iter()
                .map(|&(_, f)| &self.cache.files[f.index()])
                .filter(|f| f.open_handles == 0)
                .take(files)
                .map(|f| f.counts().dirty)
                .sum();
            if nr_pages == 0 {
                continue;
            }
            let wb = &mut self.wbs[w];
            wb.flusher.queue(crate::flusher::Work {
                reason: crate::action::WbReason::Vmscan,
                nr_pages,
                for_background: false,
                older_than: None,
            });
            let device = wb.device;
            self.pump(now, device);
        }
    }

    /// Lets `file` go as soon as it is idle and its writes are durable.
    /// Returns false if it is busy (nothing happens) or unknown.
    pub fn release_file(&mut self, file: FileId) -> bool {
        if !self.evictable(file) {
            return false;
        }
        self.let_go(file);
        true
    }

    /// Flushes an idle file if it is unsynced, else evicts it now.
    fn let_go(&mut self, file: FileId) {
        if self.cache.files[file.index()].unsynced.is_some() {
            if self.eviction.flushing.insert(file) {
                self.request_flush(file, FlushFor::Eviction, false);
            }
            return;
        }
        let evicted = self.evict_file(file);
        debug_assert!(evicted.is_ok(), "{evicted:?}");
    }

    /// A flush asked for by eviction was reported.
    pub(crate) fn eviction_flushed(&mut self, file: FileId) {
        self.eviction.flushing.remove(&file);
        if self.evictable(file) && self.cache.files[file.index()].unsynced.is_none() {
            let evicted = self.evict_file(file);
            debug_assert!(evicted.is_ok(), "{evicted:?}");
        }
    }

    /// Drops an idle file's cached pages and retires its id: it may not be
    /// opened again (a runtime adds the file anew if it is needed later),
    /// and the runtime gets `Action::Evict`. Busy files are an error and
    /// are left as they are. The file's unsynced changes, if any, are the
    /// caller's business (`release_file` flushes first).
    pub fn evict_file(&mut self, file: FileId) -> Result<(), EngineError> {
        if self.cache.files.get(file.index()).is_none_or(|f| f.evicted) {
            return Err(EngineError::BadFile(file));
        }
        if !self.file_idle(file) || self.cache.files[file.index()].unlinked {
            return Err(EngineError::FileBusy(file));
        }
        self.retire_file(file);
        Ok(())
    }

    /// Drops an idle file's pages and retires its id (see `evict_file`).
    pub(crate) fn retire_file(&mut self, file: FileId) {
        debug_assert!(self.file_idle(file));
        self.cache
            .remove_pages(file, 0, MAX_FILE_PAGES, &mut self.actions);
        let f = &mut self.cache.files[file.index()];
        f.evicted = true;
        f.size = 0;
        f.read_error = None;
        self.eviction.live -= 1;
        self.actions.push_back(Action::Evict { file });
        self.eviction.retiring.push(file);
    }

    /// An evicted file's id that a new file may take, if any: none named
    /// by a sync in progress. Drops the reclaim queue's entries for it.
    pub(crate) fn reusable_file_id(&mut self) -> Option<FileId> {
        let named = |id: FileId, engine: &Engine| {
            engine
                .syncs
                .ops
                .values()
                .any(|op| op.files.iter().any(|sf| sf.file == id))
        };
        let pos = self.eviction.free.iter().position(|&id| !named(id, self))?;
        let id = self.eviction.free.swap_remove(pos);
        debug_assert!(self.cache.files[id.index()].evicted);
        self.cache.inactive.retain(|&(file, _, _)| file != id);
        self.cache.active.retain(|&(file, _, _)| file != id);
        self.cache
            .workingset
            .forget(id, 0, crate::page_cache::MAX_FILE_PAGES);
        Some(id)
    }
}
