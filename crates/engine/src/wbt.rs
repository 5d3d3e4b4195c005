//! Writeback throttling, as Linux's `block/blk-wbt.c`.
//!
//! - Buffered writes are admitted to the device only while fewer than a
//!   class-dependent limit are in flight: background (flusher) writes get
//!   `wb_background`, normal writes `wb_normal`, sync writes and writes while
//!   writers are being dirty-throttled get `max_depth`. Reads are never held.
//! - Every window (100 ms, shorter when scaled down) we look at the fastest
//!   read that completed. If even that read took longer than the latency
//!   target, writes are crowding reads out: scale the depth down. If reads
//!   are fine, scale up. With no reads at all, drift back to the default.
//! - The window is CoDel-like: the minimum, not the mean, so one unlucky read
//!   does not throttle a device whose queue is short.
//! - Ours: while reads compete, a flusher write is no bigger than what the
//!   device writes within the latency target ([`Wbt::write_pages_cap`]).
//!   Depth bounds how many writes a read finds ahead of it; on a device
//!   that serves one request at a time, only size bounds the one in service.
//! - Ours: on a device that serves one request at a time, in order
//!   (`serial`: a buffered loop device), while reads compete, writes other
//!   than integrity writes go one at a time, and the size cap may go
//!   lower (`wbt_write_cap.rs`): a read there waits for
//!   every write queued before it, whole.
//! - Ours: the write of a small fsync (at most
//!   [`COMMIT_WRITE_MAX_PAGES`] in all) is someone's commit waiting, as a read
//!   is: it counts as a read for `close_io` and for the window's fastest
//!   latency. Linux watches reads only, so a database's fdatasync waits
//!   behind a full queue of a copy's writeback (issue 14's db-copy).
//! - Ours: commits wait one after another (FUSE's fsync holds the file's
//!   lock; a database commits in order), so their mean is what their
//!   writers get: a window whose whole commits (fsync call to flush done,
//!   durability/) average over twice the target is exceeded even when
//!   its fastest read or commit write was quick, and one between one and
//!   two targets holds the depth where it is.
//! - Ours, off by default: write slices (`wbt_slice.rs`): while reads
//!   compete, writes in long phases with quiet ones between.
//! - Ours: at depth 1, a further scale-down for slow commits paces
//!   background and normal writes (`wbt_pace.rs`): each waits in
//!   proportion to how long the last one took, so they use 2/3, 1/2, then
//!   2/5 of the device's time while commits compete.

use crate::action::WbtClass;
use crate::ids::IoId;
use crate::rq_depth::RqDepth;
use crate::time::{Instant, NS_PER_MS, NS_PER_SEC};
pub use crate::wbt_auto_target::auto_target_ns;
use crate::wbt_pace::Pace;
use crate::wbt_slice::{Slice, SLICE_DEPTH};
use crate::wbt_write_cap::capped_write_pages;

/// Linux's RWB_WINDOW_NSEC: the monitoring window at scale step 0 or below.
pub const RWB_WINDOW_NS: u64 = 100 * NS_PER_MS;
/// Linux's RWB_UNKNOWN_BUMP: windows without samples before drifting to step 0.
pub const RWB_UNKNOWN_BUMP: u32 = 5;
/// Reads this recent (issue or completion) make writes use the background limit.
pub const CLOSE_IO_NS: u64 = NS_PER_SEC / 10;
/// An fsync that tagged at most this many pages in all (32 KiB) is a
/// commit: its writes are watched as reads (see the header) and never held.
/// A sync of bulk data is not, however small its requests (random pages).
pub const COMMIT_WRITE_MAX_PAGES: u32 = 8;
/// A dirty-throttle sleep this recent boosts writes to `max_depth`.
pub const RECENT_WAIT_NS: u64 = NS_PER_SEC;
use crate::wbt_window::Window;
pub use crate::wbt_window::WindowStatus;

#[derive(Clone, Debug)]
pub struct Wbt {
    /// 0 means throttling is off.
    pub min_lat_ns: u64,
    pub rq_depth: RqDepth,
    pub wb_normal: u32,
    pub wb_background: u32,
    /// Tracked writes in flight.
    pub inflight: u32,
    /// Writers refused admission and not yet woken (Linux's has_sleeper).
    pub sleeping: bool,
    pub cur_win_ns: u64,
    /// End of the current window; None when the timer is not armed.
    pub window_end: Option<Instant>,
    /// The window's samples. They are counted while no window is armed
    /// too (a device only read from, or other processes' reads), and only
    /// `arm_timer` resets them.
    window: Window,
    pub unknown_cnt: u32,
    last_issue: Option<Instant>,
    last_comp: Option<Instant>,
    /// The oldest outstanding read we track, to catch reads that never complete in a window.
    sync_issue: Option<(IoId, Instant)>,
    pub scale_ups: u64,
    /// The whole commits' mean in the last window that had enough of them
    /// to count (0: none yet), for the statistics.
    pub last_commit_mean_ns: u64,
    pub scale_downs: u64,
    pub max_depth_min: u32,
    pub max_depth_max: u32,
    /// The device serves one request at a time (`DeviceConfig::serial`).
    pub serial: bool,
    /// Pacing below depth 1 (`wbt_pace.rs`).
    pub pace: Pace,
    /// Whether slow commits may pace (`DeviceConfig::wbt_pace`).
    pace_on: bool,
    /// Write slices (`wbt_slice.rs`).
    pub slice: Slice,
}

