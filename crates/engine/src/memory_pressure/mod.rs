//! Following memory pressure: the cache budget, between a floor and a
//! ceiling, decided from samples of the memory where the process runs
//! (ours; the kernel's page cache gets the same from reclaim, which we do
//! not sit under: our cache is anonymous memory to the kernel, and without
//! this it would keep it while another process is OOM-killed).
//!
//! - Levels. Each sample (about ten a second, time passed in) describes
//!   the machine (MemTotal, MemAvailable) and each cgroup with a memory
//!   limit from the process's own up (limit, usage, file pages on its LRU
//!   lists). A level's available memory is what its users can still take
//!   without an OOM kill: MemAvailable, or limit − usage + file pages
//!   (clean page cache goes without swap). Its reserve is what we leave
//!   available to others: [`RESERVE_PERCENT`] of its limit (MemTotal for
//!   the machine), at least [`RESERVE_MIN_BYTES`] (kswapd's watermarks,
//!   larger: we see memory ten times a second, the kernel at every
//!   allocation). The level with the least slack (available − reserve)
//!   binds.
//! - Room. The budget never exceeds what the cache holds plus the binding
//!   slack, less the demand: what the others (everything at that level
//!   but the cache) took since the last sample, which they are likely to
//!   take again before the next (from an eighth of the reserve up; less
//!   is noise). Room below what the cache holds is
//!   memory given back now (clean pages at once, dirty ones once written
//!   back, reason vmscan): reason `low_memory`.
//! - Stalls. Where PSI is readable, its totals are compared over windows
//!   of [`PSI_WINDOW_NS`] (however often samples come: a single stall of a
//!   few milliseconds is not pressure). A window whose share of time with
//!   some task stalled on memory reaches [`PSI_SOME_SHRINK_PERMILLE`] (or
//!   with all of them stalled, [`PSI_FULL_SHRINK_PERMILLE`]) gives back
//!   [`PRESSURE_SHRINK_PERCENT`] of what the cache holds: reason
//!   `pressure`. Not again while earlier memory is still to go (the budget
//!   below what the cache holds): pressure that lasts until then does not
//!   compound.
//! - Ceiling. The knob (`memory`, at most the frames the cache started
//!   with) and [`LIMIT_SHARE_PERCENT`](crate::LIMIT_SHARE_PERCENT) of each
//!   cgroup limit, read again at every sample, so a limit lowered at run
//!   time is followed at once: reason `cgroup_limit`.
//! - Growth. When nothing above applied, PSI is calm (below
//!   [`PSI_CALM_PERMILLE`]) and nothing was given back for
//!   [`GROW_HOLD_NS`], the budget grows by [`GROW_PERMILLE_PER_S`] of the
//!   ceiling a second, within the room and the ceiling: reason `grow`.
//! - Floor. Never below `memory_min` (at most the ceiling, at least
//!   [`MIN_MEMORY_BYTES`]).
//! - Pace. The next sample is due in [`SAMPLE_INTERVAL_NS`], or in
//!   [`SAMPLE_INTERVAL_TIGHT_NS`] while less than twice the reserve is
//!   available: near the limit, a fast allocator must find the memory it
//!   takes given back before it reaches it.
//!
//! Pure: no clock, no I/O; the runtime reads the files and applies the
//! decision (`Engine::note_memory_sample`, memory_budget/).

pub(crate) mod sample;

use crate::config::MIN_MEMORY_BYTES;
use crate::memory_budget::start::limit_cap_bytes;
use crate::memory_budget::stats::BudgetReason;
use crate::memory_pressure::sample::{MemorySample, PressureView, PsiTotals, MAX_CGROUP_LEVELS};
use crate::time::{Instant, NS_PER_MS, NS_PER_SEC, NS_PER_US};
use crate::units::mul_div;

