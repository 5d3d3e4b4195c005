//! A device's state: its knobs, its writeback throttle, its request tags
//! and the reads waiting for one, its writeback contexts, backlog and free
//! space (device/ holds the Engine's side).

use crate::action::{IoDir, IoRequest};
use crate::backlog::queue::Backlog;
use crate::config::{DeviceConfig, StableWrites};
use crate::ids::WbId;
use crate::space::state::DeviceSpace;
use crate::stats::counters::DeviceStats;
use crate::time::{Earliest, Instant, NS_PER_MS};
use crate::wbt::{auto_target_ns, Wbt};
use crate::write_latency::FullWriteLatency;
use std::collections::VecDeque;

/// Most devices one engine serves (the table is dense).
pub const MAX_DEVICES: usize = 256;

/// A device whose idle 4 KiB read takes this long or more seeks (a disk).
pub const SEEKING_DEVICE_NS: u64 = NS_PER_MS;
/// Reads a seeking device may hold at once (ours, not Linux's).
pub const SEEKING_READ_DEPTH: u32 = 2;

/// How many reads a device may hold at once. A disk reorders what it
/// holds for the shortest seek: with many reads queued it serves, again
/// and again, the reader whose next block is under the head (one of four
/// equal sequential readers got 2.9× the others, and the four together
/// left the writers a third of their bandwidth). So a seeking device gets
/// at most SEEKING_READ_DEPTH reads; the rest wait with us in arrival
/// order. Flash serves reads in parallel: no limit.
pub fn read_depth_max(idle_read_latency_ns: u64) -> u32 {
    if idle_read_latency_ns >= SEEKING_DEVICE_NS {
        SEEKING_READ_DEPTH
    } else {
        u32::MAX
    }
}

#[derive(Debug)]
pub(crate) struct Device {
    pub config: DeviceConfig,
    pub wbt: Wbt,
    pub idle_read_latency_ns: u64,
    pub tags_used: u32,
    /// nr_requests was lowered below the tags in use: no tag is handed out
    /// until they drain below it (Linux freezes the queue instead).
    pub tags_draining: bool,
    /// Reads waiting for a tag, in arrival order.
    pub tag_waiters: VecDeque<IoRequest>,
    /// Last time a writer to this device slept in the dirty throttle.
    pub last_bdp_sleep: Option<Instant>,
    /// The highest write bandwidth measured on the device (its contexts'
    /// estimates summed, pages/s): what it can write when not throttled.
    pub write_bw_peak: u64,
    /// Reads handed to the device and not yet complete.
    pub reads_inflight: u32,
    /// At most this many reads in flight (see `read_depth_max`).
    pub read_depth_max: u32,
    pub wbs: Vec<WbId>,
    /// Which context the flusher pump starts with next (round robin).
    pub next_wb: usize,
    /// The device checksums data in flight and needs pages stable while
    /// they are written (a fact the runtime reports: Linux's
    /// queue/stable_writes, or the model's).
    pub stable_required: bool,
    /// Deferred releases of unlinked files (backlog/).
    /// Boxed: rarely used, and the device's hot fields stay together.
    pub backlog: Box<Backlog>,
    /// Free space reserved for dirty pages (space/).
    pub space: DeviceSpace,
    /// How long a full write takes, unqueued (write_latency.rs).
    pub full_write_latency: FullWriteLatency,
    pub stats: DeviceStats,
}

/// wbt's latency target for a device: the `wbt_lat_usec` knob, or with
/// -1 one derived from its idle read latency.
pub fn wbt_target(config: &DeviceConfig, idle_read_latency_ns: u64) -> u64 {
    match config.wbt_lat_usec {
        -1 => auto_target_ns(idle_read_latency_ns),
        usec => usec.max(0) as u64 * crate::time::NS_PER_US,
    }
}

/// The depth wbt scales from: the device's own queue, or the block
/// layer's tags when there are fewer (no more can be in flight).
pub fn wbt_queue_depth(config: &DeviceConfig) -> u32 {
    config.queue_depth.min(config.nr_requests)
}

