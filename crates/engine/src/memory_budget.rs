//! The cache budget: where it starts, what moves it, and what it is now.
//!
//! - Start. A runtime that picks the budget for the user (the mount does)
//!   takes it from where the process runs ([`start_budget`]):
//!   [`LIMIT_SHARE_PERCENT`] of the tightest cgroup limit on the way up
//!   (leaving at least [`LIMIT_HEADROOM_MIN_BYTES`] for the process's own
//!   memory and the others in the cgroup), and at most
//!   [`MEM_AVAILABLE_SHARE_PERCENT`] of MemAvailable. The runtime reserves
//!   that many frames; the budget never grows past them.
//! - The `memory` knob sets the budget now and the ceiling; `memory_min`
//!   the floor (knobs.rs).
//! - A runtime that follows memory pressure passes samples of the memory
//!   where it runs (`note_memory_sample`, the next one due after
//!   `memory_sample_interval_ns`); the policy
//!   (memory_pressure.rs) moves the budget between floor and ceiling, and
//!   the change is applied as a lowered or raised knob is: over a lowered
//!   budget clean pages go at once, oldest first (reclaim.rs, `shrink`),
//!   and dirty ones are written back (reason vmscan) and go as they come
//!   clean; the dirty thresholds follow the budget.
//! - The runtime gives freed frames' memory back to the system and says
//!   how much (`note_memory_given_back`), for the stats.

use crate::config::{MAX_MEMORY_BYTES, MIN_MEMORY_BYTES};
use crate::dirty_limits::domain_dirty_limits;
use crate::engine::Engine;
use crate::ids::{DeviceId, PAGE_SIZE};
use crate::memory_pressure::{
    mul_div, CacheMemory, LimitFile, MemoryPressure, MemorySample, PressureView,
};
use crate::time::Instant;
use crate::units::format_bytes;
use std::fmt;

/// Share of a cgroup's memory limit the cache takes at most (the start
/// budget, and the ceiling while the limit holds). The rest is for the
/// process's own memory (I/O buffers, up to 64 MiB of spare ones; the
/// page index, which grows with the cache; FUSE's buffers: `wb mount`
/// used 28 MiB beside a 320 MiB cache, 270 MiB beside a 10 GiB one), for
/// the reserve the pressure policy keeps (10%, memory_pressure.rs) and
/// for the others in the cgroup. Not more: the pressure policy gives
/// memory back when others need it, so the cache may take most of the
/// limit (a 12 GiB cgroup's cache holds 10.2 GiB); not all, as the
/// kernel's page cache would: ours is anonymous memory, which the kernel
/// can only get back by killing.
pub const LIMIT_SHARE_PERCENT: u64 = 85;
/// At least this much of a cgroup's limit is left beyond the cache, for
/// small limits: the smallest reserve (128 MiB) and the process's own
/// memory (~50 MiB beside a 800 MiB cache), with room to spare, so that a
/// full cache does not sit at the edge of the reserve.
pub const LIMIT_HEADROOM_MIN_BYTES: u64 = 256 << 20;
/// Share of MemAvailable the cache takes at start when no cgroup limit is
/// tighter: the kernel's page cache would use all of it; half leaves
/// room for the programs the cache serves.
pub const MEM_AVAILABLE_SHARE_PERCENT: u64 = 50;
/// The smallest start budget taken from MemAvailable (a machine with
/// little memory available still gets a working cache).
pub const START_BUDGET_MIN_BYTES: u64 = 64 << 20;

/// The most of a cgroup limit the cache takes.
pub fn limit_cap_bytes(limit_bytes: u64) -> u64 {
    mul_div(limit_bytes, LIMIT_SHARE_PERCENT, 100)
        .min(limit_bytes.saturating_sub(LIMIT_HEADROOM_MIN_BYTES))
        .max(MIN_MEMORY_BYTES)
}

/// Why the budget is what it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BudgetReason {
    /// What the cache started with.
    #[default]
    Start,
    /// The `memory` knob was written.
    Knob,
    /// A cgroup's limit, lowered below what the cache had.
    CgroupLimit,
    /// Too little memory available where the process runs: given to others.
    LowMemory,
    /// Tasks stalled on memory (PSI).
    Pressure,
    /// Grown back after pressure.
    Grow,
}

impl BudgetReason {
    pub const ALL: [BudgetReason; 6] = [
        BudgetReason::Start,
        BudgetReason::Knob,
        BudgetReason::CgroupLimit,
        BudgetReason::LowMemory,
        BudgetReason::Pressure,
        BudgetReason::Grow,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BudgetReason::Start => "start",
            BudgetReason::Knob => "knob",
            BudgetReason::CgroupLimit => "cgroup_limit",
            BudgetReason::LowMemory => "low_memory",
            BudgetReason::Pressure => "pressure",
            BudgetReason::Grow => "grow",
        }
    }
}

