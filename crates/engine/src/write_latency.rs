//! How long the device takes to write a full request when nothing is
//! queued ahead of it: the least latency of a write at least half the
//! device's largest request, scaled to a full one (a device writing a
//! half request in half the time would otherwise look twice as fast),
//! over the last one to two windows of
//! `WRITE_LAT_WINDOW_NS` (a windowed minimum, as BBR keeps its min RTT:
//! queueing only adds to a latency, so the least one seen lately is the
//! device's own, and a device that got slower shows it within two
//! windows).
//!
//! Ours, for the uncached limit (`dontcache/`): a device that takes long
//! per request but serves many at once (a deep array, network storage)
//! runs at its rate only with rate × latency pages in flight (Little's
//! law), which a window of the rate alone may not hold.

use crate::time::{Instant, NS_PER_SEC};

/// A window of the minimum: samples older than two windows are forgotten.
pub const WRITE_LAT_WINDOW_NS: u64 = 5 * NS_PER_SEC;

/// The windowed minimum latency of full writes.
#[derive(Clone, Copy, Debug)]
pub struct FullWriteLatency {
    window_start: Instant,
    current_min_ns: Option<u64>,
    previous_min_ns: Option<u64>,
}

impl FullWriteLatency {
    pub fn new(now: Instant) -> FullWriteLatency {
        FullWriteLatency {
            window_start: now,
            current_min_ns: None,
            previous_min_ns: None,
        }
    }

    /// A write of `pages` completed `latency_ns` after it was issued, on a
    /// device whose requests carry at most `max_request_pages`. Writes
    /// under half that say little about a full one and are left out.
    pub fn sample(&mut self, now: Instant, latency_ns: u64, pages: u64, max_request_pages: u64) {
        if pages == 0 || pages * 2 < max_request_pages {
            return;
        }
        let full = latency_ns as u128 * max_request_pages.max(pages) as u128 / pages as u128;
        let latency_ns = full.min(u64::MAX as u128) as u64;
        self.roll(now);
        self.current_min_ns = Some(
            self.current_min_ns
                .map_or(latency_ns, |m| m.min(latency_ns)),
        );
    }

    /// The least latency of a full write seen in the last one to two
    /// windows, if any.
    pub fn min_ns(&self, now: Instant) -> Option<u64> {
        let age_ns = now.since_ns(self.window_start);
        if age_ns >= 2 * WRITE_LAT_WINDOW_NS {
            return None;
        }
        if age_ns >= WRITE_LAT_WINDOW_NS {
            return self.current_min_ns;
        }
        match (self.current_min_ns, self.previous_min_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn roll(&mut self, now: Instant) {
        let age_ns = now.since_ns(self.window_start);
        if age_ns < WRITE_LAT_WINDOW_NS {
            return;
        }
        self.previous_min_ns = if age_ns < 2 * WRITE_LAT_WINDOW_NS {
            self.current_min_ns
        } else {
            None
        };
        self.current_min_ns = None;
        self.window_start = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_MS;

    #[test]
    fn the_least_full_write_of_the_last_windows_counts() {
        let mut l = FullWriteLatency::new(Instant(0));
        assert_eq!(l.min_ns(Instant(0)), None);
        // A small write is left out; full ones keep their minimum.
        l.sample(Instant(1), NS_PER_MS, 10, 256);
        assert_eq!(l.min_ns(Instant(1)), None);
        l.sample(Instant(2), 40 * NS_PER_MS, 256, 256);
        // Half a request in 17 ms: a full one in 34.
        l.sample(Instant(3), 17 * NS_PER_MS, 128, 256);
        l.sample(Instant(4), 30 * NS_PER_MS, 256, 256);
        l.sample(Instant(5), 50 * NS_PER_MS, 256, 256);
        assert_eq!(l.min_ns(Instant(5)), Some(30 * NS_PER_MS));
        // A new window keeps the last one's minimum beside its own...
        let w1 = Instant(WRITE_LAT_WINDOW_NS + 10);
        l.sample(w1, 60 * NS_PER_MS, 256, 256);
        assert_eq!(l.min_ns(w1), Some(30 * NS_PER_MS));
        // ...until it is a window old itself: the device got slower.
        let w2 = Instant(2 * WRITE_LAT_WINDOW_NS + 20);
        l.sample(w2, 70 * NS_PER_MS, 256, 256);
        assert_eq!(l.min_ns(w2), Some(60 * NS_PER_MS));
        // Nothing for two windows: nothing known.
        assert_eq!(l.min_ns(Instant(4 * WRITE_LAT_WINDOW_NS + 20)), None);
        assert_eq!(
            l.min_ns(Instant(3 * WRITE_LAT_WINDOW_NS + 30)),
            Some(70 * NS_PER_MS)
        );
    }
}
