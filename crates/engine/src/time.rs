//! Time as the engine sees it: a monotonic count of nanoseconds passed in by
//! the runtime. The engine never reads a clock.

use std::fmt;
use std::ops::{Add, Sub};

/// A point in time, in nanoseconds since an arbitrary epoch chosen by the runtime.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(pub u64);

pub const NS_PER_US: u64 = 1_000;
pub const NS_PER_MS: u64 = 1_000_000;
pub const NS_PER_SEC: u64 = 1_000_000_000;

impl Instant {
    pub const ZERO: Instant = Instant(0);

    pub fn as_ns(self) -> u64 {
        self.0
    }

    /// Nanoseconds from `earlier` to `self`, zero if `earlier` is later.
    pub fn since_ns(self, earlier: Instant) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NS_PER_SEC as f64
    }
}

impl Add<u64> for Instant {
    type Output = Instant;
    fn add(self, ns: u64) -> Instant {
        Instant(self.0.saturating_add(ns))
    }
}

/// The earlier of two optional deadlines (None: no deadline). Plain
/// comparisons: `poll_timeout` calls it after every event.
#[inline]
pub(crate) fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// The earliest of several deadlines, folded with plain `min`s (no
/// branch per `Option`): `poll_timeout` folds a dozen after every event.
/// `u64::MAX` stands for "no deadline": an instant 584 years after the
/// runtime's epoch, which no timer is armed for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Earliest(u64);

impl Earliest {
    pub const NONE: Earliest = Earliest(u64::MAX);

    #[inline]
    pub fn at_opt(self, t: Option<Instant>) -> Earliest {
        Earliest(self.0.min(t.map_or(u64::MAX, |t| t.0)))
    }

    /// `t` counts only if `armed`.
    #[inline]
    pub fn at_if(self, armed: bool, t: Instant) -> Earliest {
        Earliest(self.0.min(if armed { t.0 } else { u64::MAX }))
    }

    #[inline]
    pub fn min(self, other: Earliest) -> Earliest {
        Earliest(self.0.min(other.0))
    }

    #[inline]
    pub fn get(self) -> Option<Instant> {
        (self.0 != u64::MAX).then_some(Instant(self.0))
    }
}

impl Sub<u64> for Instant {
    type Output = Instant;
    fn sub(self, ns: u64) -> Instant {
        Instant(self.0.saturating_sub(ns))
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_secs_f64())
    }
}
