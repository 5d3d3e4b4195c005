//! One context's write-bandwidth estimate and its arithmetic (bandwidth/
//! updates it every 200 ms).

use crate::time::{Instant, NS_PER_MS, NS_PER_SEC};

/// Linux's BANDWIDTH_INTERVAL.
pub const BANDWIDTH_INTERVAL_NS: u64 = 200 * NS_PER_MS;
/// Linux's averaging period, roundup_pow_of_two(3 * HZ) jiffies at HZ=1000: 4.096 s.
pub const BANDWIDTH_PERIOD_NS: u64 = 4096 * NS_PER_MS;
/// Linux's INIT_BW: 100 MB/s, in pages per second.
pub const INIT_BW_PAGES_S: u64 = (100 << 20) / 4096;

#[derive(Clone, Debug)]
pub struct WriteBandwidth {
    /// Pages per second, smoothed over the period.
    pub write_bw: u64,
    /// Pages per second, smoothed once more; what the throttle uses.
    pub avg_write_bw: u64,
    pub written_stamp: u64,
    pub dirtied_stamp: u64,
    pub time_stamp: Instant,
}

impl WriteBandwidth {
    pub fn new(now: Instant) -> WriteBandwidth {
        WriteBandwidth {
            write_bw: INIT_BW_PAGES_S,
            avg_write_bw: INIT_BW_PAGES_S,
            written_stamp: 0,
            dirtied_stamp: 0,
            time_stamp: now,
        }
    }

    /// Restart the interval after an idle spell, so idle time does not
    /// count as zero bandwidth (Linux's wb_bandwidth_estimate_start).
    pub fn restart(&mut self, now: Instant, written: u64, dirtied: u64) {
        if now.since_ns(self.time_stamp) > BANDWIDTH_INTERVAL_NS {
            self.time_stamp = now;
            self.written_stamp = written;
            self.dirtied_stamp = dirtied;
        }
    }

    /// Folds the pages written since the last update into the estimate.
    pub fn update(&mut self, now: Instant, written: u64) {
        let elapsed = now.since_ns(self.time_stamp);
        if elapsed == 0 {
            return;
        }
        let delta = written.saturating_sub(self.written_stamp) as u128;
        let old = self.write_bw;
        let mut avg = self.avg_write_bw;
        let bw;
        if elapsed > BANDWIDTH_PERIOD_NS {
            bw = (delta * NS_PER_SEC as u128 / elapsed as u128) as u64;
            avg = bw;
        } else {
            let weighted =
                delta * NS_PER_SEC as u128 + old as u128 * (BANDWIDTH_PERIOD_NS - elapsed) as u128;
            bw = (weighted / BANDWIDTH_PERIOD_NS as u128) as u64;
            // Filter out spikes: follow only when the raw estimate agrees.
            if avg > old && old >= bw {
                avg -= (avg - old) >> 3;
            }
            if avg < old && old <= bw {
                avg += (old - avg) >> 3;
            }
        }
        self.write_bw = bw;
        self.avg_write_bw = avg.max(1);
        self.written_stamp = written;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converges_to_the_true_rate() {
        // A device writing 2560 pages/s (10 MiB/s), starting from the 100 MB/s guess.
        let mut bw = WriteBandwidth::new(Instant(0));
        let mut written = 0;
        let mut now = Instant(0);
        for _ in 0..200 {
            now = now + BANDWIDTH_INTERVAL_NS;
            written += 512;
            bw.update(now, written);
            bw.time_stamp = now;
        }
        let err = (bw.write_bw as i64 - 2560).abs();
        assert!(err <= 30, "write_bw {}", bw.write_bw);
        assert!(
            (bw.avg_write_bw as i64 - 2560).abs() <= 300,
            "avg {}",
            bw.avg_write_bw
        );
    }

    #[test]
    fn long_gap_takes_the_raw_rate() {
        let mut bw = WriteBandwidth::new(Instant(0));
        bw.update(Instant(10 * NS_PER_SEC), 1000);
        assert_eq!(bw.write_bw, 100);
        assert_eq!(bw.avg_write_bw, 100);
    }

    #[test]
    fn one_interval_moves_by_its_weight() {
        let mut bw = WriteBandwidth::new(Instant(0));
        bw.update(Instant(BANDWIDTH_INTERVAL_NS), 0);
        // bw = old * (4096 - 200) / 4096
        assert_eq!(bw.write_bw, INIT_BW_PAGES_S * 3896 / 4096);
        // avg only follows once it differs from the raw estimate's direction.
        assert_eq!(bw.avg_write_bw, INIT_BW_PAGES_S);
    }
}
