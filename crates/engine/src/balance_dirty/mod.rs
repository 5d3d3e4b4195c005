//! IO-less dirty throttling of one writer (Linux's balance_dirty_pages
//! since 3.2). A writer never writes back itself; it sleeps in short
//! pauses sized so that it dirties at `dirty_ratelimit * pos_ratio`.
//!
//! - Below the freerun ceiling nobody sleeps; the writer looks again after
//!   about sqrt(thresh - dirty) more pages.
//! - Above it, the pause is the time the pages dirtied since the last pause
//!   should have taken at the task's rate, minus the time that already
//!   passed (think time), bounded by `max_pause` (≤ 200 ms).
//! - Pauses shorter than `min_pause` are not taken; the debt is carried.
//! - One pass (`balance_dirty_pages`): once a task has dirtied its
//!   `nr_dirtied_pause` pages (`throttle_check_point`), it looks at its
//!   writeback context's limits (the dirty_throttle_control, `dtc`,
//!   dirty_limits.rs), runs free under the freerun ceiling and is
//!   throttled above it. The write path (write_path/,
//!   `maybe_throttle`)
//!   kicks background writeback over the background threshold and turns a
//!   pause into a stall. `dirty_throttle = "global-2007"` goes to
//!   dirty_throttle_2007.rs.

pub(crate) mod task_dirty;

use crate::action::{Stall, StallReason, ThrottleDetail, MAX_PAUSE_NS};
use crate::balance_dirty::task_dirty::{TaskDirty, MAX_DIRTIED_PAUSE};
use crate::config::DirtyThrottle;
use crate::dirty_limits::{dirty_freerun_ceiling, dirty_poll_interval, Dtc};
use crate::dirty_throttle_2007::{ratelimit_pages_2007, RATELIMIT_EXCEEDED_2007};
use crate::position_ratio::wb_position_ratio;
use crate::time::{Instant, NS_PER_MS, NS_PER_SEC};

/// Linux's DIRTY_POLL_THRESH (128 KiB): the smallest useful batch of pages between checks.
pub const DIRTY_POLL_THRESH: u64 = 32;
/// The longest pause for a context: about 1/8 of the time its device needs
/// to write the context's dirty pages, so the pool never runs dry while the
/// writer sleeps; never above 200 ms.
pub fn wb_max_pause(avg_write_bw: u64, wb_dirty: u64) -> u64 {
    let t = wb_dirty as u128 * NS_PER_SEC as u128 / (8 * (avg_write_bw as u128 + 1));
    (NS_PER_MS + t.min(u64::MAX as u128) as u64).min(MAX_PAUSE_NS)
}

/// The shortest pause worth taking, and how many pages to dirty before the
/// next check (Linux's wb_min_pause). Aims for pauses near max_pause / 2 with
/// at least DIRTY_POLL_THRESH pages in between.
pub fn wb_min_pause(
    avg_write_bw: u64,
    dirty_ratelimit: u64,
    task_ratelimit: u64,
    max_pause_ns: u64,
) -> (u64, u64) {
    let hi = avg_write_bw.max(1).ilog2() as u64;
    let lo = dirty_ratelimit.max(1).ilog2() as u64;
    let mut t = max_pause_ns / 2;
    // When the rate limit is far below the bandwidth, there are probably
    // other dirtiers (or think time): allow longer pauses, ~10 ms per power of 2.
    if hi > lo {
        t += (hi - lo) * 10 * NS_PER_MS;
    }
    t = t.min(NS_PER_MS + max_pause_ns / 2);
    let pages_in = |rate: u64, t: u64| (rate as u128 * t as u128 / NS_PER_SEC as u128) as u64;
    let mut pages = pages_in(dirty_ratelimit, t);
    if pages < DIRTY_POLL_THRESH {
        t = max_pause_ns;
        pages = pages_in(dirty_ratelimit, t);
        if pages > DIRTY_POLL_THRESH {
            pages = DIRTY_POLL_THRESH;
            t = NS_PER_SEC * DIRTY_POLL_THRESH / dirty_ratelimit.max(1);
        }
    }
    let pause = NS_PER_SEC as u128 * pages as u128 / (task_ratelimit as u128 + 1);
    if pause > max_pause_ns as u128 {
        t = max_pause_ns;
        pages = pages_in(task_ratelimit, t);
    }
    let pages = pages.clamp(1, MAX_DIRTIED_PAUSE);
    let min_pause = if pages >= DIRTY_POLL_THRESH {
        NS_PER_MS + t / 2
    } else {
        t
    };
    (min_pause, pages)
}

