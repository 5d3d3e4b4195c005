//! Real time for the engine: nanoseconds since the cache started.

use std::time::{Duration, Instant as StdInstant};
use wb_engine::Instant;

#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    start: StdInstant,
}

impl Clock {
    pub fn new() -> Clock {
        Clock {
            start: StdInstant::now(),
        }
    }

    pub fn now(&self) -> Instant {
        Instant(self.start.elapsed().as_nanos() as u64)
    }

    /// The wall-clock moment of an engine instant.
    pub fn at(&self, t: Instant) -> StdInstant {
        self.start + Duration::from_nanos(t.as_ns())
    }
}