/// Share of a level's limit (MemTotal for the machine) kept available to
/// everyone else. A process that allocates fast takes ~6 GiB a second
/// here (memset into huge pages the host backs): 10% of a 12 GiB cgroup
/// lasts it 200 ms, twenty samples near the reserve
/// (`SAMPLE_INTERVAL_TIGHT_NS`), each giving back what it took since
/// the last one ahead of the next (measured: 8 GiB taken in 3.5 s beside
/// a full 10 GiB cache, the cgroup never at its limit).
pub const RESERVE_PERCENT: u64 = 10;
/// The smallest reserve, for small limits: a burst of 100 ms at ~1 GiB/s.
pub const RESERVE_MIN_BYTES: u64 = 128 << 20;
/// What the others took since the last sample counts as demand only from
/// an eighth of the reserve up (16 MiB of the smallest): less is buffers
/// coming and going (measured: ~11 MiB between two samples beside a
/// mount at rest), and an allocator that slow takes over 80 samples to
/// use up the reserve, each of which gives back the deficit.
pub const DEMAND_MIN_RESERVE_DIVISOR: u64 = 8;
/// The window PSI's stall totals are compared over: half a second, the
/// kernel's shortest trigger window. Samples come every 10 ms near the
/// limit, and one task's stall of 2 ms would be a fifth of that.
pub const PSI_WINDOW_NS: u64 = 500 * NS_PER_MS;
/// PSI memory `some` (some task stalled on memory), in thousandths of a
/// window, from which the cache gives back memory:
/// 20%. Reclaim of clean page cache in a cgroup at its limit (a copy
/// reading through the kernel) stalls its tasks a few percent of the time;
/// that is the kernel making room, not a reason to shrink.
pub const PSI_SOME_SHRINK_PERMILLE: u64 = 200;
/// PSI memory `full` (every non-idle task stalled) from which the cache
/// gives back memory: 5%, thrashing.
pub const PSI_FULL_SHRINK_PERMILLE: u64 = 50;
/// PSI memory `some` below which the cache may grow: 1%.
pub const PSI_CALM_PERMILLE: u64 = 10;
/// What a sample under PSI pressure gives back, of what the cache holds.
pub const PRESSURE_SHRINK_PERCENT: u64 = 5;
/// How long after giving memory back the cache waits before it grows: a
/// process allocating takes more than one sample, and one that freed may
/// allocate again (Senpai's hold-off).
pub const GROW_HOLD_NS: u64 = 2 * NS_PER_SEC;
/// Growth, in thousandths of the ceiling a second: 10%, so a cache pressed
/// to its floor is back at its ceiling in about ten seconds, not at once.
pub const GROW_PERMILLE_PER_S: u64 = 100;
/// The longest gap between samples growth counts: a late sample does not
/// grow the budget by more than a second's worth.
pub const GROW_GAP_MAX_NS: u64 = NS_PER_SEC;
/// How often to sample: ten times a second while memory is plentiful.
pub const SAMPLE_INTERVAL_NS: u64 = 100 * NS_PER_MS;
/// How often to sample while the binding level has less than twice its
/// reserve available: a process allocating ~3 GiB a second would take a
/// small cgroup's whole reserve (128 MiB) in 40 ms, and the kernel kills
/// when the limit is reached with nothing left to reclaim. A sample costs
/// ~50 µs of reading files: 0.5% of a CPU at this rate.
pub const SAMPLE_INTERVAL_TIGHT_NS: u64 = 10 * NS_PER_MS;
/// The cache's side of a decision, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheMemory {
    /// What the cache holds (cached pages, snapshots).
    pub used_bytes: u64,
    /// The budget now.
    pub budget_bytes: u64,
    /// The most it may be: the `memory` knob, within the frames.
    pub ceiling_bytes: u64,
    /// `memory_min`.
    pub floor_bytes: u64,
}

/// A new budget and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetChange {
    pub budget_bytes: u64,
    pub reason: BudgetReason,
}

/// One level as the policy sees it.
#[derive(Clone, Copy, Debug)]
struct Level {
    limit: u64,
    available: u64,
    reserve: u64,
    /// What everything but the cache uses at this level.
    others: u64,
}

impl Level {
    fn slack(&self) -> i128 {
        self.available as i128 - self.reserve as i128
    }
}

/// The previous sample's figures the next one compares with.
#[derive(Clone, Debug)]
struct Previous {
    at: Instant,
    /// Per level (the machine first, then the cgroups by path): others' use.
    others: Vec<(Option<String>, u64)>,
}

