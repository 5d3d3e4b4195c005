//! The budget a cache starts with where it runs, and the most of a cgroup
//! limit it takes (memory_budget/; the pressure policy holds the budget
//! to the same share of each limit).

use crate::config::{MAX_MEMORY_BYTES, MIN_MEMORY_BYTES};
use crate::ids::PAGE_SIZE;
use crate::memory_pressure::sample::{LimitFile, MemorySample};
use crate::units::{format_bytes, mul_div};
use std::fmt;

/// Share of a cgroup's memory limit the cache takes at most (the start
/// budget, and the ceiling while the limit holds). The rest is for the
/// process's own memory (I/O buffers, up to 64 MiB of spare ones; the
/// page index, which grows with the cache; FUSE's buffers: `wb mount`
/// used 28 MiB beside a 320 MiB cache, 270 MiB beside a 10 GiB one), for
/// the reserve the pressure policy keeps (10%, memory_pressure/) and
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_pressure::sample::CgroupMemory;

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