impl Wbt {
    pub fn new(queue_depth: u32, min_lat_ns: u64) -> Wbt {
        let rq_depth = RqDepth::new(queue_depth);
        let max_depth = rq_depth.max_depth;
        let mut wbt = Wbt {
            min_lat_ns,
            rq_depth,
            wb_normal: 0,
            wb_background: 0,
            inflight: 0,
            sleeping: false,
            cur_win_ns: RWB_WINDOW_NS,
            window_end: None,
            window: Window::default(),
            unknown_cnt: 0,
            last_issue: None,
            last_comp: None,
            sync_issue: None,
            scale_ups: 0,
            last_commit_mean_ns: 0,
            scale_downs: 0,
            max_depth_min: max_depth,
            max_depth_max: max_depth,
            serial: false,
            pace: Pace::default(),
            pace_on: true,
            slice: Slice::default(),
        };
        wbt.calc_wb_limits();
        wbt
    }

    pub fn enabled(&self) -> bool {
        self.min_lat_ns != 0
    }

    /// Changes the target; 0 turns throttling off. Depth state restarts.
    /// Writes in flight stay counted (`inflight`), so their completions
    /// balance whatever the target was when they were issued.
    pub fn set_min_lat(&mut self, min_lat_ns: u64) {
        self.min_lat_ns = min_lat_ns;
        self.rq_depth = RqDepth::new(self.rq_depth.queue_depth);
        self.pace.reset();
        self.slice.reset();
        self.sleeping = false;
        if !self.enabled() {
            // No window runs while throttling is off; the next tracked
            // issue after it is turned on arms a fresh one.
            self.window_end = None;
        }
        self.calc_wb_limits();
    }

    /// Turns pacing on or off (the `wbt_pace` knob); off ends it at once.
    pub fn set_pace(&mut self, on: bool) {
        self.pace_on = on;
        if !on {
            self.pace.reset();
        }
    }

    /// The device's queue depth changed (Linux's wbt_queue_depth_changed):
    /// the depth is recomputed at the current scale step.
    pub fn set_queue_depth(&mut self, queue_depth: u32) {
        assert!(queue_depth >= 1);
        self.rq_depth.queue_depth = queue_depth;
        self.rq_depth.scaled_max = self.rq_depth.calc_max_depth();
        self.calc_wb_limits();
    }

    fn calc_wb_limits(&mut self) {
        let max = self.rq_depth.max_depth;
        if self.min_lat_ns == 0 {
            self.wb_normal = 0;
            self.wb_background = 0;
        } else if max <= 2 {
            self.wb_normal = max;
            self.wb_background = 1;
        } else {
            self.wb_normal = max.div_ceil(2);
            self.wb_background = max.div_ceil(4);
        }
        self.max_depth_min = self.max_depth_min.min(max);
        self.max_depth_max = self.max_depth_max.max(max);
    }

    fn close_io(&self, now: Instant) -> bool {
        let recent = |t: Option<Instant>| t.is_some_and(|t| now.since_ns(t) < CLOSE_IO_NS);
        recent(self.last_issue) || recent(self.last_comp) || !self.slice.reads_waiting.is_empty()
    }

    /// Whether a read the engine issues at `now` waits for the end of a
    /// write phase (`wbt_slice.rs`): only while slices run, reads compete
    /// and `now` falls in a write phase.
    pub fn holds_reads(&self, now: Instant) -> bool {
        self.enabled() && self.slice.writing(now) && self.close_io(now)
    }

    /// The in-flight limit for a write of `class` (Linux's get_limit).
    /// `recent_dirty_sleep`: a writer to this device slept in the dirty throttle within the last second.
    pub fn limit(&self, class: WbtClass, now: Instant, recent_dirty_sleep: bool) -> u32 {
        if !self.enabled() {
            return u32::MAX;
        }
        // Integrity writeback gets the full depth. So does writeback that
        // dirty-throttled writers wait on (Linux's wb_recent_wait), unless
        // reads compete: a streaming writer is throttled all the time, and
        // the boost would keep a full queue of its writes ahead of every
        // read. Then it gets wb_normal (ours; see BENCHMARKS.md).
        if class == WbtClass::Sync || (recent_dirty_sleep && !self.close_io(now)) {
            self.rq_depth.max_depth
        } else if self.slice.writing(now) && self.close_io(now) {
            // A write phase (`wbt_slice.rs`).
            SLICE_DEPTH.min(self.rq_depth.queue_depth.max(1))
        } else if self.serial && self.close_io(now) {
            // A serial device serves every write queued before a read
            // first: one write at a time, as little ahead of each read as
            // can be. (Not while writing alone: there a deeper queue is
            // faster even on a serial device, since a write's completion
            // takes the filesystem's work too: on the reference XFS loop
            // device, 4 at most halved a 4 GiB uncached writer.)
            1
        } else if recent_dirty_sleep {
            self.wb_normal
        } else if class == WbtClass::Background || self.close_io(now) {
            // Background work, or competing reads within 100 ms: stay shallow.
            self.wb_background
        } else {
            self.wb_normal
        }
    }

