//! Pages leaving the cache, reported to a runtime that keeps a page index
//! of its own so that cached reads need not take the engine's lock (the
//! real runtime does; the simulator does not ask). Off unless asked for:
//! nobody would drain it.

use crate::engine::Engine;
use crate::ids::{FileId, PageIndex};

/// Most entries the log may hold between two drains, per page of memory:
/// one engine call removes at most every cached page once, and a runtime
/// drains after every call; more means a runtime forgot to drain.
const UNMAPPED_PER_PAGE_MAX: u64 = 4;

impl Engine {
    /// Starts reporting pages that leave the cache (see `take_unmapped`).
    pub fn report_unmapped(&mut self) {
        self.unmapped.get_or_insert_with(Vec::new);
    }

    /// Moves the pages that left the cache since the last call into `out`,
    /// in order, as (file, first page, end page). A runtime with a page index must drop them from it before
    /// it writes any frame: their frames may already belong to other pages.
    pub fn take_unmapped(&mut self, out: &mut Vec<(FileId, PageIndex, PageIndex)>) {
        if let Some(log) = &mut self.unmapped {
            out.append(log);
        }
    }

    pub(crate) fn log_unmapped(&mut self, file: FileId, first: PageIndex, end: PageIndex) {
        let limit = self.memory_pages * UNMAPPED_PER_PAGE_MAX + 64;
        if let Some(log) = &mut self.unmapped {
            assert!(
                (log.len() as u64) < limit,
                "unmapped-page log not drained ({} entries)",
                log.len()
            );
            log.push((file, first, end));
        }
    }
}