impl Device {
    /// `req` is handed to the runtime: it takes a tag, and wbt and the
    /// counters note it (`tracked`: counted against wbt's in-flight
    /// limit; `commit`: a write of someone's commit).
    pub(crate) fn on_issue(&mut self, now: Instant, req: &IoRequest, tracked: bool, commit: bool) {
        assert!(
            self.tags_used < self.config.nr_requests,
            "issue without a free tag"
        );
        self.tags_used += 1;
        self.stats.inflight_peak = self.stats.inflight_peak.max(self.tags_used);
        match req.dir {
            IoDir::Write => {
                if tracked {
                    self.wbt.on_write_issue(now);
                }
                if commit {
                    self.wbt.on_commit_issue(now);
                }
                self.stats.writes += 1;
            }
            IoDir::Read => {
                self.reads_inflight += 1;
                self.wbt.slice.note_read_issued(req.id);
                self.wbt.on_read_issue(now, req.id);
                self.stats.reads += 1;
            }
        }
    }

    /// The earliest of this device's deadlines (timers/): wbt's window;
    /// a write held by wbt's pace, retried when the pace ends (at once if
    /// pacing stopped meanwhile: no `until` left); a write held by a
    /// quiet phase; the next free-space report while some is reserved;
    /// the end of a space flush.
    #[inline]
    pub(crate) fn next_timeout(&self) -> Earliest {
        let wbt = &self.wbt;
        let space = &self.space;
        Earliest::NONE
            .at_opt(wbt.window_end)
            .at_opt(wbt.slice.retry_at)
            .at_if(wbt.pace.waiting, wbt.pace.until.unwrap_or(Instant::ZERO))
            .at_opt(space.next_statfs.filter(|_| space.reserved > 0))
            .at_opt(
                space
                    .flush_started
                    .map(|at| at + crate::space::SPACE_FLUSH_MAX_NS),
            )
    }

    /// Takes `config`, in which `knob` changed at run time
    /// (`Engine::set_device_knob`, which checked it): what derives from
    /// the knob follows it.
    pub(crate) fn set_knob(&mut self, knob: &str, config: DeviceConfig) {
        if knob == "wbt_lat_usec" {
            let target = wbt_target(&config, self.idle_read_latency_ns);
            self.wbt.set_min_lat(target);
            self.stats.wbt_enabled = target != 0;
            self.stats.wbt_target_ns = target;
        }
        if knob == "serial" {
            self.wbt.serial = config.serial;
        }
        if knob == "wbt_pace" {
            self.wbt.set_pace(config.wbt_pace);
        }
        if knob == "wbt_slice_ms" || knob == "wbt_slice_quiet_ms" {
            self.wbt
                .slice
                .set(config.wbt_slice_ms, config.wbt_slice_quiet_ms);
        }
        if knob == "queue_depth" || knob == "nr_requests" {
            self.wbt.set_queue_depth(wbt_queue_depth(&config));
            // Tags already handed out stay valid; none is handed out until
            // they drain below a lowered limit (`issue`, `pump`).
            self.tags_draining = self.tags_used > config.nr_requests;
        }
        self.config = config;
    }

    /// A device named `name`, whose median 4 KiB read takes
    /// `idle_read_latency_ns` when idle (the automatic wbt target derives
    /// from it).
    pub(crate) fn new(name: &str, config: DeviceConfig, idle_read_latency_ns: u64) -> Device {
        let target = wbt_target(&config, idle_read_latency_ns);
        let mut wbt = Wbt::new(wbt_queue_depth(&config), target);
        wbt.serial = config.serial;
        wbt.set_pace(config.wbt_pace);
        wbt.slice
            .set(config.wbt_slice_ms, config.wbt_slice_quiet_ms);
        let stats = DeviceStats {
            name: name.to_string(),
            wbt_enabled: target != 0,
            wbt_target_ns: target,
            ..DeviceStats::default()
        };
        Device {
            config,
            wbt,
            idle_read_latency_ns,
            tags_used: 0,
            tags_draining: false,
            tag_waiters: VecDeque::new(),
            last_bdp_sleep: None,
            write_bw_peak: 0,
            reads_inflight: 0,
            read_depth_max: read_depth_max(idle_read_latency_ns),
            wbs: Vec::new(),
            next_wb: 0,
            stable_required: false,
            backlog: Default::default(),
            space: Default::default(),
            full_write_latency: crate::write_latency::FullWriteLatency::new(Instant(0)),
            stats,
        }
    }

