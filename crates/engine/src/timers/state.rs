//! When each of the engine's periodic timers is next due (timers/ runs
//! them).

use crate::bandwidth::estimate::BANDWIDTH_INTERVAL_NS;
use crate::config::Config;
use crate::proportions::PERIOD_NS;
use crate::time::{Instant, NS_PER_MS};

/// When each periodic timer is next due.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timers {
    pub next_bandwidth: Instant,
    pub next_period: Instant,
    /// None until the first `handle_timeout`, or when the periodic
    /// flusher wake-up is off.
    pub next_kupdate: Option<Instant>,
}

impl Timers {
    pub(crate) fn new(config: &Config, now: Instant) -> Timers {
        Timers {
            next_bandwidth: now + BANDWIDTH_INTERVAL_NS,
            next_period: now + PERIOD_NS,
            next_kupdate: kupdate_interval(config).map(|ns| now + ns),
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
