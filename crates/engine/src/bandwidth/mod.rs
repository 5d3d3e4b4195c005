//! Write-bandwidth estimate per writeback context (Linux's
//! wb_update_write_bandwidth): updated every 200 ms from pages written,
//! averaged over a ~3 s period, with a second smoothing stage that only
//! follows the estimate when the raw value confirms the direction.

pub(crate) mod estimate;

use crate::bandwidth::estimate::BANDWIDTH_INTERVAL_NS;
use crate::engine::Engine;
use crate::ids::WbId;
use crate::ratelimit::RatelimitInput;
use crate::time::Instant;

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
        let dirty = self.cache.nr_dirty + self.cache.nr_writeback;
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
            if !self.cache.wb(wb_id).has_io() || elapsed < BANDWIDTH_INTERVAL_NS {
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