impl fmt::Display for BudgetReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a start budget came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartSource {
    /// A cgroup's limit: [`LIMIT_SHARE_PERCENT`] of it, or the limit less
    /// [`LIMIT_HEADROOM_MIN_BYTES`] if that is less.
    CgroupLimit {
        path: String,
        file: LimitFile,
        limit_bytes: u64,
    },
    /// [`MEM_AVAILABLE_SHARE_PERCENT`] of MemAvailable.
    MemAvailable { available_bytes: u64 },
}

impl fmt::Display for StartSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartSource::CgroupLimit {
                path,
                file,
                limit_bytes,
            } => {
                let share = mul_div(*limit_bytes, LIMIT_SHARE_PERCENT, 100);
                let limit = format_bytes(*limit_bytes);
                if limit_cap_bytes(*limit_bytes) < share {
                    let headroom = format_bytes(LIMIT_HEADROOM_MIN_BYTES);
                    write!(f, "cgroup {path} {} {limit} less {headroom}", file.name())
                } else {
                    write!(
                        f,
                        "{LIMIT_SHARE_PERCENT}% of cgroup {path} {} {limit}",
                        file.name()
                    )
                }
            }
            StartSource::MemAvailable { available_bytes } => {
                let share = match MEM_AVAILABLE_SHARE_PERCENT {
                    50 => "half".to_string(),
                    p => format!("{p}%"),
                };
                write!(
                    f,
                    "{share} of MemAvailable {}",
                    format_bytes(*available_bytes)
                )
            }
        }
    }
}

/// A budget to start with, and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartBudget {
    /// Whole pages, within [MIN_MEMORY_BYTES, MAX_MEMORY_BYTES].
    pub bytes: u64,
    pub source: StartSource,
}

/// The budget a cache starts with where `sample` was taken: the least of
/// [`limit_cap_bytes`] of each cgroup limit and
/// [`MEM_AVAILABLE_SHARE_PERCENT`] of MemAvailable (at least
/// [`START_BUDGET_MIN_BYTES`]), whole pages.
pub fn start_budget(sample: &MemorySample) -> StartBudget {
    let available = mul_div(sample.mem_available_bytes, MEM_AVAILABLE_SHARE_PERCENT, 100)
        .max(START_BUDGET_MIN_BYTES);
    let mut best = StartBudget {
        bytes: available,
        source: StartSource::MemAvailable {
            available_bytes: sample.mem_available_bytes,
        },
    };
    for c in &sample.cgroups {
        let cap = limit_cap_bytes(c.limit_bytes);
        if cap < best.bytes {
            best = StartBudget {
                bytes: cap,
                source: StartSource::CgroupLimit {
                    path: c.path.clone(),
                    file: c.limit_file,
                    limit_bytes: c.limit_bytes,
                },
            };
        }
    }
    best.bytes = (best.bytes / PAGE_SIZE * PAGE_SIZE).clamp(MIN_MEMORY_BYTES, MAX_MEMORY_BYTES);
    best
}

/// The budget's figures, for stats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryBudgetStats {
    /// Whether a runtime passes samples (the budget follows pressure).
    pub follows_pressure: bool,
    /// The ceiling: the `memory` knob, within the frames.
    pub ceiling_pages: u64,
    /// `memory_min`, within the ceiling.
    pub floor_pages: u64,
    /// Why the budget is what it is now.
    pub reason: BudgetReason,
    /// Times the budget was lowered / raised by the policy, and by how
    /// many pages in all.
    pub shrinks: u64,
    pub grows: u64,
    pub shrunk_pages: u64,
    pub grown_pages: u64,
    /// Pages of frames whose memory the runtime gave back to the system.
    pub given_back_pages: u64,
    /// The last sample as the policy saw it.
    pub view: PressureView,
}

impl Engine {
    /// Sets the budget now to `pages` (within the frames): the dirty
    /// thresholds follow; over it clean pages go at once and dirty ones
    /// are written back (reason vmscan) and go as they come clean; a
    /// raised budget wakes whoever waits for memory.
    pub(crate) fn set_budget_pages(&mut self, pages: u64) {
        assert!(pages <= self.frame_pages, "budget past the frames");
        assert!(pages > 0, "an empty budget");
        self.memory_pages = pages;
        self.stats.memory_pages = pages;
        self.dom.thresh = domain_dirty_limits(&self.config, self.memory_pages);
        // The hard limit follows a raised threshold at once and a lowered one slowly.
        self.dom.dirty_limit = self.dom.dirty_limit.max(self.dom.thresh.thresh);
        self.trim_to_budget();
        if self.free_pages() > 0 {
            self.wake(crate::task::WaitKey::Memory);
        }
    }

