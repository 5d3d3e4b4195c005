//! Write-bandwidth estimate per writeback context (Linux's
//! wb_update_write_bandwidth): updated every 200 ms from pages written,
//! averaged over a ~3 s period, with a second smoothing stage that only
//! follows the estimate when the raw value confirms the direction.

use crate::engine::Engine;
use crate::ids::WbId;
use crate::ratelimit::RatelimitInput;
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

impl Engine {
    /// Keeps the device's peak write bandwidth: its contexts' current
    /// estimates summed, if higher than any before.
    fn note_write_bw_peak(&mut self, device: crate::ids::DeviceId) {
        let dev = &self.devices[device.index()];
        let total: u64 = dev
            .wbs
            .iter()
            .map(|w| self.wbs[w.index()].bw.write_bw)
            .sum();
        let dev = &mut self.devices[device.index()];
        dev.write_bw_peak = dev.write_bw_peak.max(total);
    }

    /// Every 200 ms: bandwidth estimates, and the dirty rate limits of
    /// contexts whose writers are in the throttled zone.
    pub(crate) fn update_bandwidths(&mut self, now: Instant) {
        let dirty = self.nr_dirty + self.nr_writeback;
        // The hard limit follows the threshold up at once and down slowly.
        let target = self.dom.thresh.thresh.max(dirty);
        if self.dom.dirty_limit < self.dom.thresh.thresh {
            self.dom.dirty_limit = self.dom.thresh.thresh;
        } else if self.dom.dirty_limit > target {
            self.dom.dirty_limit -= (self.dom.dirty_limit - target) >> 5;
        }
        for w in 0..self.wbs.len() {
            let wb_id = WbId(w as u32);
            let elapsed = now.since_ns(self.wbs[w].bw.time_stamp);
            if !self.wbs[w].has_io() || elapsed < crate::bandwidth::BANDWIDTH_INTERVAL_NS {
                continue;
            }
            let dtc = self.dtc(wb_id);
            let strict = self.devices[self.wbs[w].device.index()].config.strict_limit;
            let (control_dirty, setpoint, freerun) = if strict {
                let wb_setpoint = if dtc.wb_dirty < 8 {
                    dtc.wb_dirty + 1
                } else {
                    (dtc.wb_thresh + dtc.wb_bg_thresh) / 2
                };
                (
                    dtc.wb_dirty,
                    wb_setpoint,
                    crate::dirty_limits::dirty_freerun_ceiling(dtc.wb_thresh, dtc.wb_bg_thresh),
                )
            } else {
                (dtc.dirty, dtc.setpoint(), dtc.freerun())
            };
            let wb = &mut self.wbs[w];
            if control_dirty > freerun {
                let pos_ratio =
                    crate::position_ratio::wb_position_ratio(&dtc, wb.bw.avg_write_bw, strict);
                wb.rl.update(RatelimitInput {
                    dirtied: wb.dirtied - wb.bw.dirtied_stamp,
                    elapsed_ns: elapsed,
                    pos_ratio,
                    write_bw: wb.bw.avg_write_bw,
                    dirty: control_dirty,
                    setpoint,
                });
            }
            wb.bw.update(now, wb.written);
            wb.bw.dirtied_stamp = wb.dirtied;
            wb.bw.time_stamp = now;
            self.note_write_bw_peak(self.wbs[w].device);
        }
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