/// PSI's totals at the start of the window under way.
#[derive(Clone, Copy, Debug)]
struct PsiWindow {
    start: Instant,
    totals: PsiTotals,
}

/// The policy's state: the last sample, the PSI window, when memory was
/// last given back.
#[derive(Clone, Debug, Default)]
pub struct MemoryPressure {
    previous: Option<Previous>,
    psi_window: Option<PsiWindow>,
    /// PSI `some` and `full` of the last whole window, thousandths.
    psi_last: (u64, u64),
    gave_back_at: Option<Instant>,
    view: PressureView,
}

/// The reserve kept at a level with this limit.
pub fn reserve_bytes(limit_bytes: u64) -> u64 {
    mul_div(limit_bytes, RESERVE_PERCENT, 100).max(RESERVE_MIN_BYTES)
}

impl MemoryPressure {
    pub fn new() -> MemoryPressure {
        MemoryPressure::default()
    }

    /// What the last sample showed.
    pub fn view(&self) -> PressureView {
        self.view
    }

    /// How long until the next sample should be taken:
    /// `SAMPLE_INTERVAL_TIGHT_NS` while the last one found less than
    /// twice the reserve available, else `SAMPLE_INTERVAL_NS`.
    pub fn sample_interval_ns(&self) -> u64 {
        let v = &self.view;
        match self.previous.is_some() && v.available_bytes < 2 * v.reserve_bytes {
            true => SAMPLE_INTERVAL_TIGHT_NS,
            false => SAMPLE_INTERVAL_NS,
        }
    }

    /// Decides the budget from a sample taken at `now` (monotonic). None:
    /// the budget stays.
    pub fn decide(
        &mut self,
        now: Instant,
        sample: &MemorySample,
        cache: CacheMemory,
    ) -> Option<BudgetChange> {
        assert!(sample.cgroups.len() <= MAX_CGROUP_LEVELS, "too many levels");
        assert!(cache.budget_bytes <= cache.ceiling_bytes.max(MIN_MEMORY_BYTES));
        let levels = Self::levels(sample, cache.used_bytes);
        let (binding, level) = levels
            .iter()
            .enumerate()
            .min_by_key(|(_, l)| l.slack())
            .map(|(i, l)| (i, *l))
            .expect("the machine is a level");
        let key = Self::key(sample, binding);
        let previous = self.previous.take();
        let demand = previous
            .as_ref()
            .and_then(|p| p.others.iter().find(|(k, _)| *k == key))
            .map_or(0, |&(_, before)| level.others.saturating_sub(before));
        // Buffers come and go: a small rise is noise, and the reserve
        // covers an allocator that slow.
        let demand = match demand >= level.reserve / DEMAND_MIN_RESERVE_DIVISOR {
            true => demand,
            false => 0,
        };
        let window_ended = self.psi_step(now, sample.psi);
        let (some, full) = self.psi_last;
        self.view = PressureView {
            available_bytes: level.available,
            reserve_bytes: level.reserve,
            limit_bytes: level.limit,
            cgroup_binds: binding > 0,
            demand_bytes: demand,
            some_permille: some,
            full_permille: full,
        };
        let gap_ns = previous.as_ref().map_or(0, |p| now.since_ns(p.at));
        self.previous = Some(Previous {
            at: now,
            others: (0..levels.len())
                .map(|i| (Self::key(sample, i), levels[i].others))
                .collect(),
        });
        let room = (cache.used_bytes + level.available)
            .saturating_sub(level.reserve)
            .saturating_sub(demand);
        self.budget(now, sample, cache, room, window_ended, gap_ns)
    }

