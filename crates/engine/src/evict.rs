//! Forgetting files nobody uses: a runtime that opened many files (a FUSE
//! server walks whole trees) would otherwise keep every one of them, and
//! its backing descriptor, for ever. A file may go once it has no open
//! handle and nothing dirty, under writeback or being read: what is left
//! is clean cached data, which reclaim would drop anyway.

use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::FileId;
use crate::page_cache::MAX_FILE_PAGES;

impl Engine {
    /// Whether `file` could be evicted now (see `evict_file`).
    pub fn file_idle(&self, file: FileId) -> bool {
        let Some(f) = self.files.get(file.index()) else {
            return false;
        };
        // Every cached page clean and valid: nothing dirty, under
        // writeback or being read.
        !f.evicted
            && f.open_handles == 0
            && f.inflight_writes.is_empty()
            && f.counts().cached == f.counts().reclaimable
    }

    /// Drops an idle file's cached pages and retires its id: it may not be
    /// opened again (a runtime adds the file anew if it is needed later).
    /// Busy files are an error and are left as they are.
    pub fn evict_file(&mut self, file: FileId) -> Result<(), EngineError> {
        if !self.file_idle(file) {
            return Err(EngineError::FileBusy(file));
        }
        self.remove_pages(file, 0, MAX_FILE_PAGES);
        let f = &mut self.files[file.index()];
        f.evicted = true;
        f.size = 0;
        f.read_error = None;
        Ok(())
    }
}