/// Everything one decision needs about the writer's context.
#[derive(Clone, Copy, Debug)]
pub struct ThrottleInput {
    /// Pages per second at pos_ratio 1.
    pub dirty_ratelimit: u64,
    pub pos_ratio: f64,
    pub avg_write_bw: u64,
    pub wb_dirty: u64,
}

/// What the writer must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Throttle {
    /// Carry on; the debt (if any) is remembered.
    Proceed,
    /// Sleep this long. `again`: over the hard limit, look again afterwards.
    Pause { pause_ns: u64, again: bool },
}

/// The freerun case: nothing to do; check again after `poll_pages`.
pub fn freerun(task: &mut TaskDirty, now: Instant, poll_pages: u64) {
    task.dirty_paused_when = Some(now);
    task.nr_dirtied = 0;
    task.nr_dirtied_pause = poll_pages.clamp(1, MAX_DIRTIED_PAUSE);
}

/// One pass of balance_dirty_pages above the freerun ceiling.
pub fn throttle(task: &mut TaskDirty, now: Instant, input: ThrottleInput) -> Throttle {
    assert!(input.pos_ratio >= 0.0);
    let pages_dirtied = task.nr_dirtied;
    let task_ratelimit = (input.dirty_ratelimit as f64 * input.pos_ratio) as u64;
    let max_pause = wb_max_pause(input.avg_write_bw, input.wb_dirty);
    let (min_pause, nr_dirtied_pause) = wb_min_pause(
        input.avg_write_bw,
        input.dirty_ratelimit,
        task_ratelimit,
        max_pause,
    );

    if task_ratelimit == 0 {
        // At or over the hard limit: sleep the longest pause and look again.
        task.dirty_paused_when = Some(now + max_pause);
        task.nr_dirtied = 0;
        task.nr_dirtied_pause = nr_dirtied_pause;
        return Throttle::Pause {
            pause_ns: max_pause,
            again: true,
        };
    }
    let period = (NS_PER_SEC as u128 * pages_dirtied as u128 / task_ratelimit as u128) as i128;
    let mut pause = period;
    if let Some(when) = task.dirty_paused_when {
        pause -= now.as_ns() as i128 - when.as_ns() as i128;
    }
    if pause < min_pause as i128 {
        // Too short to be worth a sleep. Under a second of think time is
        // compensated in later periods; more than that resets (a light dirtier).
        if pause < -(NS_PER_SEC as i128) {
            task.dirty_paused_when = Some(now);
            task.nr_dirtied = 0;
        } else if period > 0 {
            let when = task.dirty_paused_when.unwrap_or(now);
            task.dirty_paused_when = Some(when + period as u64);
            task.nr_dirtied = 0;
        } else if task.nr_dirtied_pause <= pages_dirtied {
            task.nr_dirtied_pause = (task.nr_dirtied_pause + pages_dirtied).min(MAX_DIRTIED_PAUSE);
        }
        return Throttle::Proceed;
    }
    let mut wake = now;
    let mut pause = pause as u64;
    if pause > max_pause {
        // The rate dropped sharply: take max_pause now and count part of the
        // rest as already served, so the next period is not inflated.
        wake = wake + (pause - max_pause).min(max_pause);
        pause = max_pause;
    }
    task.dirty_paused_when = Some(wake + pause);
    task.nr_dirtied = 0;
    task.nr_dirtied_pause = nr_dirtied_pause;
    assert!(pause <= MAX_PAUSE_NS);
    Throttle::Pause {
        pause_ns: pause,
        again: false,
    }
}

/// When the writeback context exceeds its share, check every 8 pages
/// (Linux: 32 >> (PAGE_SHIFT - 10)).
pub const RATELIMIT_EXCEEDED: u64 = 8;

