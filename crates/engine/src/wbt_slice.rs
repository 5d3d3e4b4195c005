//! Write slices (ours, not Linux's wbt; the anchor is bfq, which serves
//! one queue at a time in slices and idles for a reader's next request).
//!
//! - Off unless the device knob `wbt_slice_ms` is set (0, the default).
//! - While reads compete (wbt's `close_io`), background and normal
//!   writes go in phases: a write phase of `wbt_slice_ms` in which they
//!   are issued as if unthrottled in size and up to [`SLICE_DEPTH`] deep,
//!   then a quiet phase of a quarter of that in which none is issued.
//!   Integrity writes (an fsync's) are never held.
//! - Why: a reader in another process cannot be held back by us, only
//!   left alone. Small writes one at a time (wbt's answer on a serial
//!   device) put one write ahead of nearly every read: its median read
//!   was 1.6x the kernel's. In phases most reads fall in a quiet phase and
//!   find the device idle, the writer keeps 4/5 of the device's time in
//!   large requests, and a read that falls in a write phase waits for
//!   the queue ahead of it, bounded by the depth.
//! - Measured on the reference XFS loop device (`wb bench interference`,
//!   issue 35, BENCHMARKS.md): 1 s phases, 16 deep, gave the writer
//!   600-700 MiB/s (bfq 370-600, the engine's default 260) and a median
//!   read at the kernel's, but p99 8-13 ms: the reads that fall in write
//!   phases are over 1 % of all. That is why it is not the default.
//! - Reads the engine issues itself (a mount's reader, a library
//!   caller's miss) can be held, as bfq holds a reader while it serves
//!   the writer's slice: one that arrives in a write phase waits for the
//!   phase's end. A synchronous reader then waits once per cycle, for the
//!   rest of a write phase, and its other reads find the device quiet,
//!   instead of each read in a write phase waiting for the queue ahead.
//!   A read of another process is never seen here, so never held.
//! - Bounded: a phase is at most [`MAX_SLICE_MS`], so is a read's hold
//!   (counted: `read_holds`, `read_hold_ns`); nothing is held without
//!   competing reads.

use crate::ids::IoId;
use crate::time::{Instant, NS_PER_MS};

/// Writes in flight at most in a write phase.
pub const SLICE_DEPTH: u32 = 16;
/// The quiet phase is the write phase over this, unless set.
pub const QUIET_DIVISOR: u64 = 4;
/// The longest write phase the knob takes.
pub const MAX_SLICE_MS: u32 = 10_000;

#[derive(Clone, Debug, Default)]
pub struct Slice {
    /// Write phase length; 0: slices are off.
    write_ns: u64,
    /// Quiet phase length.
    quiet_ns: u64,
    /// Start of the current cycle (write phase, then quiet); None: no
    /// cycle runs (no competing reads at the last write issued).
    start: Option<Instant>,
    /// A write was held: the engine's timer retries at this time.
    pub retry_at: Option<Instant>,
    /// Writes held by a quiet phase (a statistic).
    pub holds: u64,
    /// Cycles begun (a statistic).
    pub cycles: u64,
    /// Reads held by a write phase and not yet issued: they compete
    /// (wbt's `close_io`) though none was issued lately.
    pub reads_waiting: Vec<IoId>,
    /// Reads held by write phases, and the time they were held (from
    /// their arrival to their phase's end; statistics).
    pub read_holds: u64,
    pub read_hold_ns: u64,
}

impl Slice {
    /// Sets the write phase (the `wbt_slice_ms` knob; 0 turns slices off)
    /// and the quiet one (`wbt_slice_quiet_ms`; 0: a quarter of the
    /// write phase).
    pub fn set(&mut self, ms: u32, quiet_ms: u32) {
        assert!(ms <= MAX_SLICE_MS && quiet_ms <= MAX_SLICE_MS);
        self.write_ns = ms as u64 * NS_PER_MS;
        self.quiet_ns = match quiet_ms {
            0 => self.write_ns / QUIET_DIVISOR,
            q => q as u64 * NS_PER_MS,
        };
        self.reset();
    }

    pub fn on(&self) -> bool {
        self.write_ns > 0
    }

    fn period_ns(&self) -> u64 {
        self.write_ns + self.quiet_ns
    }

