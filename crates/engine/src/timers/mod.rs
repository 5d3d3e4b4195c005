//! The engine's clocks, all driven by `handle_timeout(now)`: bandwidth
//! estimates every 200 ms, proportion periods, the flusher's periodic
//! (kupdate) wake-up, and each device's wbt window. `poll_timeout` is the
//! earliest of them.

pub(crate) mod state;

use crate::bandwidth::estimate::BANDWIDTH_INTERVAL_NS;
use crate::engine::Engine;
use crate::ids::{DeviceId, WbId};
use crate::proportions::PERIOD_NS;
use crate::time::Instant;
use crate::timers::state::kupdate_interval;

impl Engine {
    /// The next time `handle_timeout` must be called; None when no timer
    /// has anything to do. A timer is armed only while it can change
    /// something: bandwidth updates while pages are dirty or under
    /// writeback (or the hard limit still decays), proportion periods
    /// while completions are counted, the periodic flusher wake-up while
    /// pages are dirty, a device's wbt window while it runs.
    pub fn poll_timeout(&self) -> Option<Instant> {
        // Runtimes call this after every event: plain comparisons.
        let mut next: Option<Instant> = None;
        let mut arm = |t: Instant| next = Some(next.map_or(t, |n| n.min(t)));
        if self.cache.nr_dirty + self.cache.nr_writeback > 0
            || self.dom.dirty_limit > self.dom.thresh.thresh
        {
            arm(self.timers.next_bandwidth);
        }
        if self.dom.completions.events > 1 {
            arm(self.timers.next_period);
        }
        if let Some(k) = self.timers.next_kupdate.filter(|_| self.cache.nr_dirty > 0) {
            arm(k);
        }
        for dev in &self.devices {
            if let Some(end) = dev.wbt.window_end {
                arm(end);
            }
            // A write held by wbt's pace is retried when the pace ends; at
            // once if pacing stopped meanwhile (no `until` left).
            if dev.wbt.pace.waiting {
                arm(dev.wbt.pace.until.unwrap_or(Instant::ZERO));
            }
            // A write held by a quiet phase is retried when it ends.
            if let Some(at) = dev.wbt.slice.retry_at {
                arm(at);
            }
            // Free space is asked for again only while some is reserved.
            if let Some(at) = dev.space.next_statfs.filter(|_| dev.space.reserved > 0) {
                arm(at);
            }
            if let Some(at) = dev.space.flush_started {
                arm(at + crate::space::SPACE_FLUSH_MAX_NS);
            }
        }
        next
    }

