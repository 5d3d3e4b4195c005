//! A context's write completion rate over the last slot: what uncached
//! writers are paced by (dontcache/).

use crate::time::{Instant, NS_PER_MS, NS_PER_SEC};

/// Pages a context's writes completed per second over the last slot of
/// `WRITTEN_RATE_SLOT_NS` (the pace of uncached writers follows it:
/// Linux's write bandwidth estimate moves ~5 % per 200 ms, too slowly to
/// pace by without locking a fast device down to its first estimate).
#[derive(Clone, Copy, Debug)]
pub struct WrittenRate {
    slot_start: Instant,
    written_at_start: u64,
    pub(super) pages_s: u64,
    measured: bool,
}

/// The slot over which `WrittenRate` counts completions.
pub const WRITTEN_RATE_SLOT_NS: u64 = 50 * NS_PER_MS;

impl WrittenRate {
    pub fn new(now: Instant) -> WrittenRate {
        WrittenRate {
            slot_start: now,
            written_at_start: 0,
            pages_s: 0,
            measured: false,
        }
    }

    /// Whether a rate was measured yet, with `written` pages written so
    /// far. Until a first slot has passed a context's uncached writers
    /// meet only the limit, so the first rate measured is what the device
    /// takes, not what a guess let through.
    pub(crate) fn update(&mut self, now: Instant, written: u64) -> bool {
        let elapsed = now.since_ns(self.slot_start);
        if elapsed >= WRITTEN_RATE_SLOT_NS {
            let pages = written.saturating_sub(self.written_at_start) as u128;
            self.pages_s = (pages * NS_PER_SEC as u128 / elapsed as u128) as u64;
            self.slot_start = now;
            self.written_at_start = written;
            self.measured = true;
        }
        self.measured
    }
}