    /// How far `now` is into the period of a running cycle.
    fn offset_ns(&self, now: Instant) -> Option<u64> {
        let start = self.start.filter(|_| self.on())?;
        Some(now.since_ns(start) % self.period_ns())
    }

    /// The end of the quiet phase `now` falls in, if it falls in one.
    pub fn quiet_until(&self, now: Instant) -> Option<Instant> {
        let at = self.offset_ns(now)?;
        (at >= self.write_ns).then(|| now + (self.period_ns() - at))
    }

    /// The end of the write phase `now` falls in, if it falls in one.
    pub fn write_phase_end(&self, now: Instant) -> Option<Instant> {
        let at = self.offset_ns(now)?;
        (at < self.write_ns).then(|| now + (self.write_ns - at))
    }

    /// Whether `now` falls in a write phase of a running cycle.
    pub fn writing(&self, now: Instant) -> bool {
        self.write_phase_end(now).is_some()
    }

    /// Something held is retried at `at` (the engine's timer), or sooner
    /// if something else asked for that.
    fn retry_by(&mut self, at: Instant) {
        self.retry_at = Some(self.retry_at.map_or(at, |r| r.min(at)));
    }

    /// A read arriving at `now` was held until its write phase ends.
    pub fn note_read_held(&mut self, now: Instant, io: IoId) {
        let end = self
            .write_phase_end(now)
            .expect("read held outside a write phase");
        self.retry_by(end);
        self.reads_waiting.push(io);
        self.read_holds += 1;
        self.read_hold_ns += end.since_ns(now);
    }

    /// A read was issued: no longer waiting, if it was held.
    pub fn note_read_issued(&mut self, io: IoId) {
        if !self.reads_waiting.is_empty() {
            self.reads_waiting.retain(|&id| id != io);
        }
    }

    /// A write was issued at `now`; `competing`: reads compete. A cycle
    /// begins with the first write while they do and ends when they stop.
    pub fn on_issue(&mut self, now: Instant, competing: bool) {
        if !self.on() || !competing {
            self.start = None;
        } else if self.start.is_none() {
            self.start = Some(now);
            self.cycles += 1;
        }
    }

    /// A write was held at `now` by a quiet phase.
    pub fn note_held(&mut self, now: Instant) {
        let until = self.quiet_until(now).expect("held outside a quiet phase");
        self.retry_by(until);
        self.holds += 1;
    }

    /// Throttling changed: no cycle runs; a held write or read is retried
    /// at once.
    pub fn reset(&mut self) {
        self.start = None;
        if self.retry_at.is_some() || !self.reads_waiting.is_empty() {
            self.retry_at = Some(Instant::ZERO);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cycle_is_a_write_phase_then_a_quarter_of_it_quiet() {
        let ms = |n: u64| Instant(n * NS_PER_MS);
        let mut s = Slice::default();
        s.on_issue(ms(0), true);
        assert!(!s.writing(ms(0)), "off by default");
        s.set(100, 0);
        s.on_issue(ms(5), false);
        assert!(!s.writing(ms(5)), "no cycle without competing reads");
        s.on_issue(ms(10), true);
        assert_eq!(s.cycles, 1);
        assert!(s.writing(ms(10)) && s.writing(ms(109)));
        assert_eq!(s.quiet_until(ms(110)), Some(ms(135)));
        assert_eq!(s.quiet_until(ms(134)), Some(ms(135)));
        assert!(s.writing(ms(135)), "the next cycle's write phase");
        s.on_issue(ms(120), true);
        assert_eq!(s.cycles, 1, "a write in a cycle does not restart it");
        s.note_held(ms(120));
        assert_eq!((s.retry_at, s.holds), (Some(ms(135)), 1));
        s.on_issue(ms(140), false);
        assert!(!s.writing(ms(140)) && s.quiet_until(ms(250)).is_none());
        s.reset();
        assert_eq!(s.retry_at, Some(Instant::ZERO), "retried at once");
        // A quiet phase of its own length.
        s.set(100, 300);
        s.on_issue(ms(1000), true);
        assert_eq!(s.write_phase_end(ms(1010)), Some(ms(1100)));
        assert_eq!(s.quiet_until(ms(1100)), Some(ms(1400)));
        assert!(s.writing(ms(1400)) && s.write_phase_end(ms(1100)).is_none());
    }
}
