//! The engine's clocks, all driven by `handle_timeout(now)` (completion.rs):
//! bandwidth estimates every 200 ms, proportion periods, the flusher's
//! periodic (kupdate) wake-up, and each device's wbt window, pace and
//! phases and its free-space reports (`Device::next_timeout`).
//! `poll_timeout` is the earliest of them.
//!
//! A timer is armed only while it can change something: bandwidth
//! updates while pages are dirty or under writeback (or the hard limit
//! still decays), proportion periods while completions are counted, the
//! periodic flusher wake-up while pages are dirty. A deadline that passes
//! while its timer has nothing to do moves along its own chain
//! (`Timers::wake`), so the timers keep the times they would have had.

use crate::bandwidth::estimate::BANDWIDTH_INTERVAL_NS;
use crate::config::Config;
use crate::proportions::PERIOD_NS;
use crate::time::{Earliest, Instant, NS_PER_MS};

/// When each periodic timer is next due.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timers {
    pub next_bandwidth: Instant,
    pub next_period: Instant,
    /// None until the first `handle_timeout`, or when the periodic
    /// flusher wake-up is off.
    pub next_kupdate: Option<Instant>,
}

/// Which periodic timers have something to do now.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Busy {
    /// Pages dirty or under writeback, or the hard limit still decays.
    pub bandwidth: bool,
    /// Completions are counted in the proportions.
    pub period: bool,
    /// Pages are dirty.
    pub kupdate: bool,
}

impl Timers {
    pub(crate) fn new(config: &Config, now: Instant) -> Timers {
        Timers {
            next_bandwidth: now + BANDWIDTH_INTERVAL_NS,
            next_period: now + PERIOD_NS,
            next_kupdate: kupdate_interval(config).map(|ns| now + ns),
        }
    }

    /// The earliest deadline among the timers that are `busy`.
    #[inline]
    pub(crate) fn next(&self, busy: Busy) -> Earliest {
        Earliest::NONE
            .at_if(busy.bandwidth, self.next_bandwidth)
            .at_if(busy.period, self.next_period)
            .at_opt(self.next_kupdate.filter(|_| busy.kupdate))
    }

    /// Activity at `now` may give idle timers work: each deadline that
    /// passed while its timer had nothing to do (not `busy`: its calls
    /// would have changed nothing) moves along its own chain.
    /// `completion`: the event is an I/O completion, after which a timer
    /// due at `now` still runs (runtimes complete I/O before they run
    /// timers, and run callers after them).
    pub(crate) fn wake(&mut self, now: Instant, completion: bool, busy: Busy, config: &Config) {
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
        if !busy.bandwidth {
            catch_up(&mut self.next_bandwidth, BANDWIDTH_INTERVAL_NS);
        }
        if !busy.period {
            catch_up(&mut self.next_period, PERIOD_NS);
        }
        if !busy.kupdate {
            if let Some(interval) = kupdate_interval(config) {
                if let Some(k) = self.next_kupdate.as_mut() {
                    catch_up(k, interval);
                }
            }
        }
    }
}

/// The periodic flusher wake-up's interval; None when it is off.
pub(crate) fn kupdate_interval(config: &Config) -> Option<u64> {
    match config.dirty_writeback_centisecs {
        0 => None,
        cs => Some(cs as u64 * 10 * NS_PER_MS),
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
