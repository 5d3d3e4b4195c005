//! What a backlog's steps cost: each item's next step, its estimated
//! cost learned from the steps measured (EWMA, weight 1/8), and the
//! watermarks in nanoseconds of work. Pure functions and one small
//! struct.
//!
//! Each item carries the estimated cost of its next step, `MiB freed x
//! est_mib_ns` (fractions of a MiB too), plus `est_file_ns` for a
//! removal, learned from the steps' measured durations. The backlog's
//! level is the sum of its items' estimates (the one in progress
//! included). With `backlog_throttle = watermarks`:
//!
//! - low = `backlog_wait_ms` of work, high = twice that: high − low is
//!   what the worker does in `backlog_wait_ms`, i.e. the measured item
//!   rate times `backlog_wait_ms` items;
//! - a producer that finds the level at or over high, or the throttle bit
//!   set, sets the bit and sleeps (stall `backlog`) until the worker has
//!   brought the level under low, which clears the bit and wakes every
//!   producer. So a producer waits about `backlog_wait_ms`, plus a
//!   documented margin of two steps (the item that took the level over
//!   high, and the step in progress when it falls under low: each frees
//!   at most `RELEASE_STEP_BYTES`), plus the error of the estimates;
//! - the level never exceeds high plus one step per producer (each checks
//!   before it adds). Parked files are not in the level: each holds the
//!   rest of a large file, one entry, freed when the backlog has room.
//!
//! With `backlog_throttle = flush-all` (XFS 2021), the worker releases a
//! file whole before the next (its steps back to back, as XFS inactivates
//! an inode), and a producer that finds more than `FLUSH_ALL_MAX_ITEMS`
//! items waits until every item queued before it is done (flush_work):
//! however long that is.

use crate::action::ReleaseStep;

/// The most blocks one release step frees. A producer's wait overshoots
/// `backlog_wait_ms` by at most two steps: the item that took the level
/// over high, and the step in progress when the level falls under low.
pub const RELEASE_STEP_BYTES: u64 = 16 << 20;
/// First estimates, before any step was measured: 50 us a file (Chinner's
/// ~20,000 inactivations/s) and 1 ms a MiB (ext4 freeing a fragmented
/// file's extents: a GiB in about a second).
const INITIAL_EST_FILE_NS: u64 = 50_000;
const INITIAL_EST_MIB_NS: u64 = 1_000_000;
/// A removal step measures the per-file cost when it frees less than this.
const SMALL_REMOVE_BYTES: u64 = 1 << 20;
const MIB: u64 = 1 << 20;

/// What an item does to its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemKind {
    /// An unlinked file: its pages dropped (`Start`), its backing file cut
    /// in steps, then removed; the file id is retired.
    Remove,
    /// A large truncation: the backing file cut in steps down to `to`
    /// bytes; the file stays (its pages past `to` were dropped by the
    /// truncation already).
    Cut { to: u64 },
}

/// The next step of an item with `bytes` left, and what it frees.
pub fn next_step(kind: ItemKind, bytes: u64) -> (ReleaseStep, u64) {
    let to = match kind {
        ItemKind::Remove => 0,
        ItemKind::Cut { to } => to,
    };
    if bytes > RELEASE_STEP_BYTES {
        let len = to + bytes - RELEASE_STEP_BYTES;
        (ReleaseStep::Truncate { len }, RELEASE_STEP_BYTES)
    } else if kind == ItemKind::Remove {
        (ReleaseStep::Remove, bytes)
    } else {
        (ReleaseStep::Truncate { len: to }, bytes)
    }
}

/// (high, low): low is `backlog_wait_ms` of work, high twice that.
pub fn watermarks_ns(wait_ms: u32) -> (u64, u64) {
    let low = wait_ms as u64 * 1_000_000;
    (2 * low, low)
}

/// The learned costs: of removing a file, and of freeing a MiB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Estimates {
    pub file_ns: u64,
    pub mib_ns: u64,
}

impl Default for Estimates {
    fn default() -> Estimates {
        Estimates {
            file_ns: INITIAL_EST_FILE_NS,
            mib_ns: INITIAL_EST_MIB_NS,
        }
    }
}

impl Estimates {
    /// Estimated cost of the next step of an item with `bytes` left.
    pub fn cost_ns(&self, kind: ItemKind, bytes: u64) -> u64 {
        let (step, freed) = next_step(kind, bytes);
        let file = if step == ReleaseStep::Remove {
            self.file_ns
        } else {
            0
        };
        file + (freed as u128 * self.mib_ns as u128 / MIB as u128) as u64
    }

    /// Learns from a finished step: (bytes freed, what it took).
    pub fn learn(&mut self, step: ReleaseStep, bytes: u64, took_ns: u64) {
        let ewma = |old: u64, new: u64| (old * 7 + new) / 8;
        match step {
            ReleaseStep::Remove if bytes < SMALL_REMOVE_BYTES => {
                self.file_ns = ewma(self.file_ns, took_ns).max(1);
            }
            ReleaseStep::Truncate { .. } if bytes >= MIB => {
                let per_mib = (took_ns as u128 * MIB as u128 / bytes as u128) as u64;
                self.mib_ns = ewma(self.mib_ns, per_mib).max(1);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_item_is_cut_in_steps_then_removed() {
        let big = 40 << 20;
        assert_eq!(
            next_step(ItemKind::Remove, big),
            (
                ReleaseStep::Truncate {
                    len: big - RELEASE_STEP_BYTES
                },
                RELEASE_STEP_BYTES
            )
        );
        assert_eq!(
            next_step(ItemKind::Remove, 4096),
            (ReleaseStep::Remove, 4096)
        );
        // A cut stops at its target and is never a removal.
        assert_eq!(
            next_step(ItemKind::Cut { to: 1 << 20 }, 4096),
            (ReleaseStep::Truncate { len: 1 << 20 }, 4096)
        );
    }

    #[test]
    fn costs_follow_what_steps_took() {
        let mut est = Estimates::default();
        assert_eq!(est.cost_ns(ItemKind::Remove, 0), INITIAL_EST_FILE_NS);
        assert_eq!(
            est.cost_ns(ItemKind::Remove, 2 * MIB),
            INITIAL_EST_FILE_NS + 2 * INITIAL_EST_MIB_NS
        );
        // A 16 MiB cut that took 160 ms: 10 ms a MiB, weighted 1/8.
        est.learn(ReleaseStep::Truncate { len: 0 }, 16 * MIB, 160_000_000);
        assert_eq!(est.mib_ns, (7 * INITIAL_EST_MIB_NS + 10_000_000) / 8);
        // A small removal teaches the per-file cost; a large one does not.
        est.learn(ReleaseStep::Remove, 4096, 850_000);
        assert_eq!(est.file_ns, (7 * INITIAL_EST_FILE_NS + 850_000) / 8);
        est.learn(ReleaseStep::Remove, 2 * MIB, 1);
        assert_eq!(est.file_ns, (7 * INITIAL_EST_FILE_NS + 850_000) / 8);
        assert_eq!(watermarks_ns(100), (200_000_000, 100_000_000));
    }
}
