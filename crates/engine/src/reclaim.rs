//! Making room in the cache budget when the hand (page_cache/hand.rs)
//! cannot: too few pages are clean, so ask the flusher to write (reason
//! VMSCAN, Linux's wakeup_flusher_threads) and let the caller wait,
//! bounded, for pages to come clean; and bring the cache within a lowered
//! budget.

use crate::action::WbReason;
use crate::engine::Engine;
use crate::time::Instant;

/// Reclaim at least this many pages at a time, so allocation does not run
/// the clock hand for every page.
pub const RECLAIM_BATCH: u64 = 32;

impl Engine {
    /// Brings the cache within a lowered budget: frees clean pages now,
    /// and while that is not enough has the dirty ones written back
    /// (reason vmscan, as `reserve` does) and frees them as they come
    /// clean (`io_complete`, `handle_timeout`). Returns whether the cache
    /// is still over its budget.
    pub(crate) fn trim_to_budget(&mut self) -> bool {
        let used = self.cache.nr_cached + self.cache.nr_snapshot;
        if used > self.cache.memory_pages {
            self.cache
                .shrink(used - self.cache.memory_pages, &mut self.actions);
        }
        self.cache.over_budget =
            self.cache.nr_cached + self.cache.nr_snapshot > self.cache.memory_pages;
        if self.cache.over_budget {
            let pages = &self.cache.wb_pages;
            for (wb, _) in self.wbs.iter_mut().zip(pages).filter(|(_, p)| p.dirty > 0) {
                wb.flusher.start_all(WbReason::Vmscan);
            }
        }
        self.cache.over_budget
    }

    /// Ensures room for `pages` more cached pages. On failure, kicks
    /// writeback for reclaim; the caller must wait (reason Memory).
    pub(crate) fn reserve(&mut self, now: Instant, pages: u64) -> bool {
        let free = self.cache.free_pages();
        if free >= pages {
            return true;
        }
        let want = (pages - free).max(RECLAIM_BATCH);
        self.cache.shrink(want, &mut self.actions);
        if self.cache.free_pages() >= pages {
            return true;
        }
        // Too few clean pages: have the dirty ones written (Linux's
        // wakeup_flusher_threads(WB_REASON_VMSCAN)).
        for w in 0..self.wbs.len() {
            if self.cache.wb_pages[w].dirty > 0 {
                self.wbs[w].flusher.start_all(WbReason::Vmscan);
                let device = self.wbs[w].device;
                self.pump(now, device);
            }
        }
        false
    }
}
