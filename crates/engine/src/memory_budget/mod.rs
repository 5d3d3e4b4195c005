//! The cache budget: where it starts, what moves it, and what it is now.
//!
//! - Start. A runtime that picks the budget for the user (the mount does)
//!   takes it from where the process runs ([`start_budget`](start::start_budget)):
//!   [`LIMIT_SHARE_PERCENT`](start::LIMIT_SHARE_PERCENT) of the tightest cgroup limit on the way up
//!   (leaving at least [`LIMIT_HEADROOM_MIN_BYTES`](start::LIMIT_HEADROOM_MIN_BYTES)
//!   for the process's own
//!   memory and the others in the cgroup), and at most
//!   [`MEM_AVAILABLE_SHARE_PERCENT`](start::MEM_AVAILABLE_SHARE_PERCENT) of MemAvailable. The runtime reserves
//!   that many frames; the budget never grows past them.
//! - The `memory` knob sets the budget now and the ceiling; `memory_min`
//!   the floor (control.rs).
//! - A runtime that follows memory pressure passes samples of the memory
//!   where it runs (`note_memory_sample`, the next one due after
//!   `memory_sample_interval_ns`); the policy
//!   (memory_pressure/) moves the budget between floor and ceiling, and
//!   the change is applied as a lowered or raised knob is: over a lowered
//!   budget clean pages go at once, oldest first (page_cache/hand.rs, `shrink`),
//!   and dirty ones are written back (reason vmscan) and go as they come
//!   clean; the dirty thresholds follow the budget.
//! - The runtime gives freed frames' memory back to the system and says
//!   how much (`note_memory_given_back`), for the stats.
//! - Room within the budget (`reserve`): the page cache's hand frees clean
//!   pages (page_cache/hand.rs); when too few are clean, the flusher is
//!   asked to write (reason VMSCAN, Linux's wakeup_flusher_threads) and
//!   the caller waits, bounded, for pages to come clean.

pub(crate) mod start;
pub(crate) mod stats;

use crate::action::WbReason;
use crate::dirty_limits::domain_dirty_limits;
use crate::engine::Engine;
use crate::ids::{DeviceId, PAGE_SIZE};
use crate::memory_budget::stats::MemoryBudgetStats;
use crate::memory_pressure::sample::MemorySample;
use crate::memory_pressure::{CacheMemory, MemoryPressure};
use crate::page_cache::RECLAIM_BATCH;
use crate::time::Instant;

impl Engine {
    /// Sets the budget now to `pages` (within the frames): the dirty
    /// thresholds follow; over it clean pages go at once and dirty ones
    /// are written back (reason vmscan) and go as they come clean; a
    /// raised budget wakes whoever waits for memory.
    pub(crate) fn set_budget_pages(&mut self, pages: u64) {
        assert!(pages <= self.cache.frame_pages, "budget past the frames");
        assert!(pages > 0, "an empty budget");
        self.cache.memory_pages = pages;
        self.stats.memory_pages = pages;
        self.dom.thresh = domain_dirty_limits(&self.config, self.cache.memory_pages);
        // The hard limit follows a raised threshold at once and a lowered one slowly.
        self.dom.dirty_limit = self.dom.dirty_limit.max(self.dom.thresh.thresh);
        self.trim_to_budget();
        if self.cache.free_pages() > 0 {
            self.tasks
                .wake(crate::task::WaitKey::Memory, &mut self.actions);
        }
    }

    /// A sample of the memory where the cache runs, taken at `now`: the
    /// pressure policy (memory_pressure/) may move the budget between
    /// `memory_min` and `memory` (and each cgroup limit's share). Call it
    /// about ten times a second; drain the actions after (writeback of
    /// dirty pages over a lowered budget starts here). Returns the budget
    /// in pages if it changed.
    pub fn note_memory_sample(&mut self, now: Instant, sample: &MemorySample) -> Option<u64> {
        let cache = CacheMemory {
            used_bytes: (self.cache.nr_cached + self.cache.nr_snapshot) * PAGE_SIZE,
            budget_bytes: self.cache.memory_pages * PAGE_SIZE,
            ceiling_bytes: self.ceiling_pages() * PAGE_SIZE,
            floor_bytes: self.config.memory_min_bytes,
        };
        let policy = self.memory_pressure.get_or_insert_with(MemoryPressure::new);
        let change = policy.decide(now, sample, cache);
        self.memory_stats.view = policy.view();
        let change = change?;
        let pages = (change.budget_bytes / PAGE_SIZE).clamp(1, self.cache.frame_pages);
        let before = self.cache.memory_pages;
        if pages == before {
            return None;
        }
        let s = &mut self.memory_stats;
        if pages < before {
            s.shrinks += 1;
            s.shrunk_pages += before - pages;
        } else {
            s.grows += 1;
            s.grown_pages += pages - before;
        }
        s.reason = change.reason;
        self.set_budget_pages(pages);
        if self.cache.over_budget {
            for d in 0..self.devices.len() {
                self.pump(now, DeviceId(d as u32));
            }
        }
        Some(pages)
    }

    /// How long a runtime following memory pressure waits before its
    /// next sample (memory_pressure/: shorter near the reserve).
    pub fn memory_sample_interval_ns(&self) -> u64 {
        self.memory_pressure
            .as_ref()
            .map_or(crate::memory_pressure::SAMPLE_INTERVAL_NS, |p| {
                p.sample_interval_ns()
            })
    }

    /// The runtime gave the memory of `pages` free frames back to the
    /// system.
    pub fn note_memory_given_back(&mut self, pages: u64) {
        self.memory_stats.given_back_pages += pages;
    }

    /// The most the budget may be: the `memory` knob, within the frames.
    pub(crate) fn ceiling_pages(&self) -> u64 {
        (self.config.memory_bytes / PAGE_SIZE).min(self.cache.frame_pages)
    }

    /// The budget's figures now.
    pub(crate) fn memory_budget_stats(&self) -> MemoryBudgetStats {
        let ceiling = self.ceiling_pages();
        MemoryBudgetStats {
            follows_pressure: self.memory_pressure.is_some(),
            ceiling_pages: ceiling,
            floor_pages: (self.config.memory_min_bytes / PAGE_SIZE).min(ceiling),
            ..self.memory_stats
        }
    }

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