    /// Activity at `now` may give idle timers work: each deadline that
    /// passed while its timer had nothing to do (its calls would have
    /// changed nothing) moves along its own chain, so the timers keep the
    /// times they would have had. `completion`: the event is an I/O
    /// completion, after which a timer due at `now` still runs (runtimes
    /// complete I/O before they run timers, and run callers after them).
    pub(crate) fn wake_timers(&mut self, now: Instant, completion: bool) {
        let catch_up = |deadline: &mut Instant, interval: u64| {
            if *deadline > now || (completion && *deadline == now) {
                return;
            }
            let behind = now.since_ns(*deadline);
            let steps = if completion {
                behind.div_ceil(interval)
            } else {
                behind / interval + 1
            };
            *deadline = *deadline + steps * interval;
        };
        if self.cache.nr_dirty + self.cache.nr_writeback == 0
            && self.dom.dirty_limit <= self.dom.thresh.thresh
        {
            catch_up(&mut self.timers.next_bandwidth, BANDWIDTH_INTERVAL_NS);
        }
        if self.dom.completions.events <= 1 {
            catch_up(&mut self.timers.next_period, PERIOD_NS);
        }
        if self.cache.nr_dirty == 0 {
            if let Some(interval) = kupdate_interval(&self.config) {
                if let Some(k) = self.timers.next_kupdate.as_mut() {
                    catch_up(k, interval);
                }
            }
        }
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        // A lowered budget's vmscan writeback starts here (knobs are
        // changed without a time) and then from each completion.
        if self.cache.over_budget && self.trim_to_budget() {
            for d in 0..self.devices.len() {
                self.pump(now, DeviceId(d as u32));
            }
        }
        if now >= self.timers.next_bandwidth {
            self.update_bandwidths(now);
            self.timers.next_bandwidth = now + BANDWIDTH_INTERVAL_NS;
        }
        if now >= self.timers.next_period {
            let periods = 1 + now.since_ns(self.timers.next_period) / PERIOD_NS;
            self.dom.completions.new_period(periods);
            self.timers.next_period = self.timers.next_period + periods * PERIOD_NS;
        }
        if self.timers.next_kupdate.is_none() {
            self.timers.next_kupdate = kupdate_interval(&self.config).map(|ns| now + ns);
        }
        if self.timers.next_kupdate.is_some_and(|k| now >= k) {
            self.kick_kupdate(now);
            self.timers.next_kupdate = kupdate_interval(&self.config).map(|ns| now + ns);
        }
        for d in 0..self.devices.len() {
            self.space_progress(now, DeviceId(d as u32));
            let pace = &mut self.devices[d].wbt.pace;
            if pace.waiting && !pace.holds_at(now) {
                pace.waiting = false;
                self.pump(now, DeviceId(d as u32));
            }
            let slice = &mut self.devices[d].wbt.slice;
            if slice.retry_at.is_some_and(|at| now >= at) {
                slice.retry_at = None;
                self.pump(now, DeviceId(d as u32));
            }
            let dev = &self.devices[d];
            if dev.wbt.window_end.is_some_and(|end| now >= end) {
                let recent = self.devices[DeviceId(d as u32).index()].recent_dirty_sleep(now);
                let dev = &mut self.devices[d];
                dev.wbt.on_timer(now, recent);
                dev.stats.wbt_windows += 1;
                self.pump(now, DeviceId(d as u32));
            }
        }
    }

    /// Every 200 ms: the hard dirty limit, the bandwidth estimates, and
    /// the dirty rate limits of contexts whose writers are in the
    /// throttled zone; each device keeps its peak write bandwidth.
    fn update_bandwidths(&mut self, now: Instant) {
        let dirty = self.cache.nr_dirty + self.cache.nr_writeback;
        self.dom.update_dirty_limit(dirty);
        for w in 0..self.wbs.len() {
            let wb_id = WbId(w as u32);
            let elapsed = now.since_ns(self.wbs[w].bw.time_stamp);
            if !self.cache.wb(wb_id).has_io() || elapsed < BANDWIDTH_INTERVAL_NS {
                continue;
            }
            let dtc = self.dtc(wb_id);
            let device = self.wbs[w].device;
            let strict = self.devices[device.index()].config.strict_limit;
            self.wbs[w].update_bandwidth(now, elapsed, &dtc, strict);
            let dev = &self.devices[device.index()];
            let total: u64 = dev
                .wbs
                .iter()
                .map(|w| self.wbs[w.index()].bw.write_bw)
                .sum();
            let dev = &mut self.devices[device.index()];
            dev.write_bw_peak = dev.write_bw_peak.max(total);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::*;

    /// A write the pace holds is retried when the pace ends, and at once
    /// when pacing stops before that (the `wbt_pace` knob turned off).
    #[test]
    fn a_held_write_is_retried_at_once_when_the_pace_is_turned_off() {
        let mut e = Engine::new(Config::default(), Instant(0));
        let dev = e.add_device("d", DeviceConfig::default(), 100_000);
        let now = Instant(1_000_000);
        let until = now + 5_000_000;
        let pace = &mut e.devices[dev.index()].wbt.pace;
        pace.step = 2;
        pace.until = Some(until);
        pace.note_held();
        assert!(e.poll_timeout().is_some_and(|t| t <= until));
        e.set_device_knob(dev, "wbt_pace", "0").unwrap();
        e.check_invariants();
        assert!(e.poll_timeout().is_some_and(|t| t <= now), "due at once");
        e.handle_timeout(now);
        assert!(!e.devices[dev.index()].wbt.pace.waiting, "retried");
    }
}
