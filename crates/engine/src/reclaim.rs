//! Making room in the cache budget: CLOCK over clean pages; when too few
//! are clean, ask the flusher to write (reason VMSCAN) and let the caller
//! wait, bounded, for pages to come clean.

use crate::action::Action;
use crate::engine::Engine;
use crate::flusher::WbReason;
use crate::ids::{FileId, PageIndex};
use crate::page_cache::{Page, PG_DIRTY, PG_IN_LRU, PG_READING, PG_REFERENCED, PG_WRITEBACK};
use crate::time::Instant;

/// Reclaim at least this many pages at a time, so allocation does not run
/// the clock hand for every page.
pub const RECLAIM_BATCH: u64 = 32;

impl Engine {
    /// Frees up to `want` clean pages. Returns how many were freed.
    pub(crate) fn shrink(&mut self, want: u64) -> u64 {
        let mut freed = 0;
        // Every entry is looked at at most twice (once more after its second chance).
        let mut budget = 2 * self.reclaim.len() as u64;
        while freed < want && budget > 0 {
            budget -= 1;
            let Some((file, page)) = self.reclaim.pop() else {
                break;
            };
            let Some(frame) = self.page_frame(file, page) else {
                continue;
            };
            let noted = self.take_frame_referenced(frame);
            let f = &mut self.files[file.index()];
            let Some(flags) = f.flags_mut(page) else {
                continue;
            };
            if noted {
                *flags |= PG_REFERENCED;
            }
            if *flags & (PG_DIRTY | PG_WRITEBACK | PG_READING) != 0 {
                // Not reclaimable now; it is queued again when it comes clean.
                *flags &= !PG_IN_LRU;
                continue;
            }
            if *flags & PG_REFERENCED != 0 {
                *flags &= !PG_REFERENCED;
                self.reclaim.push_back_raw(file, page);
                continue;
            }
            self.remove_page(file, page);
            freed += 1;
        }
        self.stats.reclaimed_pages += freed;
        freed
    }

    /// Ensures room for `pages` more cached pages. On failure, kicks
    /// writeback for reclaim; the caller must wait (reason Memory).
    pub(crate) fn reserve(&mut self, now: Instant, pages: u64) -> bool {
        assert!(pages <= self.memory_pages);
        let free = self.memory_pages - self.nr_cached;
        if free >= pages {
            return true;
        }
        let want = (pages - free).max(RECLAIM_BATCH);
        self.shrink(want);
        if self.memory_pages - self.nr_cached >= pages {
            return true;
        }
        // Too few clean pages: have the dirty ones written (Linux's
        // wakeup_flusher_threads(WB_REASON_VMSCAN)).
        for w in 0..self.wbs.len() {
            if self.wbs[w].dirty > 0 {
                self.wbs[w].flusher.start_all(WbReason::Vmscan);
                let device = self.wbs[w].device;
                self.pump(now, device);
            }
        }
        false
    }

    /// Inserts a page into the cache; room must have been reserved. A page
    /// that will not be read from the device gets a zeroed frame, unless
    /// `overwritten`: a write covers the whole page and its data is copied
    /// in before anything else can see the page (see `Action::ZeroFrame`).
    pub(crate) fn insert_page(
        &mut self,
        file: FileId,
        page: PageIndex,
        flags: u8,
        overwritten: bool,
    ) {
        assert!(self.nr_cached < self.memory_pages, "cache over budget");
        let frame = self.frames.alloc();
        // A note for the frame's last page is not one for this page.
        self.take_frame_referenced(frame);
        // Frames are only handed out below the budget, so a runtime's frame
        // table of `memory_pages` entries always suffices.
        assert!(
            (frame as u64) < self.memory_pages,
            "frame beyond the budget"
        );
        let old = self.files[file.index()]
            .pages
            .insert(page, Page { flags, frame });
        assert!(old.is_none(), "page inserted twice");
        self.nr_cached += 1;
        if flags & PG_READING == 0 && !overwritten {
            self.actions.push_back(Action::ZeroFrame(frame));
        }
    }

    /// Drops a page from the cache and frees its frame.
    pub(crate) fn remove_page(&mut self, file: FileId, page: PageIndex) {
        let removed = self.files[file.index()]
            .pages
            .remove(&page)
            .expect("page is cached");
        self.frames.free(removed.frame);
        self.nr_cached -= 1;
        self.log_unmapped(file, page);
    }

    /// A page became clean: it is reclaimable.
    pub(crate) fn page_clean(&mut self, file: FileId, page: PageIndex) {
        if let Some(flags) = self.files[file.index()].flags_mut(page) {
            self.reclaim.push(file, page, flags);
        }
    }
}
