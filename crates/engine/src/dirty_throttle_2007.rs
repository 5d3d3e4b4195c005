//! The 2007 global dirty limit (Linux before 2.6.24), kept to show the
//! pathology Sekiyama reported (`dirty_throttle = "global-2007"`).
//!
//! - One global threshold; every `ratelimit_pages_2007` pages dirtied
//!   (memory / 32, within [16, 1024]) a writer looks at it.
//! - Over it, the writer queues writeback of its own device and waits
//!   until that device has written 1.5 × that many pages or the global
//!   count is under the threshold, looking again every congestion_wait.
//! - A writer to an idle fast device therefore waits for a slow device
//!   that holds most of the dirty memory: the bug the per-device limits of
//!   balance_dirty/ fixed.
//!
//! The write path (write_path/, `throttle_2007`) applies it.

use crate::action::{Stall, StallReason, WbReason};
use crate::flusher::work::Work;
use crate::time::{Instant, NS_PER_MS};

/// At most this many pages dirtied between a 2007-style writer's looks at
/// the limit (Linux 2.6.22's ratelimit_pages cap: 4 MiB)...
pub const RATELIMIT_PAGES_2007: u64 = 1024;
/// ...and at least this many.
pub const RATELIMIT_PAGES_MIN_2007: u64 = 16;
/// ...or after this many once the limit was exceeded.
pub const RATELIMIT_EXCEEDED_2007: u64 = 8;

/// Linux 2.6.22's writeback_set_ratelimit for one CPU: memory / 32 pages
/// between looks at the limit, within [16, 1024], so a small cache does
/// not run past its threshold by a fixed 4 MiB.
pub fn ratelimit_pages_2007(memory_pages: u64) -> u64 {
    (memory_pages / 32).clamp(RATELIMIT_PAGES_MIN_2007, RATELIMIT_PAGES_2007)
}

/// A 2007-style throttled writer is released once its own device wrote
/// this many pages (1.5 × ratelimit_pages: "we've done our duty").
pub fn write_chunk_2007(memory_pages: u64) -> u64 {
    ratelimit_pages_2007(memory_pages) * 3 / 2
}
/// ...and otherwise looks again after congestion_wait(HZ/10).
pub const CONGESTION_WAIT_NS: u64 = 100 * NS_PER_MS;

/// The wait of a writer over the limit from `now`: for its device to
/// write (a completion wakes it) or congestion_wait's 100 ms.
pub fn stall_2007(now: Instant) -> Stall {
    Stall {
        reason: StallReason::DirtyThrottle,
        until: now + CONGESTION_WAIT_NS,
        wakeable: true,
        throttle: None,
    }
}

/// Whether a writer that looks at the limit waits on: while the global
/// count is over it (`over`) and its own device has written less than a
/// chunk since the writer began to wait. `since` is the device's written
/// count (`written` now) when it began: set here, cleared on release.
pub fn waits_2007(over: bool, written: u64, since: &mut Option<u64>, memory_pages: u64) -> bool {
    let baseline = *since.get_or_insert(written);
    if !over || written - baseline >= write_chunk_2007(memory_pages) {
        *since = None;
        return false;
    }
    true
}

/// The writeback a waiting writer asks of its own device's flusher when
/// that is idle: one chunk.
pub fn work_2007(memory_pages: u64) -> Work {
    Work {
        reason: WbReason::BalanceDirty,
        nr_pages: write_chunk_2007(memory_pages),
        for_background: false,
        older_than: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_2007_wait_is_100_ms_or_a_completion() {
        let s = stall_2007(Instant(7 * NS_PER_MS));
        assert_eq!(s.until, Instant(107 * NS_PER_MS));
        assert!(s.wakeable);
        assert_eq!(s.reason, StallReason::DirtyThrottle);
        assert_eq!(s.throttle, None);
    }

    #[test]
    fn a_writer_waits_for_a_chunk_of_its_own_device_or_the_count() {
        // 65536 pages: ratelimit 2048 capped at 1024, a chunk 1536.
        let memory_pages = 65_536;
        let mut since = None;
        assert!(waits_2007(true, 100, &mut since, memory_pages));
        assert_eq!(since, Some(100));
        assert!(
            waits_2007(true, 1635, &mut since, memory_pages),
            "1535 written"
        );
        assert!(!waits_2007(true, 1636, &mut since, memory_pages), "a chunk");
        assert_eq!(since, None);
        assert!(!waits_2007(false, 7, &mut since, memory_pages), "under");
        assert_eq!(since, None);
        assert_eq!(work_2007(memory_pages).nr_pages, 1536);
    }
}