    /// Applies the rules in order: ceiling, stalls, room, growth, floor.
    fn budget(
        &mut self,
        now: Instant,
        sample: &MemorySample,
        cache: CacheMemory,
        room: u64,
        window_ended: bool,
        gap_ns: u64,
    ) -> Option<BudgetChange> {
        let (some, full) = self.psi_last;
        let limit_cap = sample
            .cgroups
            .iter()
            .map(|c| limit_cap_bytes(c.limit_bytes))
            .min()
            .unwrap_or(u64::MAX);
        let ceiling = cache.ceiling_bytes.min(limit_cap);
        let floor = cache.floor_bytes.min(ceiling).max(MIN_MEMORY_BYTES);
        let mut budget = cache.budget_bytes;
        let mut reason = None;
        if budget > ceiling {
            budget = ceiling;
            reason = Some(BudgetReason::CgroupLimit);
        }
        let pressed = some >= PSI_SOME_SHRINK_PERMILLE || full >= PSI_FULL_SHRINK_PERMILLE;
        if window_ended && pressed {
            let target = cache.used_bytes - mul_div(cache.used_bytes, PRESSURE_SHRINK_PERCENT, 100);
            if target < budget {
                budget = target;
                reason = Some(BudgetReason::Pressure);
                self.gave_back_at = Some(now);
            }
        }
        if room < budget {
            budget = room;
            reason = Some(BudgetReason::LowMemory);
            if room < cache.used_bytes {
                self.gave_back_at = Some(now);
            }
        }
        let held = self
            .gave_back_at
            .is_some_and(|at| now.since_ns(at) < GROW_HOLD_NS);
        if reason.is_none() && some < PSI_CALM_PERMILLE && !held {
            let step = mul_div(
                ceiling,
                GROW_PERMILLE_PER_S * gap_ns.min(GROW_GAP_MAX_NS),
                1000 * NS_PER_SEC,
            );
            let target = budget.saturating_add(step).min(ceiling).min(room);
            if target > budget {
                budget = target;
                reason = Some(BudgetReason::Grow);
            }
        }
        let budget = budget.max(floor).min(cache.ceiling_bytes.max(floor));
        let reason = reason?;
        (budget != cache.budget_bytes).then_some(BudgetChange {
            budget_bytes: budget,
            reason,
        })
    }

    /// The machine, then each cgroup, as levels.
    fn levels(sample: &MemorySample, used: u64) -> Vec<Level> {
        let machine = Level {
            limit: sample.mem_total_bytes,
            available: sample.mem_available_bytes.min(sample.mem_total_bytes),
            reserve: reserve_bytes(sample.mem_total_bytes),
            others: sample
                .mem_total_bytes
                .saturating_sub(sample.mem_available_bytes)
                .saturating_sub(used),
        };
        let cgroups = sample.cgroups.iter().map(|c| {
            let unreclaimable = c.usage_bytes.saturating_sub(c.file_bytes);
            Level {
                limit: c.limit_bytes,
                available: c.limit_bytes.saturating_sub(unreclaimable),
                reserve: reserve_bytes(c.limit_bytes),
                others: unreclaimable.saturating_sub(used),
            }
        });
        std::iter::once(machine).chain(cgroups).collect()
    }

    /// Level `i`'s identity across samples: None for the machine, a
    /// cgroup's path.
    fn key(sample: &MemorySample, i: usize) -> Option<String> {
        i.checked_sub(1).map(|c| sample.cgroups[c].path.clone())
    }