/// The task's pages dirtied since its last look at the limits, and how
/// many it may dirty before it looks again (Linux's ratelimit, in the
/// configured throttle's terms). `exceeded`: its context's dirty_exceeded
/// (io-less), and the 2007 limit's; `memory_pages`: the cache budget.
pub fn throttle_check_point(
    mode: DirtyThrottle,
    task: &TaskDirty,
    (wb_exceeded, exceeded_2007): (bool, bool),
    memory_pages: u64,
) -> (u64, u64) {
    match mode {
        DirtyThrottle::IoLess if wb_exceeded => (
            task.nr_dirtied,
            task.nr_dirtied_pause.min(RATELIMIT_EXCEEDED),
        ),
        DirtyThrottle::IoLess => (task.nr_dirtied, task.nr_dirtied_pause),
        DirtyThrottle::Global2007 if exceeded_2007 => {
            (task.ratelimit_2007, RATELIMIT_EXCEEDED_2007)
        }
        DirtyThrottle::Global2007 => (task.ratelimit_2007, ratelimit_pages_2007(memory_pages)),
    }
}

/// What one pass of `balance_dirty_pages` decided.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Balance {
    /// Under the freerun ceiling: the writer goes on.
    Freerun,
    /// Over it (background writeback is due): whether the writer's
    /// context exceeds its share (its writers then look every
    /// RATELIMIT_EXCEEDED pages), and whether the writer goes on...
    Proceed { dirty_exceeded: bool },
    /// ...or sleeps `detail.pause_ns` (`again`: over the hard limit,
    /// looking again afterwards).
    Pause {
        dirty_exceeded: bool,
        again: bool,
        detail: ThrottleDetail,
    },
}

impl Balance {
    /// Whether the writer's context exceeds its share; None under the
    /// freerun ceiling (nothing changes then).
    pub fn dirty_exceeded(&self) -> Option<bool> {
        match *self {
            Balance::Freerun => None,
            Balance::Proceed { dirty_exceeded } | Balance::Pause { dirty_exceeded, .. } => {
                Some(dirty_exceeded)
            }
        }
    }

    /// The writer's sleep from `now`, if any (stall `dirty_throttle`,
    /// which no event cuts short), and whether it looks again afterwards.
    pub fn pause(&self, now: Instant) -> Option<(Stall, bool)> {
        let Balance::Pause { again, detail, .. } = *self else {
            return None;
        };
        let stall = Stall {
            reason: StallReason::DirtyThrottle,
            until: now + detail.pause_ns,
            wakeable: false,
            throttle: Some(detail),
        };
        Some((stall, again))
    }
}