    /// The largest flusher write, in pages, while reads compete (ours,
    /// not Linux's): what the device writes in the latency target at its
    /// measured write bandwidth, at least
    /// [`MIN_CAPPED_WRITE_PAGES`](crate::wbt_write_cap::MIN_CAPPED_WRITE_PAGES). On a
    /// device that serves one request at a time (a loop device, many
    /// virtual disks) a read that arrives behind a write waits for all of
    /// it, however shallow the queue; a write that takes longer than the
    /// target alone breaks it. No cap with throttling off or no read near:
    /// a disk that writes 100 MB/s with a 32 ms target is never capped at
    /// 512 KiB, a loop device that writes 600 MiB/s with a 0.1 ms target
    /// gets 256 KiB writes (the floor). The bandwidth is the device's best
    /// measured (`write_bw_peak`), not the throttled one, so the cap does
    /// not shrink as it slows the writers. On a `serial` device the floor
    /// is lower
    /// ([`MIN_CAPPED_WRITE_PAGES_SERIAL`](crate::wbt_write_cap::MIN_CAPPED_WRITE_PAGES_SERIAL)).
    pub fn write_pages_cap(&self, now: Instant, write_bw_pages_s: u64) -> u64 {
        if !self.enabled() || !self.close_io(now) || self.slice.on() {
            return u64::MAX;
        }
        capped_write_pages(self.min_lat_ns, write_bw_pages_s, self.serial)
    }

    /// Whether a write of `class` may be issued now.
    pub fn may_issue(&self, class: WbtClass, now: Instant, recent_dirty_sleep: bool) -> bool {
        if !self.enabled() {
            return true;
        }
        !self.paced(class, now)
            && !self.sleeping
            && self.inflight < self.limit(class, now, recent_dirty_sleep)
    }

    /// Whether the pace holds a write of `class` at `now`: never an
    /// integrity write, and only while reads or commits compete.
    fn paced(&self, class: WbtClass, now: Instant) -> bool {
        // (With the pace off, `set_pace` reset it: it holds nothing.)
        class != WbtClass::Sync
            && (self.pace.holds_at(now) || self.slice.quiet_until(now).is_some())
            && self.close_io(now)
    }

    /// A writer of `class` was refused: held by the pace, it is retried
    /// when the pace ends (the engine's timer); otherwise it sleeps until
    /// enough writes complete.
    pub fn note_refused(&mut self, class: WbtClass, now: Instant) {
        if !self.enabled() {
            return;
        }
        if self.paced(class, now) {
            if self.slice.quiet_until(now).is_some() {
                self.slice.note_held(now);
            } else {
                self.pace.note_held();
            }
        } else {
            self.sleeping = true;
        }
    }

    /// A tracked write was issued. It is counted even while throttling is
    /// off (as Linux marks the request WBT_TRACKED), so turning wbt on or
    /// off with writes in flight keeps the count equal to what is in flight.
    pub fn on_write_issue(&mut self, now: Instant) {
        self.inflight += 1;
        let competing = self.enabled() && self.close_io(now);
        self.slice.on_issue(now, competing);
        if self.enabled() && self.window_end.is_none() {
            self.arm_timer(now);
        }
    }

    /// A tracked write of `class` completed after `latency_ns`. Wakes
    /// sleepers when enough room opened (all at once, so they do not
    /// trickle in one by one).
    pub fn on_write_done(&mut self, now: Instant, latency_ns: u64, class: Option<WbtClass>) {
        assert!(self.inflight > 0, "wbt write completion without issue");
        self.inflight -= 1;
        if !self.enabled() {
            return;
        }
        if class != Some(WbtClass::Sync) {
            self.pace.on_write_done(now, latency_ns);
        }
        self.window.write();
        let limit = self.wb_normal;
        if self.sleeping {
            let room = limit.saturating_sub(self.inflight);
            if self.inflight == 0 || (self.inflight < limit && room >= self.wb_background / 2) {
                self.sleeping = false;
            }
        }
    }

    pub fn on_read_issue(&mut self, now: Instant, io: IoId) {
        self.last_issue = Some(now);
        if self.sync_issue.is_none() {
            self.sync_issue = Some((io, now));
        }
    }