    /// This device's counters, with wbt's, its backlog's and its space's
    /// state (`backlog_wait_ms`: the backlog's bound); the page counts and
    /// bandwidth of its writeback contexts are added by the caller.
    pub(crate) fn stats_now(&self, backlog_wait_ms: u32) -> DeviceStats {
        let mut ds = self.stats.clone();
        let wbt = &self.wbt;
        ds.wbt_max_depth = wbt.rq_depth.max_depth;
        ds.wbt_scale_step = wbt.rq_depth.scale_step;
        ds.wbt_max_depth_min = wbt.max_depth_min;
        ds.wbt_max_depth_max = wbt.max_depth_max;
        ds.wbt_scale_ups = wbt.scale_ups;
        ds.wbt_scale_downs = wbt.scale_downs;
        ds.wbt_pace_step = wbt.pace.step;
        ds.wbt_pace_holds = wbt.pace.holds;
        ds.wbt_slice_cycles = wbt.slice.cycles;
        ds.wbt_slice_holds = wbt.slice.holds;
        ds.wbt_slice_read_holds = wbt.slice.read_holds;
        ds.wbt_slice_read_hold_ns = wbt.slice.read_hold_ns;
        ds.wbt_commit_mean_ns = wbt.last_commit_mean_ns;
        ds.stable_writes = match self.config.stable_writes {
            StableWrites::Auto => format!("{} (auto)", self.stable_mode().name()),
            mode => mode.name().to_string(),
        };
        ds.backlog = self.backlog.stats(backlog_wait_ms);
        ds.space_reserved_pages = self.space.reserved;
        ds.space_free_pages = self.space.free_pages.unwrap_or(0);
        ds
    }

    /// A writer of this device slept in the dirty throttle lately.
    pub fn recent_dirty_sleep(&self, now: Instant) -> bool {
        self.last_bdp_sleep
            .is_some_and(|t| now.since_ns(t) < crate::wbt::RECENT_WAIT_NS)
    }

    /// What writers do with pages under writeback on this device:
    /// `stable_writes`, with `auto` resolved by what the device needs.
    pub(crate) fn stable_mode(&self) -> StableWrites {
        match self.config.stable_writes {
            StableWrites::Auto if self.stable_required => StableWrites::Snapshot,
            StableWrites::Auto => StableWrites::None,
            mode => mode,
        }
    }

    /// Checks the device's tags and wbt's count against its requests in
    /// flight (`tags`, of which wbt tracks `tracked`), and that whatever
    /// wbt holds has a time to go (`timer_armed`: the engine's next
    /// timeout is set). `d`: the device's index, for the messages.
    pub(crate) fn check_in_flight(&self, d: usize, (tags, tracked): (u32, u32), timer_armed: bool) {
        assert_eq!(
            self.tags_used, tags,
            "device {d}: tags = requests in flight"
        );
        assert!(
            self.tags_used <= self.config.nr_requests || self.tags_draining,
            "device {d}: tags within nr_requests"
        );
        assert_eq!(
            self.wbt.inflight, tracked,
            "device {d}: wbt in-flight count = tracked writes in flight"
        );
        assert!(
            self.wbt.enabled() || self.wbt.window_end.is_none(),
            "device {d}: wbt's window is armed only while wbt is on"
        );
        for id in &self.wbt.slice.reads_waiting {
            assert!(
                self.tag_waiters
                    .iter()
                    .any(|r| r.id == *id && r.dir == IoDir::Read),
                "device {d}: a read held by a write phase waits for a tag"
            );
        }
        assert!(
            self.wbt.slice.reads_waiting.is_empty() || timer_armed,
            "device {d}: a read held by a write phase has a time to go"
        );
        assert!(
            !self.wbt.pace.waiting || timer_armed,
            "device {d}: a write held by the pace has a time to retry"
        );
    }
}