/// Linux's balance_dirty_pages, one pass, over the writer's context: its
/// throttle control `dtc`, `strict_limit` (its own share throttles even
/// when the global pool is fine), and its write bandwidth and balanced
/// rate (`avg_write_bw`, `dirty_ratelimit`, pages/s). Updates the task's
/// own state (`freerun`, `throttle`).
pub fn balance_dirty_pages(
    task: &mut TaskDirty,
    now: Instant,
    dtc: &Dtc,
    strict_limit: bool,
    (avg_write_bw, dirty_ratelimit): (u64, u64),
) -> Balance {
    let (dirty, ceiling, thresh) = if strict_limit {
        let ceiling = dirty_freerun_ceiling(dtc.wb_thresh, dtc.wb_bg_thresh);
        (dtc.wb_dirty, ceiling, dtc.wb_thresh)
    } else {
        (dtc.dirty, dtc.freerun(), dtc.thresh)
    };
    if dirty <= ceiling {
        freerun(task, now, dirty_poll_interval(dirty, thresh));
        return Balance::Freerun;
    }
    let pos_ratio = wb_position_ratio(dtc, avg_write_bw, strict_limit);
    let dirty_exceeded = dtc.wb_dirty > dtc.wb_thresh && (dtc.dirty > dtc.thresh || strict_limit);
    let input = ThrottleInput {
        dirty_ratelimit,
        pos_ratio,
        avg_write_bw,
        wb_dirty: dtc.wb_dirty,
    };
    match throttle(task, now, input) {
        Throttle::Proceed => Balance::Proceed { dirty_exceeded },
        Throttle::Pause { pause_ns, again } => Balance::Pause {
            dirty_exceeded,
            again,
            detail: ThrottleDetail {
                pause_ns,
                pos_ratio_permille: (pos_ratio * 1000.0) as u64,
                task_ratelimit_pages_s: (dirty_ratelimit as f64 * pos_ratio) as u64,
                dirty_pages: dtc.dirty,
                thresh_pages: dtc.thresh,
                limit_pages: dtc.limit,
                wb_dirty_pages: dtc.wb_dirty,
                wb_thresh_pages: dtc.wb_thresh,
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_balance_pause_is_a_stall_of_its_length() {
        let now = Instant(5 * NS_PER_SEC);
        let detail = ThrottleDetail {
            pause_ns: 40 * NS_PER_MS,
            ..ThrottleDetail::default()
        };
        let pause = Balance::Pause {
            dirty_exceeded: true,
            again: true,
            detail,
        };
        assert_eq!(pause.dirty_exceeded(), Some(true));
        let stall = Stall {
            reason: StallReason::DirtyThrottle,
            until: Instant(5 * NS_PER_SEC + 40 * NS_PER_MS),
            wakeable: false,
            throttle: Some(detail),
        };
        assert_eq!(pause.pause(now), Some((stall, true)));
        let proceed = Balance::Proceed {
            dirty_exceeded: false,
        };
        assert_eq!(proceed.dirty_exceeded(), Some(false));
        assert_eq!(proceed.pause(now), None);
        assert_eq!(Balance::Freerun.dirty_exceeded(), None);
        assert_eq!(Balance::Freerun.pause(now), None);
    }

    #[test]
    fn max_pause_bounds() {
        assert_eq!(wb_max_pause(25_600, 0), NS_PER_MS);
        assert_eq!(wb_max_pause(1, 1 << 30), MAX_PAUSE_NS);
        // 2560 pages/s, 2560 dirty: 1/8 s = 125 ms (+1 ms).
        let p = wb_max_pause(2560, 2560);
        assert!(
            (p as i64 - 126 * NS_PER_MS as i64).abs() < NS_PER_MS as i64,
            "{p}"
        );
    }

    #[test]
    fn pause_matches_rate() {
        let mut task = TaskDirty::default();
        let now = Instant(10 * NS_PER_SEC);
        task.dirty_paused_when = Some(now);
        task.nr_dirtied = 256;
        let input = ThrottleInput {
            dirty_ratelimit: 2560,
            pos_ratio: 1.0,
            avg_write_bw: 2560,
            wb_dirty: 50_000,
        };
        // 256 pages at 2560 pages/s = 100 ms, none of it already served.
        assert_eq!(
            throttle(&mut task, now, input),
            Throttle::Pause {
                pause_ns: 100 * NS_PER_MS,
                again: false
            }
        );
        assert_eq!(task.dirty_paused_when, Some(now + 100 * NS_PER_MS));
        assert_eq!(task.nr_dirtied, 0);
    }

    #[test]
    fn think_time_is_credited() {
        let mut task = TaskDirty::default();
        let now = Instant(10 * NS_PER_SEC);
        task.dirty_paused_when = Some(now - 90 * NS_PER_MS);
        task.nr_dirtied = 256;
        let input = ThrottleInput {
            dirty_ratelimit: 2560,
            pos_ratio: 1.0,
            avg_write_bw: 2560,
            wb_dirty: 50_000,
        };
        assert_eq!(
            throttle(&mut task, now, input),
            Throttle::Proceed,
            "10 ms left < min_pause"
        );
        assert_eq!(
            task.dirty_paused_when,
            Some(now - 90 * NS_PER_MS + 100 * NS_PER_MS)
        );
    }

    #[test]
    fn pauses_never_exceed_bound() {
        let mut task = TaskDirty {
            nr_dirtied: 100_000,
            ..TaskDirty::default()
        };
        let input = ThrottleInput {
            dirty_ratelimit: 1000,
            pos_ratio: 0.01,
            avg_write_bw: 10,
            wb_dirty: 1 << 30,
        };
        match throttle(&mut task, Instant(NS_PER_SEC), input) {
            Throttle::Pause { pause_ns, again } => {
                assert_eq!(pause_ns, MAX_PAUSE_NS);
                assert!(!again);
            }
            other => panic!("{other:?}"),
        }
        let over = ThrottleInput {
            pos_ratio: 0.0,
            ..input
        };
        assert_eq!(
            throttle(&mut task, Instant(NS_PER_SEC), over),
            Throttle::Pause {
                pause_ns: MAX_PAUSE_NS,
                again: true
            }
        );
    }

    #[test]
    fn check_point_follows_the_throttle_and_its_exceeded_bit() {
        let task = TaskDirty {
            nr_dirtied: 10,
            nr_dirtied_pause: 32,
            ratelimit_2007: 5,
            ..TaskDirty::default()
        };
        let point = |mode, exceeded, memory_pages| {
            throttle_check_point(mode, &task, exceeded, memory_pages)
        };
        assert_eq!(point(DirtyThrottle::IoLess, (false, true), 0), (10, 32));
        assert_eq!(point(DirtyThrottle::IoLess, (true, false), 0), (10, 8));
        // 65536 / 32 = 2048 pages, capped at 1024; 100 / 32 = 3, raised to 16.
        let global = DirtyThrottle::Global2007;
        assert_eq!(point(global, (true, false), 65_536), (5, 1024));
        assert_eq!(point(global, (false, false), 100), (5, 16));
        assert_eq!(point(global, (false, true), 65_536), (5, 8));
    }

    #[test]
    fn balance_runs_free_under_the_ceiling_and_pauses_longest_over_the_limit() {
        let now = Instant(10 * NS_PER_SEC);
        let mut task = TaskDirty {
            nr_dirtied: 300,
            ..TaskDirty::default()
        };
        let mut dtc = Dtc {
            dirty: 100,
            thresh: 1000,
            bg_thresh: 500,
            limit: 1000,
            wb_dirty: 100,
            wb_thresh: 1000,
            wb_bg_thresh: 500,
        };
        // Ceiling (1000 + 500) / 2 = 750; next look after
        // 2^(ilog2(1000 - 100) / 2) = 2^(9 / 2) = 16 pages.
        let got = balance_dirty_pages(&mut task, now, &dtc, false, (2559, 1000));
        assert_eq!(got, Balance::Freerun);
        assert_eq!((task.nr_dirtied, task.nr_dirtied_pause), (0, 16));
        assert_eq!(task.dirty_paused_when, Some(now));
        // Over the hard limit: pos_ratio 0, the longest pause, 1 ms +
        // 2048 pages / (8 x 2560 pages/s) = 101 ms, and look again; the
        // context holds over its share while the domain is over its
        // threshold.
        dtc = Dtc {
            dirty: 4100,
            thresh: 4000,
            bg_thresh: 2000,
            limit: 4000,
            wb_dirty: 2048,
            wb_thresh: 1000,
            wb_bg_thresh: 500,
        };
        let want = Balance::Pause {
            dirty_exceeded: true,
            again: true,
            detail: ThrottleDetail {
                pause_ns: 101 * NS_PER_MS,
                pos_ratio_permille: 0,
                task_ratelimit_pages_s: 0,
                dirty_pages: 4100,
                thresh_pages: 4000,
                limit_pages: 4000,
                wb_dirty_pages: 2048,
                wb_thresh_pages: 1000,
            },
        };
        let got = balance_dirty_pages(&mut task, now, &dtc, false, (2559, 1000));
        assert_eq!(got, want);
        assert_eq!(task.dirty_paused_when, Some(now + 101 * NS_PER_MS));
    }

    #[test]
    fn min_pause_aims_for_batches() {
        let (min_pause, pages) = wb_min_pause(25_600, 25_600, 25_600, MAX_PAUSE_NS);
        assert!(pages >= DIRTY_POLL_THRESH);
        assert!(min_pause <= MAX_PAUSE_NS / 2 + 2 * NS_PER_MS);
    }
}