    /// A sample of the memory where the cache runs, taken at `now`: the
    /// pressure policy (memory_pressure.rs) may move the budget between
    /// `memory_min` and `memory` (and each cgroup limit's share). Call it
    /// about ten times a second; drain the actions after (writeback of
    /// dirty pages over a lowered budget starts here). Returns the budget
    /// in pages if it changed.
    pub fn note_memory_sample(&mut self, now: Instant, sample: &MemorySample) -> Option<u64> {
        let cache = CacheMemory {
            used_bytes: (self.nr_cached + self.nr_snapshot) * PAGE_SIZE,
            budget_bytes: self.memory_pages * PAGE_SIZE,
            ceiling_bytes: self.ceiling_pages() * PAGE_SIZE,
            floor_bytes: self.config.memory_min_bytes,
        };
        let policy = self.memory_pressure.get_or_insert_with(MemoryPressure::new);
        let change = policy.decide(now, sample, cache);
        self.memory_stats.view = policy.view();
        let change = change?;
        let pages = (change.budget_bytes / PAGE_SIZE).clamp(1, self.frame_pages);
        let before = self.memory_pages;
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
        if self.over_budget {
            for d in 0..self.devices.len() {
                self.pump(now, DeviceId(d as u32));
            }
        }
        Some(pages)
    }

    /// How long a runtime following memory pressure waits before its
    /// next sample (memory_pressure.rs: shorter near the reserve).
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
        (self.config.memory_bytes / PAGE_SIZE).min(self.frame_pages)
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_pressure::CgroupMemory;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    fn limited(path: &str, file: LimitFile, limit_bytes: u64) -> CgroupMemory {
        CgroupMemory {
            path: path.into(),
            limit_file: file,
            limit_bytes,
            usage_bytes: 0,
            file_bytes: 0,
        }
    }

    fn machine(available: u64) -> MemorySample {
        MemorySample {
            mem_total_bytes: 24 * GIB,
            mem_available_bytes: available,
            ..MemorySample::default()
        }
    }

    #[test]
    fn without_a_limit_half_of_mem_available() {
        let b = start_budget(&machine(22 * GIB + 5));
        assert_eq!(b.bytes, 11 * GIB);
        assert_eq!(b.source.to_string(), "half of MemAvailable 22.0GiB");
        assert_eq!(start_budget(&machine(10 * MIB)).bytes, 64 * MIB);
    }

    #[test]
    fn the_tightest_cgroup_limit_on_the_way_up_counts() {
        let mut s = machine(22 * GIB);
        s.cgroups.push(limited("/a/b", LimitFile::V2Max, 8 * GIB));
        s.cgroups.push(limited("/a", LimitFile::V2High, 4 * GIB));
        let b = start_budget(&s);
        assert_eq!(b.bytes, 4 * GIB * 85 / 100 / PAGE_SIZE * PAGE_SIZE);
        assert_eq!(b.source.to_string(), "85% of cgroup /a memory.high 4.0GiB");
        // A limit looser than half of MemAvailable does not count.
        let mut s = machine(4 * GIB);
        s.cgroups
            .push(limited("/big", LimitFile::V1Limit, 20 * GIB));
        assert_eq!(start_budget(&s).bytes, 2 * GIB);
    }

    #[test]
    fn a_small_limit_leaves_the_process_its_headroom() {
        let mut s = machine(22 * GIB);
        s.cgroups
            .push(limited("/wb", LimitFile::V1Limit, 512 * MIB));
        let b = start_budget(&s);
        assert_eq!(b.bytes, 256 * MIB);
        assert_eq!(
            b.source.to_string(),
            "cgroup /wb memory.limit_in_bytes 512.0MiB less 256.0MiB"
        );
        // Tiny: the smallest budget.
        let mut s = machine(22 * GIB);
        s.cgroups.push(limited("/t", LimitFile::V1Limit, 100 * MIB));
        assert_eq!(start_budget(&s).bytes, MIN_MEMORY_BYTES);
        // Whole pages.
        let mut s = machine(22 * GIB);
        s.cgroups
            .push(limited("/o", LimitFile::V1Limit, 4 * GIB + 4095));
        assert_eq!(start_budget(&s).bytes % PAGE_SIZE, 0);
    }
}
