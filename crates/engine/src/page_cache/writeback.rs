//! Pages leaving dirty for under writeback (the flusher's and a sync's
//! write-backs, dispatch/).

use super::{PageCache, PG_DIRTY, PG_WRITEBACK};
use crate::ids::{FileId, PageIndex};

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