    pub fn on_read_done(&mut self, now: Instant, io: IoId, latency_ns: u64) {
        self.last_comp = Some(now);
        self.window.reads(1, latency_ns);
        if self.sync_issue.is_some_and(|(id, _)| id == io) {
            self.sync_issue = None;
        }
    }

    /// A commit (a small integrity write) was issued: competing I/O, as a
    /// read is.
    pub fn on_commit_issue(&mut self, now: Instant) {
        self.last_issue = Some(now);
    }

    /// A commit's write completed after `latency_ns`: a sample, as a
    /// read's (the window's fastest).
    pub fn on_commit_write_done(&mut self, now: Instant, latency_ns: u64) {
        self.last_comp = Some(now);
        self.window.reads(1, latency_ns);
    }

    /// A whole commit (its fsync, from the call to its flush done) took
    /// `latency_ns`: a sample of the commits' mean. The whole commit, not
    /// its writes: on a device that takes writes into a cache, what the
    /// writes beside it cost a commit shows in its flush, which drains
    /// them. Traced in `wb bench db-copy` (block and FUSE events, quiet
    /// against during the copy): a commit's 8 KiB write 50 -> 73 us mean,
    /// well within a 100 us target, so the pace stayed off; its device
    /// flush 38 -> 57 us (p90 46 -> 131); the whole FUSE fsync 100 ->
    /// 157 us, and the database 0.6-0.67x its quiet rate.
    pub fn on_commit_done(&mut self, now: Instant, latency_ns: u64) {
        self.last_comp = Some(now);
        self.window.commit(latency_ns);
    }

    /// Reads the engine did not issue but the device served (other
    /// processes' reads, seen in the device's statistics): `reads` of them
    /// with this average latency since the last report. They count as one
    /// sample at their average, so a window of slow foreign reads scales
    /// writes down as our own slow reads would.
    pub fn on_foreign_reads(&mut self, now: Instant, reads: u64, avg_latency_ns: u64) {
        if reads == 0 {
            return;
        }
        self.last_comp = Some(now);
        self.window.reads(reads, avg_latency_ns);
    }

    fn arm_timer(&mut self, now: Instant) {
        self.cur_win_ns = if self.rq_depth.scale_step > 0 {
            // Shorter windows when throttled, so we recover quickly: win / sqrt(step + 1).
            let step = (self.rq_depth.scale_step + 1) as f64;
            (RWB_WINDOW_NS as f64 / step.sqrt()) as u64
        } else {
            RWB_WINDOW_NS
        };
        self.window_end = Some(now + self.cur_win_ns);
        self.window = Window::default();
    }

    fn latency_exceeded(&self, now: Instant, recent_dirty_sleep: bool) -> WindowStatus {
        let oldest_read_ns = self.sync_issue.map(|(_, issued)| now.since_ns(issued));
        let writing = recent_dirty_sleep || self.inflight > 0;
        self.window
            .status(self.min_lat_ns, self.cur_win_ns, oldest_read_ns, writing)
    }

    fn scale_up(&mut self) {
        // Out of pacing first, then deeper.
        if !self.pace.speed_up() && !self.rq_depth.scale_up() {
            return;
        }
        self.calc_wb_limits();
        self.unknown_cnt = 0;
        self.sleeping = false;
        self.scale_ups += 1;
    }

    /// `pace`: at depth 1, pace the writes instead. Only for slow
    /// commits: a read waits for the one write in service whatever the
    /// pace (Linux's floor of depth 1 stands for reads; pacing them cost
    /// the Axboe 2016 SSD scenario's writers 7 times their time).
    fn scale_down(&mut self, hard_throttle: bool, pace: bool) {
        let scaled = self.rq_depth.scale_down(hard_throttle)
            || (pace && self.pace_on && self.pace.slow_down());
        if !scaled {
            return;
        }
        self.calc_wb_limits();
        self.unknown_cnt = 0;
        self.scale_downs += 1;
    }

