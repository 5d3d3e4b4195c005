//! Pacing below depth 1 (ours, not Linux's): wbt's last resort when one
//! write at a time is still too much for the reads and commits beside it.
//!
//! - wbt scales the depth down while even the fastest read (or commit) of
//!   a window misses the target, and stops at depth 1. On a device that
//!   takes a write in a fraction of a millisecond and buffers it behind
//!   (a virtual disk whose host caches, a drive with a write cache) one
//!   write at a time still fills the device as fast as it can drain: a
//!   copy written back at 1.5 GiB/s one write at a time left a database's
//!   commits beside it 5 times slower (issue 14's db-copy), each commit's
//!   write and its cache flush waiting on what the copy had sent.
//! - So at depth 1, when commits are what is slow (their mean over twice
//!   the target, `Wbt::latency_exceeded`), a further scale-down is a pace
//!   step: after a background or normal write completes, the next one
//!   waits `step / 2` times as long as that write took. Step k gives such
//!   writes at most 2 / (2 + k) of the device's time: 2/3, 1/2, 2/5. Not
//!   for slow reads: a read waits for the one write in service whatever
//!   the pace, and pacing for them cost the Axboe 2016 SSD scenario's
//!   writers 7 times their time.
//! - Integrity writes (an fsync's) are never held: they are what the
//!   waiting commits are made of. Nothing is held without a read or a
//!   commit in the last 100 ms (wbt's `close_io`): a writer alone keeps
//!   the whole device.
//! - A scale-up undoes a pace step before it deepens the queue again.
//! - Bounded: at most [`MAX_PACE_STEP`] steps (the writer keeps 2/5 of
//!   the device), and no gap longer than [`MAX_PACE_GAP_NS`] (one write
//!   stalled by the device does not stop writeback for seconds).

use crate::time::{Instant, NS_PER_MS};

/// The most pace steps: background writes keep at least 2 / (2 + 3) =
/// 2/5 of the device's time. (`wb bench db-copy`, a database's four
/// clients committing beside an 8 GiB copy through the mount on this
/// project's virtual machine, the pace watching whole commits: at this
/// floor the database kept 0.71–0.76× its quiet rate with its p99 1.7–1.9×
/// quiet, the copy 278–286 MiB/s, 0.86–0.91× the kernel's; at 1/4 (step
/// 6) 0.79–0.81× and 1.6×, but the copy 181 MiB/s. The pace sat at its
/// floor through each copy. Before, watching only the commits' writes,
/// which the copy hardly slows, it mostly stayed at step 0–1 whatever the
/// floor: 0.60–0.67× and 2.1–2.8×, the copy 360–426 MiB/s.)
pub const MAX_PACE_STEP: u32 = 3;
/// The longest gap one write's completion imposes.
pub const MAX_PACE_GAP_NS: u64 = 20 * NS_PER_MS;

#[derive(Clone, Debug, Default)]
pub struct Pace {
    /// 0: not pacing.
    pub step: u32,
    /// No background or normal write is issued before this.
    pub until: Option<Instant>,
    /// A write was held by the pace: the timer at `until` pumps again.
    pub waiting: bool,
    /// Writes held by the pace (a statistic).
    pub holds: u64,
}

impl Pace {
    /// Whether a write that may be paced must wait at `now`.
    pub fn holds_at(&self, now: Instant) -> bool {
        self.until.is_some_and(|until| now < until)
    }

    /// A write that may be paced was held: the timer retries at `until`.
    pub fn note_held(&mut self) {
        assert!(self.until.is_some(), "held without a pace");
        self.waiting = true;
        self.holds += 1;
    }

    /// A write that may be paced completed at `now` after `latency_ns`.
    pub fn on_write_done(&mut self, now: Instant, latency_ns: u64) {
        if self.step == 0 {
            return;
        }
        let gap_ns = (latency_ns.saturating_mul(self.step as u64) / 2).min(MAX_PACE_GAP_NS);
        let until = now + gap_ns;
        self.until = Some(self.until.map_or(until, |u| u.max(until)));
    }

    /// One step slower. False at the last step.
    pub fn slow_down(&mut self) -> bool {
        if self.step >= MAX_PACE_STEP {
            return false;
        }
        self.step += 1;
        true
    }

    /// One step faster. False when not pacing.
    pub fn speed_up(&mut self) -> bool {
        if self.step == 0 {
            return false;
        }
        self.step -= 1;
        if self.step == 0 {
            self.until = None;
        }
        true
    }

    /// Pacing ends (the target changed, throttling or the pace is off). A
    /// write held stays `waiting`: the timer retries it at once
    /// (`poll_timeout`), finding nothing holding it.
    pub fn reset(&mut self) {
        self.step = 0;
        self.until = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_step_adds_half_the_write_s_time_to_the_gap_within_bounds() {
        let mut pace = Pace::default();
        pace.on_write_done(Instant(0), NS_PER_MS);
        assert_eq!(pace.until, None, "no pace at step 0");
        assert!(pace.slow_down());
        pace.on_write_done(Instant(0), 2 * NS_PER_MS);
        assert_eq!(
            pace.until,
            Some(Instant(NS_PER_MS)),
            "step 1: 2/3 of the time"
        );
        while pace.slow_down() {}
        assert_eq!(pace.step, MAX_PACE_STEP, "at most MAX_PACE_STEP");
        pace.on_write_done(Instant(0), 2 * NS_PER_MS);
        let gap_ns = MAX_PACE_STEP as u64 * NS_PER_MS;
        assert_eq!(pace.until, Some(Instant(gap_ns)), "step / 2 of the time");
        assert!(pace.holds_at(Instant(gap_ns - 1)));
        assert!(!pace.holds_at(Instant(gap_ns)));
        pace.on_write_done(Instant(0), 1000 * NS_PER_MS);
        assert_eq!(pace.until, Some(Instant(MAX_PACE_GAP_NS)), "gap bounded");
        pace.on_write_done(Instant(0), 0);
        assert_eq!(
            pace.until,
            Some(Instant(MAX_PACE_GAP_NS)),
            "never shortened"
        );
        while pace.speed_up() {}
        assert_eq!((pace.step, pace.until), (0, None), "step 0 holds nothing");
    }
}
