//! The engine's clocks, all driven by `handle_timeout(now)`: bandwidth
//! estimates every 200 ms, proportion periods, the flusher's periodic
//! (kupdate) wake-up, and each device's wbt window. `poll_timeout` is the
//! earliest of them.

use crate::bandwidth::BANDWIDTH_INTERVAL_NS;
use crate::config::Config;
use crate::engine::Engine;
use crate::ids::DeviceId;
use crate::proportions::PERIOD_NS;
use crate::time::Instant;

impl Engine {
    pub(crate) fn kupdate_interval(config: &Config) -> Option<u64> {
        match config.dirty_writeback_centisecs {
            0 => None,
            cs => Some(cs as u64 * 10 * crate::time::NS_PER_MS),
        }
    }

    /// The next time `handle_timeout` must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut next = self.next_period.min(self.next_bandwidth);
        if let Some(k) = self.next_kupdate {
            next = next.min(k);
        }
        for dev in &self.devices {
            if let Some(end) = dev.wbt.window_end {
                next = next.min(end);
            }
        }
        Some(next)
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if now >= self.next_bandwidth {
            self.update_bandwidths(now);
            self.next_bandwidth = now + BANDWIDTH_INTERVAL_NS;
        }
        if now >= self.next_period {
            let periods = 1 + now.since_ns(self.next_period) / PERIOD_NS;
            self.completions.new_period(periods);
            self.next_period = self.next_period + periods * PERIOD_NS;
        }
        if self.next_kupdate.is_none() {
            self.next_kupdate = Self::kupdate_interval(&self.config).map(|ns| now + ns);
        }
        if self.next_kupdate.is_some_and(|k| now >= k) {
            self.kick_kupdate(now);
            self.next_kupdate = Self::kupdate_interval(&self.config).map(|ns| now + ns);
        }
        for d in 0..self.devices.len() {
            let dev = &self.devices[d];
            if dev.wbt.window_end.is_some_and(|end| now >= end) {
                let recent = self.recent_dirty_sleep(DeviceId(d as u32), now);
                let dev = &mut self.devices[d];
                dev.wbt.on_timer(now, recent);
                dev.stats.wbt_windows += 1;
                self.pump(now, DeviceId(d as u32));
            }
        }
    }
}
