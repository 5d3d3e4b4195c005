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
//! - Room within the budget (`reserve`, dispatch/): the page cache's hand
//!   frees clean pages (page_cache/hand.rs); when too few are clean, the
//!   flusher is asked to write (reason VMSCAN, Linux's
//!   wakeup_flusher_threads) and the caller waits, bounded, for pages to
//!   come clean.
//!
//! This file holds the budget's own state (`MemoryBudget`: the pressure
//! policy once samples come, the figures); the engine applies a change
//! (`Engine::set_budget_pages`, completion.rs).

pub(crate) mod start;
pub(crate) mod stats;

use crate::config::Config;
use crate::ids::PAGE_SIZE;
use crate::memory_budget::stats::{BudgetReason, MemoryBudgetStats};
use crate::memory_pressure::sample::MemorySample;
use crate::memory_pressure::{CacheMemory, MemoryPressure, SAMPLE_INTERVAL_NS};
use crate::time::Instant;

/// The budget's state beside the page cache's `memory_pages`: the
/// pressure policy, once a runtime passes samples, and the figures.
#[derive(Debug, Default)]
pub(crate) struct MemoryBudget {
    pressure: Option<MemoryPressure>,
    stats: MemoryBudgetStats,
}

impl MemoryBudget {
    /// Whether a runtime passes samples (the budget follows pressure).
    pub fn follows_pressure(&self) -> bool {
        self.pressure.is_some()
    }

    /// The budget was set by hand (the `memory` or `memory_min` knob).
    pub fn set_by_knob(&mut self) {
        self.stats.reason = BudgetReason::Knob;
    }

    /// A sample of the memory where the cache runs, at `now`, with the
    /// cache's `used_pages` and `budget_pages`: the budget the policy
    /// moves it to (within 1..=`frame_pages`), if it changes.
    pub fn decide(
        &mut self,
        now: Instant,
        sample: &MemorySample,
        config: &Config,
        (used_pages, budget_pages, frame_pages): (u64, u64, u64),
    ) -> Option<u64> {
        let cache = CacheMemory {
            used_bytes: used_pages * PAGE_SIZE,
            budget_bytes: budget_pages * PAGE_SIZE,
            ceiling_bytes: ceiling_pages(config, frame_pages) * PAGE_SIZE,
            floor_bytes: config.memory_min_bytes,
        };
        let policy = self.pressure.get_or_insert_with(MemoryPressure::new);
        let change = policy.decide(now, sample, cache);
        self.stats.view = policy.view();
        let change = change?;
        let pages = (change.budget_bytes / PAGE_SIZE).clamp(1, frame_pages);
        if pages == budget_pages {
            return None;
        }
        let s = &mut self.stats;
        if pages < budget_pages {
            s.shrinks += 1;
            s.shrunk_pages += budget_pages - pages;
        } else {
            s.grows += 1;
            s.grown_pages += pages - budget_pages;
        }
        s.reason = change.reason;
        Some(pages)
    }

    /// How long a runtime following memory pressure waits before its
    /// next sample (memory_pressure/: shorter near the reserve).
    pub fn sample_interval_ns(&self) -> u64 {
        self.pressure
            .as_ref()
            .map_or(SAMPLE_INTERVAL_NS, |p| p.sample_interval_ns())
    }

    /// The runtime gave the memory of `pages` free frames back.
    pub fn given_back(&mut self, pages: u64) {
        self.stats.given_back_pages += pages;
    }

    /// The budget's figures now.
    pub fn stats(&self, config: &Config, frame_pages: u64) -> MemoryBudgetStats {
        let ceiling = ceiling_pages(config, frame_pages);
        MemoryBudgetStats {
            follows_pressure: self.pressure.is_some(),
            ceiling_pages: ceiling,
            floor_pages: (config.memory_min_bytes / PAGE_SIZE).min(ceiling),
            ..self.stats
        }
    }
}

/// The most the budget may be: the `memory` knob, within the frames.
pub(crate) fn ceiling_pages(config: &Config, frame_pages: u64) -> u64 {
    (config.memory_bytes / PAGE_SIZE).min(frame_pages)
}