    /// Moves the PSI window on: when `now` ends one (PSI_WINDOW_NS since
    /// it began), `psi_last` becomes its shares and a new one begins;
    /// returns whether one ended. Without totals, or with totals that went
    /// back (another cgroup's file), the shares are zero and a window
    /// begins at the next totals.
    fn psi_step(&mut self, now: Instant, psi: Option<PsiTotals>) -> bool {
        let Some(totals) = psi else {
            self.psi_window = None;
            self.psi_last = (0, 0);
            return false;
        };
        let Some(w) = self.psi_window else {
            self.psi_window = Some(PsiWindow { start: now, totals });
            return false;
        };
        if totals.some_us < w.totals.some_us || totals.full_us < w.totals.full_us {
            self.psi_window = Some(PsiWindow { start: now, totals });
            self.psi_last = (0, 0);
            return false;
        }
        let span_us = now.since_ns(w.start) / NS_PER_US;
        if span_us < PSI_WINDOW_NS / NS_PER_US {
            return false;
        }
        let share = |now: u64, then: u64| mul_div(now - then, 1000, span_us).min(1000);
        self.psi_last = (
            share(totals.some_us, w.totals.some_us),
            share(totals.full_us, w.totals.full_us),
        );
        self.psi_window = Some(PsiWindow { start: now, totals });
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_pressure::sample::{CgroupMemory, LimitFile};
    use crate::time::NS_PER_MS;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    const TICK: u64 = 100 * NS_PER_MS;

    /// A 12 GiB cgroup `/t` whose others use `others` besides the cache's
    /// `used`, no file pages; a machine with plenty available.
    fn in_cgroup(used: u64, others: u64) -> MemorySample {
        MemorySample {
            mem_total_bytes: 24 * GIB,
            mem_available_bytes: 20 * GIB,
            cgroups: vec![CgroupMemory {
                path: "/t".into(),
                limit_file: LimitFile::V1Limit,
                limit_bytes: 12 * GIB,
                usage_bytes: used + others,
                file_bytes: 0,
            }],
            psi: None,
        }
    }

    fn cache(used: u64, budget: u64) -> CacheMemory {
        CacheMemory {
            used_bytes: used,
            budget_bytes: budget,
            ceiling_bytes: 9 * GIB,
            floor_bytes: 64 * MIB,
        }
    }

    fn change(budget_bytes: u64, reason: BudgetReason) -> Option<BudgetChange> {
        Some(BudgetChange {
            budget_bytes,
            reason,
        })
    }

    #[test]
    fn a_shortfall_gives_back_the_deficit_and_what_others_just_took() {
        let mut p = MemoryPressure::new();
        let reserve = reserve_bytes(12 * GIB);
        assert_eq!(reserve, 12 * GIB / 10);
        // 9 GiB cached, others 0.5 GiB: 2.5 GiB available, above the reserve.
        let full = cache(9 * GIB, 9 * GIB);
        assert_eq!(
            p.decide(Instant(0), &in_cgroup(9 * GIB, GIB / 2), full),
            None
        );
        // A hog took 2 GiB in 100 ms: 0.5 GiB available. Give back the
        // deficit to the reserve and the 2 GiB it may take again.
        let t = Instant(TICK);
        let room = 9 * GIB + GIB / 2 - reserve - 2 * GIB;
        assert_eq!(
            p.decide(t, &in_cgroup(9 * GIB, 5 * GIB / 2), full),
            change(room, BudgetReason::LowMemory)
        );
        assert_eq!(p.view().demand_bytes, 2 * GIB);
        assert_eq!(p.view().available_bytes, GIB / 2);
        assert!(p.view().cgroup_binds);
        // The cache gave it back; the hog took 2 GiB more meanwhile.
        let after = cache(room, room);
        let room2 = room + (12 * GIB - room - 9 * GIB / 2) - reserve - 2 * GIB;
        assert_eq!(
            p.decide(Instant(2 * TICK), &in_cgroup(room, 9 * GIB / 2), after),
            change(room2, BudgetReason::LowMemory)
        );
    }

    #[test]
    fn a_small_rise_of_what_others_use_is_noise() {
        let mut p = MemoryPressure::new();
        let reserve = reserve_bytes(12 * GIB);
        // 9 GiB cached, others at 1.5 GiB: 1.5 GiB available, 0.3 over
        // the reserve.
        let full = cache(9 * GIB, 9 * GIB);
        let base = 3 * GIB / 2;
        assert_eq!(p.decide(Instant(0), &in_cgroup(9 * GIB, base), full), None);
        // Others rise by less than an eighth of the reserve: no demand.
        let small = reserve / DEMAND_MIN_RESERVE_DIVISOR - 1;
        let t = Instant(10 * NS_PER_MS);
        assert_eq!(p.decide(t, &in_cgroup(9 * GIB, base + small), full), None);
        assert_eq!(p.view().demand_bytes, 0);
        // By that much: the next sample may see as much again.
        let big = reserve / DEMAND_MIN_RESERVE_DIVISOR;
        let t = Instant(20 * NS_PER_MS);
        let others = base + small + big;
        let room = 9 * GIB + (12 * GIB - 9 * GIB - others) - reserve - big;
        assert!(room < 9 * GIB);
        assert_eq!(
            p.decide(t, &in_cgroup(9 * GIB, others), full),
            change(room, BudgetReason::LowMemory)
        );
    }

    #[test]
    fn a_budget_above_the_room_is_lowered_without_holding_growth_back() {
        let mut p = MemoryPressure::new();
        // Only 1 GiB cached of a 9 GiB budget; others use 9 GiB: the room
        // is 1 + 2 - 1.2 GiB, above what is cached: nothing given back.
        let reserve = reserve_bytes(12 * GIB);
        let room = GIB + 2 * GIB - reserve;
        assert_eq!(
            p.decide(Instant(0), &in_cgroup(GIB, 9 * GIB), cache(GIB, 9 * GIB)),
            change(room, BudgetReason::LowMemory)
        );
        // Others leave: the budget grows at the next sample, gradually.
        let step = 9 * GIB / 100;
        assert_eq!(
            p.decide(Instant(TICK), &in_cgroup(GIB, 0), cache(GIB, room)),
            change(room + step, BudgetReason::Grow)
        );
    }

    #[test]
    fn samples_come_faster_near_the_reserve() {
        let mut p = MemoryPressure::new();
        assert_eq!(p.sample_interval_ns(), SAMPLE_INTERVAL_NS, "no sample yet");
        // 12 - 9.5 = 2.5 GiB available: over twice the 1.2 GiB reserve.
        p.decide(
            Instant(0),
            &in_cgroup(9 * GIB, GIB / 2),
            cache(9 * GIB, 9 * GIB),
        );
        assert_eq!(p.sample_interval_ns(), SAMPLE_INTERVAL_NS);
        // 2 GiB available: under twice the reserve.
        p.decide(
            Instant(TICK),
            &in_cgroup(9 * GIB, GIB),
            cache(9 * GIB, 9 * GIB),
        );
        assert_eq!(p.sample_interval_ns(), SAMPLE_INTERVAL_TIGHT_NS);
    }

    #[test]
    fn never_below_the_floor() {
        let mut p = MemoryPressure::new();
        // Others fill the cgroup: the cache gives back all but the
        // reserve would leave it, and stops at memory_min.
        assert_eq!(
            p.decide(Instant(0), &in_cgroup(GIB, 11 * GIB), cache(GIB, 9 * GIB)),
            change(64 * MIB, BudgetReason::LowMemory)
        );
        // memory_min 0 still leaves the smallest budget.
        let zero_floor = CacheMemory {
            floor_bytes: 0,
            ..cache(GIB, 9 * GIB)
        };
        let mut p = MemoryPressure::new();
        assert_eq!(
            p.decide(Instant(0), &in_cgroup(GIB, 11 * GIB), zero_floor),
            change(MIN_MEMORY_BYTES, BudgetReason::LowMemory)
        );
        // With more held, the reserve is what goes.
        let mut p = MemoryPressure::new();
        let reserve = reserve_bytes(12 * GIB);
        assert_eq!(
            p.decide(
                Instant(0),
                &in_cgroup(6 * GIB, 6 * GIB),
                cache(6 * GIB, 9 * GIB)
            ),
            change(6 * GIB - reserve, BudgetReason::LowMemory)
        );
    }

    #[test]
    fn a_lowered_cgroup_limit_lowers_the_ceiling_at_once() {
        let mut p = MemoryPressure::new();
        let mut s = in_cgroup(0, 0);
        s.cgroups[0].limit_bytes = 8 * GIB;
        // 85% of 8 GiB, although the room (8 - 0.8 GiB) is larger.
        let cap = limit_cap_bytes(8 * GIB);
        assert_eq!(cap, 8 * GIB * 85 / 100);
        assert_eq!(
            p.decide(Instant(0), &s, cache(0, 9 * GIB)),
            change(cap, BudgetReason::CgroupLimit)
        );
        // Raised again, the budget grows back to the knob, gradually.
        s.cgroups[0].limit_bytes = 16 * GIB;
        let step = 9 * GIB / 100;
        assert_eq!(
            p.decide(Instant(TICK), &s, cache(0, cap)),
            change(cap + step, BudgetReason::Grow)
        );
    }

    #[test]
    fn growth_waits_for_the_hold_then_climbs_a_tenth_of_the_ceiling_a_second() {
        let mut p = MemoryPressure::new();
        let reserve = reserve_bytes(12 * GIB);
        // At t = 0 a hog leaves 0.5 GiB available: 8 GiB given back... (room below used).
        let room = 9 * GIB + GIB / 2 - reserve;
        assert_eq!(
            p.decide(
                Instant(0),
                &in_cgroup(9 * GIB, 5 * GIB / 2),
                cache(9 * GIB, 9 * GIB)
            ),
            change(room, BudgetReason::LowMemory)
        );
        // The hog exits; the cache holds what it kept. No growth for 2 s.
        let mut budget = room;
        let mut t = 0;
        while t + TICK < GROW_HOLD_NS {
            t += TICK;
            let got = p.decide(Instant(t), &in_cgroup(room, 0), cache(room, budget));
            assert_eq!(got, None, "held at {t} ns");
        }
        // Then 0.9 GiB a second: 1% of the ceiling a sample, to the ceiling.
        let mut samples = 0;
        loop {
            t += TICK;
            match p.decide(Instant(t), &in_cgroup(room, 0), cache(room, budget)) {
                Some(c) => {
                    assert_eq!(c.reason, BudgetReason::Grow);
                    assert_eq!(c.budget_bytes, (budget + 9 * GIB / 100).min(9 * GIB));
                    budget = c.budget_bytes;
                    samples += 1;
                }
                None => break,
            }
        }
        assert_eq!(budget, 9 * GIB, "stops at the ceiling");
        assert_eq!(samples, (9 * GIB - room).div_ceil(9 * GIB / 100));
    }

    #[test]
    fn a_late_sample_grows_by_at_most_a_second() {
        let mut p = MemoryPressure::new();
        let s = in_cgroup(0, 0);
        assert_eq!(p.decide(Instant(0), &s, cache(0, GIB)), None);
        let step = 9 * GIB / 10;
        assert_eq!(
            p.decide(Instant(60 * NS_PER_SEC), &s, cache(0, GIB)),
            change(GIB + step, BudgetReason::Grow)
        );
    }

    fn with_psi(mut s: MemorySample, some_us: u64, full_us: u64) -> MemorySample {
        s.psi = Some(PsiTotals { some_us, full_us });
        s
    }

    #[test]
    fn stalls_give_back_a_share_of_what_is_held_without_compounding() {
        let mut p = MemoryPressure::new();
        let s = in_cgroup(4 * GIB, 0);
        let held = cache(4 * GIB, 4 * GIB);
        let w = PSI_WINDOW_NS;
        assert_eq!(p.decide(Instant(0), &with_psi(s.clone(), 0, 0), held), None);
        // 150 ms of `some` in a 500 ms window: 300 permille.
        let target = 4 * GIB - 4 * GIB * PRESSURE_SHRINK_PERCENT / 100;
        let stalled = with_psi(s.clone(), 150_000, 0);
        assert_eq!(
            p.decide(Instant(w), &stalled, held),
            change(target, BudgetReason::Pressure)
        );
        assert_eq!(p.view().some_permille, 300);
        // Still stalled, the cache not yet shrunk: no further step.
        let lowered = cache(4 * GIB, target);
        let stalled = with_psi(s.clone(), 300_000, 0);
        assert_eq!(p.decide(Instant(2 * w), &stalled, lowered), None);
        // Shrunk and still stalled (`full` 6%): another step.
        let shrunk = cache(target, target);
        let stalled = with_psi(in_cgroup(target, 0), 330_000, 30_000);
        let again = target - target * PRESSURE_SHRINK_PERCENT / 100;
        assert_eq!(
            p.decide(Instant(3 * w), &stalled, shrunk),
            change(again, BudgetReason::Pressure)
        );
        assert_eq!(p.view().full_permille, 60);
    }

    #[test]
    fn a_short_stall_between_close_samples_is_not_pressure() {
        let mut p = MemoryPressure::new();
        let s = in_cgroup(4 * GIB, 0);
        let held = CacheMemory {
            ceiling_bytes: 4 * GIB,
            ..cache(4 * GIB, 4 * GIB)
        };
        assert_eq!(p.decide(Instant(0), &with_psi(s.clone(), 0, 0), held), None);
        // 5 ms stalled in the next 10 ms: half of that time, but the window
        // is not over; at its end it is 1% of it.
        let ms = NS_PER_MS;
        assert_eq!(
            p.decide(Instant(10 * ms), &with_psi(s.clone(), 5_000, 0), held),
            None
        );
        assert_eq!(p.view().some_permille, 0);
        let end = Instant(PSI_WINDOW_NS);
        assert_eq!(p.decide(end, &with_psi(s.clone(), 5_000, 0), held), None);
        assert_eq!(p.view().some_permille, 10);
        // Totals that went back (another file) start again.
        let back = Instant(PSI_WINDOW_NS + 10 * ms);
        assert_eq!(p.decide(back, &with_psi(s, 10, 0), held), None);
        assert_eq!(p.view().some_permille, 0);
    }

    #[test]
    fn mild_stalls_neither_shrink_nor_let_the_cache_grow() {
        let mut p = MemoryPressure::new();
        let s = in_cgroup(GIB, 0);
        let c = cache(GIB, 2 * GIB);
        let w = PSI_WINDOW_NS;
        assert_eq!(p.decide(Instant(0), &with_psi(s.clone(), 0, 0), c), None);
        // 5% some: between calm (1%) and shrinking (20%).
        assert_eq!(
            p.decide(Instant(w), &with_psi(s.clone(), 25_000, 0), c),
            None
        );
        // Calm again: growth, half a second's worth.
        assert_eq!(
            p.decide(Instant(2 * w), &with_psi(s, 25_500, 0), c),
            change(2 * GIB + 9 * GIB / 20, BudgetReason::Grow)
        );
    }

    #[test]
    fn the_machine_binds_without_a_cgroup_limit() {
        let mut p = MemoryPressure::new();
        let s = |available| MemorySample {
            mem_total_bytes: 24 * GIB,
            mem_available_bytes: available,
            cgroups: Vec::new(),
            psi: None,
        };
        let c = cache(8 * GIB, 9 * GIB);
        assert_eq!(p.decide(Instant(0), &s(14 * GIB), c), None);
        // Another process took 4 GiB: 10 GiB available, the reserve is
        // 2.4 GiB and the next 100 ms may take 4 GiB again: room enough.
        let reserve = reserve_bytes(24 * GIB);
        assert_eq!(reserve, 24 * GIB / 10);
        assert!(8 * GIB + 10 * GIB - reserve - 4 * GIB > 9 * GIB);
        assert_eq!(p.decide(Instant(TICK), &s(10 * GIB), c), None);
        // It took 5 GiB more: 5 GiB available, and 5 GiB more to come.
        let room = 8 * GIB + 5 * GIB - reserve - 5 * GIB;
        let got = p.decide(Instant(2 * TICK), &s(5 * GIB), c);
        assert_eq!(got, change(room, BudgetReason::LowMemory));
        assert!(!p.view().cgroup_binds);
        assert_eq!(p.view().demand_bytes, 5 * GIB);
    }

    #[test]
    fn file_pages_count_as_available_and_the_tightest_level_binds() {
        let mut p = MemoryPressure::new();
        // A parent of 6 GiB nearly full of page cache, a child of 12 GiB.
        let mut s = in_cgroup(GIB, 0);
        s.cgroups.push(CgroupMemory {
            path: "/".into(),
            limit_file: LimitFile::V1Limit,
            limit_bytes: 6 * GIB,
            usage_bytes: 6 * GIB,
            file_bytes: 5 * GIB,
        });
        let c = cache(GIB, 9 * GIB);
        // The parent's cap (85% of 6 GiB) is the ceiling; its page cache
        // is available, so the room (1 + 5 - 0.6 GiB) allows it.
        assert_eq!(
            p.decide(Instant(0), &s, c),
            change(limit_cap_bytes(6 * GIB), BudgetReason::CgroupLimit)
        );
        assert_eq!(p.view().limit_bytes, 6 * GIB);
        assert_eq!(p.view().available_bytes, 5 * GIB);
    }
}