    /// The window timer fired. Returns the window's classification.
    pub fn on_timer(&mut self, now: Instant, recent_dirty_sleep: bool) -> WindowStatus {
        assert!(self.enabled());
        let status = self.latency_exceeded(now, recent_dirty_sleep);
        if let Some(mean_ns) = self.window.commit_mean_ns() {
            self.last_commit_mean_ns = mean_ns;
        }
        match status {
            WindowStatus::Exceeded => self.scale_down(true, false),
            WindowStatus::CommitsExceeded => self.scale_down(true, true),
            // Reads are fine, or only writes are running: allow more depth.
            WindowStatus::Ok | WindowStatus::UnknownWrites => self.scale_up(),
            WindowStatus::Hold => {}
            WindowStatus::Unknown => {
                self.unknown_cnt += 1;
                if self.unknown_cnt >= RWB_UNKNOWN_BUMP {
                    // No samples for a while: drift back toward the default.
                    if self.rq_depth.scale_step > 0 || self.pace.step > 0 {
                        self.scale_up();
                    } else if self.rq_depth.scale_step < 0 {
                        self.scale_down(false, false);
                    }
                }
            }
        }
        if self.rq_depth.scale_step != 0 || self.pace.step > 0 || self.inflight > 0 {
            self.arm_timer(now);
        } else {
            self.window_end = None;
        }
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Instant = Instant(0);

    fn window(
        wbt: &mut Wbt,
        start: Instant,
        read_lat_ns: Option<u64>,
        writes: u32,
    ) -> WindowStatus {
        for _ in 0..writes {
            wbt.on_write_issue(start);
            wbt.on_write_done(start, 0, Some(WbtClass::Background));
        }
        if let Some(lat) = read_lat_ns {
            wbt.on_read_issue(start, IoId(1));
            wbt.on_read_done(start + lat, IoId(1), lat);
        }
        let end = wbt.window_end.expect("armed by writes");
        wbt.on_timer(end, false)
    }

    #[test]
    fn limits_at_default_depth() {
        let wbt = Wbt::new(32, 2 * NS_PER_MS);
        assert_eq!(
            (wbt.rq_depth.max_depth, wbt.wb_normal, wbt.wb_background),
            (16, 8, 4)
        );
        assert_eq!(wbt.limit(WbtClass::Background, T0, false), 4);
        assert_eq!(
            wbt.limit(WbtClass::Normal, Instant(10 * NS_PER_SEC), false),
            8
        );
        assert_eq!(wbt.limit(WbtClass::Sync, T0, false), 16);
        assert_eq!(
            wbt.limit(WbtClass::Background, T0, true),
            16,
            "dirty-throttled writers boost"
        );
        let mut read = Wbt::new(32, 2 * NS_PER_MS);
        read.on_read_issue(T0, IoId(1));
        assert_eq!(
            read.limit(WbtClass::Background, T0, true),
            8,
            "reads within 100 ms cap the boost at wb_normal"
        );
        assert_eq!(read.limit(WbtClass::Sync, T0, true), 16);
        let off = Wbt::new(32, 0);
        assert!(off.may_issue(WbtClass::Background, T0, false));
    }

    #[test]
    fn a_serial_device_takes_one_write_at_a_time_while_reads_compete() {
        let mut wbt = Wbt::new(32, 2 * NS_PER_MS);
        wbt.serial = true;
        assert_eq!(wbt.limit(WbtClass::Background, T0, false), 4, "no reads");
        assert_eq!(wbt.limit(WbtClass::Background, T0, true), 16, "no reads");
        wbt.on_read_issue(T0, IoId(1));
        for class in [WbtClass::Background, WbtClass::Normal] {
            for dirty_sleep in [false, true] {
                assert_eq!(wbt.limit(class, T0, dirty_sleep), 1, "{class:?}");
            }
        }
        assert_eq!(wbt.limit(WbtClass::Sync, T0, true), 16, "integrity writes");
        let later = Instant(CLOSE_IO_NS + 1);
        assert_eq!(wbt.limit(WbtClass::Normal, later, false), 8, "reads gone");
    }

    #[test]
    fn write_slices_hold_writes_in_quiet_phases_only_while_reads_compete() {
        let ms = |n: u64| Instant(n * NS_PER_MS);
        let mut wbt = Wbt::new(32, 100 * crate::time::NS_PER_US);
        wbt.serial = true;
        wbt.slice.set(40, 0);
        wbt.on_write_issue(ms(0));
        assert!(!wbt.slice.writing(ms(0)), "no cycle without reads");
        wbt.on_read_issue(ms(1), IoId(1));
        wbt.on_write_issue(ms(2));
        // Write phase 2..42 ms: deep and uncapped, not one small write.
        assert_eq!(wbt.limit(WbtClass::Background, ms(3), false), SLICE_DEPTH);
        assert_eq!(wbt.write_pages_cap(ms(3), 1 << 20), u64::MAX);
        assert!(wbt.may_issue(WbtClass::Normal, ms(41), false));
        // Quiet phase 42..52 ms: held, with a time to retry.
        assert!(!wbt.may_issue(WbtClass::Background, ms(42), false));
        assert!(wbt.may_issue(WbtClass::Sync, ms(42), false), "integrity");
        wbt.note_refused(WbtClass::Background, ms(42));
        assert_eq!((wbt.slice.retry_at, wbt.slice.holds), (Some(ms(52)), 1));
        assert!(!wbt.pace.waiting, "not the pace's hold");
        assert!(wbt.may_issue(WbtClass::Background, ms(52), false));
        // Reads gone for 100 ms: nothing held, whatever the phase.
        let quiet_without_reads = ms(197);
        assert!(wbt.slice.quiet_until(quiet_without_reads).is_some());
        assert!(wbt.may_issue(WbtClass::Background, quiet_without_reads, false));
        // Throttling off or changed: no cycle, a held write retried at once.
        wbt.set_min_lat(0);
        assert_eq!(wbt.slice.retry_at, Some(Instant::ZERO));
        assert!(wbt.slice.quiet_until(ms(45)).is_none());
    }

    #[test]
    fn slow_reads_scale_down_fast_reads_scale_up() {
        let mut wbt = Wbt::new(32, 2 * NS_PER_MS);
        assert_eq!(
            window(&mut wbt, T0, Some(5 * NS_PER_MS), 3),
            WindowStatus::Exceeded
        );
        assert_eq!((wbt.rq_depth.scale_step, wbt.rq_depth.max_depth), (1, 8));
        assert_eq!(wbt.cur_win_ns, (RWB_WINDOW_NS as f64 / 2f64.sqrt()) as u64);
        let t = wbt.window_end.unwrap();
        assert_eq!(window(&mut wbt, t, Some(NS_PER_MS), 3), WindowStatus::Ok);
        assert_eq!(wbt.rq_depth.scale_step, 0);
        assert_eq!(
            wbt.window_end, None,
            "step 0 and nothing in flight: timer stops"
        );
        let t = t + RWB_WINDOW_NS;
        assert_eq!(window(&mut wbt, t, Some(NS_PER_MS), 3), WindowStatus::Ok);
        assert_eq!((wbt.rq_depth.scale_step, wbt.rq_depth.max_depth), (-1, 24));
        assert_eq!(wbt.scale_downs, 1);
        assert_eq!(wbt.scale_ups, 2);
    }

    #[test]
    fn too_few_write_samples_is_unknown_writes() {
        let mut wbt = Wbt::new(32, 2 * NS_PER_MS);
        assert_eq!(
            window(&mut wbt, T0, Some(50 * NS_PER_MS), 2),
            WindowStatus::UnknownWrites
        );
    }

    #[test]
    fn stuck_read_is_exceeded_without_samples() {
        let mut wbt = Wbt::new(32, 2 * NS_PER_MS);
        wbt.on_write_issue(T0);
        wbt.on_read_issue(T0, IoId(7));
        let end = wbt.window_end.unwrap();
        assert_eq!(wbt.on_timer(end, false), WindowStatus::Exceeded);
    }

    #[test]
    fn unknown_windows_drift_back_to_default() {
        let mut wbt = Wbt::new(32, 2 * NS_PER_MS);
        window(&mut wbt, T0, Some(5 * NS_PER_MS), 3);
        let t = wbt.window_end.unwrap();
        window(&mut wbt, t, Some(5 * NS_PER_MS), 3);
        assert_eq!(wbt.rq_depth.scale_step, 2);
        let mut now = wbt.window_end.unwrap();
        for i in 0..RWB_UNKNOWN_BUMP {
            let status = wbt.on_timer(now, false);
            assert_eq!(status, WindowStatus::Unknown);
            if i + 1 < RWB_UNKNOWN_BUMP {
                assert_eq!(wbt.rq_depth.scale_step, 2);
            }
            now = wbt.window_end.unwrap_or(now + RWB_WINDOW_NS);
        }
        assert_eq!(wbt.rq_depth.scale_step, 1);
    }

    #[test]
    fn sleepers_wake_in_batches() {
        let mut wbt = Wbt::new(32, 2 * NS_PER_MS);
        for _ in 0..8 {
            wbt.on_write_issue(T0);
        }
        wbt.note_refused(WbtClass::Background, T0);
        wbt.on_write_done(T0, 0, Some(WbtClass::Background));
        assert!(wbt.sleeping, "7 in flight of normal 8: room 1 < bg/2 = 2");
        wbt.on_write_done(T0, 0, Some(WbtClass::Background));
        assert!(!wbt.sleeping);
    }

    #[test]
    fn samples_outside_a_window_saturate_and_a_window_starts_afresh() {
        let mut wbt = Wbt::new(32, 2 * NS_PER_MS);
        // Only reads for a long time: no window is armed, nothing resets.
        for _ in 0..3 {
            wbt.on_foreign_reads(T0, u64::MAX, 5 * NS_PER_MS);
            wbt.on_read_issue(T0, IoId(1));
            wbt.on_read_done(T0, IoId(1), 5 * NS_PER_MS);
            wbt.on_commit_write_done(T0, 5 * NS_PER_MS);
            wbt.on_commit_done(T0, u64::MAX);
        }
        assert_eq!(wbt.window.read_samples, u32::MAX);
        // The first write arms a window, which counts from zero: its
        // fast reads are what it judges.
        wbt.on_write_issue(T0);
        assert_eq!((wbt.window.read_samples, wbt.window.commit_samples), (0, 0));
        for _ in 0..3 {
            wbt.on_write_issue(T0);
            wbt.on_write_done(T0, 0, Some(WbtClass::Background));
        }
        wbt.on_read_issue(T0, IoId(2));
        wbt.on_read_done(T0 + NS_PER_MS, IoId(2), NS_PER_MS);
        let end = wbt.window_end.expect("armed");
        assert_eq!(wbt.on_timer(end, false), WindowStatus::Ok);
    }

    #[test]
    fn slow_commits_scale_down_as_slow_reads_do() {
        let mut wbt = Wbt::new(32, 2 * NS_PER_MS);
        for _ in 0..3 {
            wbt.on_write_issue(T0);
            wbt.on_write_done(T0, 0, Some(WbtClass::Background));
        }
        assert!(!wbt.close_io(T0), "nothing competes yet");
        wbt.on_commit_issue(T0);
        assert!(wbt.close_io(T0), "a commit competes as a read does");
        // A commit's write (a small fsync write) that took 5 ms: over the
        // target, as a read's would be.
        wbt.on_commit_write_done(T0 + 5 * NS_PER_MS, 5 * NS_PER_MS);
        let end = wbt.window_end.unwrap();
        assert_eq!(wbt.on_timer(end, false), WindowStatus::Exceeded);
        assert_eq!(wbt.rq_depth.max_depth, 8);
    }

    /// One window from `start`: three background writes of 1 ms, and
    /// `commits` commits of `commit_ns` each, their writes a quarter of
    /// that (or a read of `read_ns`).
    fn commit_window(
        wbt: &mut Wbt,
        start: Instant,
        commits: u32,
        commit_ns: u64,
        read_ns: Option<u64>,
    ) -> WindowStatus {
        for _ in 0..3 {
            wbt.on_write_issue(start);
            wbt.on_write_done(start + NS_PER_MS, NS_PER_MS, Some(WbtClass::Background));
        }
        for _ in 0..commits {
            wbt.on_commit_issue(start);
            wbt.on_commit_write_done(start + commit_ns / 4, commit_ns / 4);
            wbt.on_commit_done(start + commit_ns, commit_ns);
        }
        if let Some(lat) = read_ns {
            wbt.on_read_issue(start, IoId(1));
            wbt.on_read_done(start + lat, IoId(1), lat);
        }
        let end = wbt.window_end.expect("armed by writes");
        wbt.on_timer(end, false)
    }

    #[test]
    fn slow_commits_at_depth_one_pace_the_writes_slow_reads_do_not() {
        let target = 2 * NS_PER_MS;
        // Fast commits among slow ones: the fastest is within the target,
        // the mean (5 ms) is not.
        let mut reads = Wbt::new(32, target);
        let mut commits = Wbt::new(32, target);
        let mut now = T0;
        // Depth 16 to 1 in four windows, then every pace step.
        for _ in 0..4 + crate::wbt_pace::MAX_PACE_STEP + 2 {
            let status = commit_window(&mut commits, now, 4, 5 * NS_PER_MS, Some(NS_PER_MS));
            assert_eq!(status, WindowStatus::CommitsExceeded);
            assert_eq!(commits.last_commit_mean_ns, 5 * NS_PER_MS, "for the stats");
            assert_eq!(
                commit_window(&mut reads, now, 0, 0, Some(5 * NS_PER_MS)),
                WindowStatus::Exceeded
            );
            now = commits
                .window_end
                .expect("armed")
                .max(reads.window_end.expect("armed"));
        }
        assert_eq!(
            (reads.rq_depth.max_depth, reads.pace.step),
            (1, 0),
            "reads: depth 1"
        );
        assert_eq!(commits.rq_depth.max_depth, 1);
        assert_eq!(
            commits.pace.step,
            crate::wbt_pace::MAX_PACE_STEP,
            "commits: paced"
        );
        // A background write of 4 ms at the last step holds the next for
        // step / 2 times as long, while commits compete; integrity writes
        // pass.
        commits.on_write_issue(now);
        commits.on_write_done(now + NS_PER_MS, 4 * NS_PER_MS, Some(WbtClass::Background));
        let gap_ns = 4 * NS_PER_MS * crate::wbt_pace::MAX_PACE_STEP as u64 / 2;
        commits.on_commit_issue(now + NS_PER_MS);
        let held = now + 2 * NS_PER_MS;
        assert!(!commits.may_issue(WbtClass::Background, held, false));
        assert!(commits.may_issue(WbtClass::Sync, held, false));
        commits.note_refused(WbtClass::Background, held);
        assert!(
            commits.pace.waiting && !commits.sleeping,
            "retried by the timer"
        );
        let gap_end = now + NS_PER_MS + gap_ns;
        assert!(!commits.may_issue(WbtClass::Background, gap_end - 1, false));
        assert!(commits.may_issue(WbtClass::Background, gap_end, false));
        // Commits within the target: out of pacing first, then deeper.
        let mut now = commits.window_end.expect("armed");
        for step in (0..crate::wbt_pace::MAX_PACE_STEP).rev() {
            let status = commit_window(&mut commits, now, 4, target / 2, None);
            assert_eq!(status, WindowStatus::Ok);
            assert_eq!((commits.pace.step, commits.rq_depth.max_depth), (step, 1));
            now = commits.window_end.expect("armed");
        }
    }

    #[test]
    fn without_the_pace_slow_commits_stop_at_depth_one() {
        let mut wbt = Wbt::new(32, 2 * NS_PER_MS);
        wbt.set_pace(false);
        let mut now = T0;
        for _ in 0..4 + crate::wbt_pace::MAX_PACE_STEP {
            commit_window(&mut wbt, now, 4, 5 * NS_PER_MS, Some(NS_PER_MS));
            now = wbt.window_end.expect("armed");
        }
        assert_eq!((wbt.rq_depth.max_depth, wbt.pace.step), (1, 0));
        // Turned off while pacing: nothing is held from then on.
        wbt.set_pace(true);
        commit_window(&mut wbt, now, 4, 5 * NS_PER_MS, Some(NS_PER_MS));
        assert_eq!(wbt.pace.step, 1);
        let now = wbt.window_end.expect("armed");
        wbt.on_write_issue(now);
        wbt.on_write_done(now + NS_PER_MS, 10 * NS_PER_MS, Some(WbtClass::Background));
        wbt.on_commit_issue(now + NS_PER_MS);
        assert!(!wbt.may_issue(WbtClass::Background, now + 2 * NS_PER_MS, false));
        wbt.set_pace(false);
        assert_eq!(wbt.pace.step, 0);
        assert!(wbt.may_issue(WbtClass::Background, now + 2 * NS_PER_MS, false));
    }

    #[test]
    fn commits_between_one_and_two_targets_hold_the_depth() {
        let target = 2 * NS_PER_MS;
        let mut wbt = Wbt::new(32, target);
        // The fastest (a read of 1 ms) is within the target; the commits'
        // mean (3 ms) is over one target and under two.
        assert_eq!(
            commit_window(&mut wbt, T0, 4, 3 * NS_PER_MS, Some(NS_PER_MS)),
            WindowStatus::Hold
        );
        assert_eq!(
            (wbt.rq_depth.scale_step, wbt.scale_ups, wbt.scale_downs),
            (0, 0, 0)
        );
        assert_eq!(
            commit_window(
                &mut wbt,
                Instant(NS_PER_SEC),
                3,
                3 * NS_PER_MS,
                Some(NS_PER_MS)
            ),
            WindowStatus::Ok,
            "3 commits are too few for a mean"
        );
    }

    #[test]
    fn slow_foreign_reads_scale_down() {
        let mut wbt = Wbt::new(32, 2 * NS_PER_MS);
        for _ in 0..3 {
            wbt.on_write_issue(T0);
            wbt.on_write_done(T0, 0, Some(WbtClass::Background));
        }
        // 40 reads by another process averaging 5 ms: over the 2 ms target.
        wbt.on_foreign_reads(T0 + NS_PER_MS, 40, 5 * NS_PER_MS);
        let end = wbt.window_end.unwrap();
        assert_eq!(wbt.on_timer(end, false), WindowStatus::Exceeded);
        assert_eq!(wbt.rq_depth.max_depth, 8);
        // Fast foreign reads are fine.
        for _ in 0..3 {
            wbt.on_write_issue(end);
            wbt.on_write_done(T0, 0, Some(WbtClass::Background));
        }
        wbt.on_foreign_reads(end + NS_PER_MS, 40, 100_000);
        let end2 = wbt.window_end.unwrap();
        assert_eq!(wbt.on_timer(end2, false), WindowStatus::Ok);
    }

    #[test]
    fn writes_are_capped_to_the_target_only_while_reads_compete() {
        let mut wbt = Wbt::new(32, 100_000);
        let bw = 150_000; // pages/s, about 600 MiB/s
        assert_eq!(wbt.write_pages_cap(T0, bw), u64::MAX, "no reads yet");
        wbt.on_read_issue(T0, IoId(1));
        assert_eq!(
            wbt.write_pages_cap(T0, bw),
            64,
            "15 pages in 0.1 ms, at least 64"
        );
        let mut serial = wbt.clone();
        serial.serial = true;
        assert_eq!(
            serial.write_pages_cap(T0, bw),
            16,
            "15 pages in 0.1 ms, at least 16 on a serial device"
        );
        assert_eq!(serial.write_pages_cap(T0, 2 * bw), 30);
        assert_eq!(wbt.write_pages_cap(T0, 10 * bw), 150);
        let later = Instant(CLOSE_IO_NS + 1);
        assert_eq!(wbt.write_pages_cap(later, bw), u64::MAX, "reads gone");
        assert_eq!(serial.write_pages_cap(later, bw), u64::MAX, "reads gone");
        let disk = {
            let mut d = Wbt::new(32, 32 * NS_PER_MS);
            d.on_read_issue(T0, IoId(1));
            d
        };
        assert_eq!(
            disk.write_pages_cap(T0, 25_000),
            800,
            "100 MB/s disk: over 512 KiB"
        );
        let mut off = Wbt::new(32, 0);
        off.on_read_issue(T0, IoId(1));
        assert_eq!(off.write_pages_cap(T0, bw), u64::MAX);
    }
}
