//! Pages leaving dirty for under writeback (the flusher's and a sync's
//! write-backs, dispatch/), and the bytes their write carries
//! (`write_bytes`: never past the file's end).

use super::{PageCache, PG_DIRTY, PG_WRITEBACK};
use crate::ids::{FileId, PageIndex, PAGE_SIZE};

impl PageCache {
    /// Moves pages `start..start + pages` of `file`, all dirty and none
    /// under writeback, to under writeback, and moves the file's writeback
    /// index past them. Returns whether the file has no dirty page left.
    pub fn start_writeback(&mut self, file: FileId, start: PageIndex, pages: u64) -> bool {
        let f = &mut self.files[file.index()];
        let before = f.counts();
        f.update(start, start + pages, |flags| {
            assert!(flags & PG_DIRTY != 0 && flags & PG_WRITEBACK == 0);
            (flags & !PG_DIRTY) | PG_WRITEBACK
        });
        assert_eq!(
            before.dirty - f.counts().dirty,
            pages,
            "all pages were dirty"
        );
        f.writeback_index = start + pages;
        self.account(file, before);
        self.files[file.index()].counts().dirty == 0
    }
}

/// A planted bug for the simulator's oracle (wb-sim's tests/planted.rs):
/// writes carry whole pages, past the file's end.
const PLANTED_WHOLE_PAGES: bool = cfg!(feature = "planted-whole-pages");

/// The bytes a write of `pages` pages from `start` carries in a file of
/// `size` bytes: whole pages, but never past the file's end. A dirty page
/// lies below the end (truncation discards the pages past it), so the
/// write holds at least one byte; were that broken, the whole pages go, as
/// before this bound existed, rather than a write of nothing that would
/// mark dirty data clean.
pub(crate) fn write_bytes(size: u64, start: PageIndex, pages: u64) -> u64 {
    let whole = pages * PAGE_SIZE;
    let to_end = size.saturating_sub(start * PAGE_SIZE);
    debug_assert!(to_end > 0, "a dirty page past the file's end");
    if to_end == 0 || PLANTED_WHOLE_PAGES {
        whole
    } else {
        whole.min(to_end)
    }
}
