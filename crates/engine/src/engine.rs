//! The engine: state of the cache, its writeback contexts and devices, and
//! the entry points a runtime calls. Time comes in as an argument; I/O and
//! wake-ups go out through [`Engine::poll_action`]. Nothing here sleeps,
//! reads a clock or does I/O.
//!
//! Call order: a caller's operation (`write`, `read`, `fsync`, `sync`)
//! returns [`Step::Done`] or [`Step::Sleep`]; after a sleep the runtime calls
//! `resume` for the task until it is done. The runtime performs every
//! [`Action::Submit`] and reports it with `io_complete`, calls
//! `handle_timeout` at `poll_timeout`, and passes monotonic time throughout.

use crate::action::{Action, IoRequest, Stall, StallReason, Step};
use crate::balance_dirty::TaskDirty;
use crate::bandwidth::{WriteBandwidth, BANDWIDTH_INTERVAL_NS};
use crate::config::{Config, DeviceConfig};
use crate::dirty_limits::{domain_dirty_limits, GlobalThresh};
use crate::error::EngineError;
use crate::flusher::Flusher;
use crate::ids::{DeviceId, DomainId, FileId, HandleId, IoId, PageIndex, TaskId, WbId, PAGE_SIZE};
use crate::page_cache::{CachedFile, FrameSpace, ReclaimQueue};
use crate::proportions::{FpropGlobal, FpropLocal, PERIOD_NS};
use crate::ratelimit::DirtyRatelimit;
use crate::stats::{DeviceStats, Stats};
use crate::sync::SyncOp;
use crate::time::Instant;
use crate::wbt::{auto_target_ns, Wbt};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A caller waiting for an event is woken at the latest after this long
/// and re-checks (a lost or late event can never strand it).
pub const EVENT_WAIT_MAX_NS: u64 = 100 * crate::time::NS_PER_MS;
/// Upper bound on tasks, handles, devices and domains (tables are dense).
pub const MAX_TASKS: usize = 1 << 16;
pub const MAX_DEVICES: usize = 256;
pub const MAX_DOMAINS: usize = 1024;

/// One writeback context: a (device, domain) pair (Linux's bdi_writeback).
#[derive(Debug)]
pub(crate) struct Wb {
    pub device: DeviceId,
    pub dirty: u64,
    pub writeback: u64,
    pub dirtied: u64,
    pub written: u64,
    pub bw: WriteBandwidth,
    pub rl: DirtyRatelimit,
    pub completions: FpropLocal,
    /// Dirty files in first-dirtied order (Linux's b_dirty).
    pub dirty_files: BTreeSet<(Instant, FileId)>,
    pub flusher: Flusher,
    /// The file the flusher is writing, as its position in `dirty_files`.
    pub cursor: Option<(Instant, FileId)>,
    pub dirty_exceeded: bool,
}

impl Wb {
    pub fn has_io(&self) -> bool {
        self.dirty > 0 || self.writeback > 0
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
    pub wbs: Vec<WbId>,
    /// Which context the flusher pump starts with next (round robin).
    pub next_wb: usize,
    pub stats: DeviceStats,
}

/// What a task is in the middle of.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Op {
    Idle,
    Write {
        handle: HandleId,
        /// Next byte to copy.
        pos: u64,
        end: u64,
        /// The throttle asked to look again after the pause.
        throttle_again: bool,
        /// 2007-style throttle: waiting for own writeback since this count.
        wait_2007: Option<u64>,
    },
    Read {
        handle: HandleId,
        offset: u64,
        len: u64,
    },
    Sync {
        op: u64,
    },
    Truncate {
        file: FileId,
        len: u64,
    },
}

#[derive(Debug)]
pub(crate) struct Task {
    pub dirty: TaskDirty,
    pub op: Op,
    /// The stall the task is in, and when it began.
    pub stall: Option<(StallReason, Instant)>,
    /// Where the task's last read ended, for readahead.
    pub last_read: Option<(FileId, PageIndex)>,
    /// 2007 mode: pages dirtied since the last check. Linux kept this per
    /// CPU; here each task counts as running on its own CPU.
    pub ratelimit_2007: u64,
}

#[derive(Debug)]
pub(crate) struct Handle {
    pub file: FileId,
    pub err_seen: u64,
}

/// A request handed to the runtime and not yet completed.
#[derive(Debug)]
pub(crate) struct Inflight {
    pub req: IoRequest,
    pub issued_at: Instant,
    /// Counted against wbt's in-flight limit.
    pub tracked: bool,
}

/// What a waiting task waits for, so events wake only those concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitKey {
    /// I/O on this file completed (read done, writeback done).
    FileIo(FileId),
    /// Pages became reclaimable.
    Memory,
    /// This context wrote pages back.
    WbWritten(WbId),
    /// A sync operation's writes are all done.
    Sync(u64),
}

pub struct Engine {
    pub(crate) config: Config,
    pub(crate) memory_pages: u64,
    pub(crate) thresh: GlobalThresh,
    /// Linux's dom->dirty_limit: follows thresh up at once, down slowly.
    pub(crate) dirty_limit: u64,
    pub(crate) files: Vec<CachedFile>,
    pub(crate) handles: Vec<Option<Handle>>,
    /// Slots of closed handles, for the next opens.
    pub(crate) free_handles: Vec<u32>,
    pub(crate) tasks: Vec<Task>,
    pub(crate) devices: Vec<Device>,
    pub(crate) domains: Vec<String>,
    pub(crate) wbs: Vec<Wb>,
    pub(crate) wb_index: BTreeMap<(DeviceId, DomainId), WbId>,
    pub(crate) reclaim: ReclaimQueue,
    pub(crate) frames: FrameSpace,
    pub(crate) nr_cached: u64,
    pub(crate) nr_dirty: u64,
    pub(crate) nr_writeback: u64,
    pub(crate) completions: FpropGlobal,
    pub(crate) inflight: BTreeMap<IoId, Inflight>,
    pub(crate) next_io: u64,
    pub(crate) syncs: BTreeMap<u64, SyncOp>,
    pub(crate) next_sync: u64,
    pub(crate) waiting: Vec<(TaskId, WaitKey)>,
    pub(crate) actions: VecDeque<Action>,
    pub(crate) dirty_exceeded_2007: bool,
    pub(crate) next_bandwidth: Instant,
    pub(crate) next_period: Instant,
    pub(crate) next_kupdate: Option<Instant>,
    pub(crate) stats: Stats,
    /// Frames whose pages a runtime read from its own index since reclaim
    /// last looked (see `note_referenced_frames`).
    pub(crate) frame_notes: crate::frame_notes::FrameNotes,
    /// Pages that left the cache, if a runtime asked (unmap_log.rs).
    pub(crate) unmapped: Option<Vec<(FileId, PageIndex, PageIndex)>>,
    /// Calls of `check_invariants` so far (some checks are sampled).
    pub(crate) invariant_checks: std::cell::Cell<u64>,
}

impl Engine {
    pub fn new(config: Config, now: Instant) -> Engine {
        let memory_pages = config.memory_bytes / PAGE_SIZE;
        let thresh = domain_dirty_limits(&config, memory_pages);
        let next_kupdate = Self::kupdate_interval(&config).map(|ns| now + ns);
        let mut engine = Engine {
            config,
            memory_pages,
            thresh,
            dirty_limit: thresh.thresh,
            files: Vec::new(),
            handles: Vec::new(),
            free_handles: Vec::new(),
            tasks: Vec::new(),
            devices: Vec::new(),
            domains: vec!["root".to_string()],
            wbs: Vec::new(),
            wb_index: BTreeMap::new(),
            reclaim: ReclaimQueue::default(),
            frames: FrameSpace::new(memory_pages),
            nr_cached: 0,
            nr_dirty: 0,
            nr_writeback: 0,
            completions: FpropGlobal::default(),
            inflight: BTreeMap::new(),
            next_io: 1,
            syncs: BTreeMap::new(),
            next_sync: 1,
            waiting: Vec::new(),
            actions: VecDeque::new(),
            dirty_exceeded_2007: false,
            next_bandwidth: now + BANDWIDTH_INTERVAL_NS,
            next_period: now + PERIOD_NS,
            next_kupdate,
            stats: Stats::default(),
            frame_notes: crate::frame_notes::FrameNotes::new(memory_pages),
            unmapped: None,
            invariant_checks: std::cell::Cell::new(0),
        };
        engine.stats.memory_pages = memory_pages;
        engine
    }

    fn kupdate_interval(config: &Config) -> Option<u64> {
        match config.dirty_writeback_centisecs {
            0 => None,
            cs => Some(cs as u64 * 10 * crate::time::NS_PER_MS),
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn device_config(&self, device: DeviceId) -> &DeviceConfig {
        &self.devices[device.index()].config
    }

    /// Adds a device. `idle_read_latency_ns` is its median 4 KiB read
    /// latency when idle (known for a model, measured for a real disk); the
    /// automatic wbt target derives from it.
    pub fn add_device(
        &mut self,
        name: &str,
        config: DeviceConfig,
        idle_read_latency_ns: u64,
    ) -> DeviceId {
        assert!(self.devices.len() < MAX_DEVICES, "too many devices");
        let target = Self::wbt_target(&config, idle_read_latency_ns);
        let wbt = Wbt::new(Self::wbt_queue_depth(&config), target);
        let stats = DeviceStats {
            name: name.to_string(),
            wbt_enabled: target != 0,
            wbt_target_ns: target,
            ..DeviceStats::default()
        };
        self.devices.push(Device {
            config,
            wbt,
            idle_read_latency_ns,
            tags_used: 0,
            tags_draining: false,
            tag_waiters: VecDeque::new(),
            last_bdp_sleep: None,
            wbs: Vec::new(),
            next_wb: 0,
            stats,
        });
        DeviceId((self.devices.len() - 1) as u32)
    }

    fn wbt_target(config: &DeviceConfig, idle_read_latency_ns: u64) -> u64 {
        match config.wbt_lat_usec {
            -1 => auto_target_ns(idle_read_latency_ns),
            usec => usec.max(0) as u64 * crate::time::NS_PER_US,
        }
    }

    /// Changes a device knob at run time. Bad values change nothing.
    pub fn set_device_knob(
        &mut self,
        device: DeviceId,
        knob: &str,
        value: &str,
    ) -> Result<(), crate::config::KnobError> {
        let dev = &mut self.devices[device.index()];
        let mut config = dev.config.clone();
        config.set(knob, value)?;
        let sum_min: u32 = self
            .devices
            .iter()
            .enumerate()
            .map(|(i, d)| {
                if i == device.index() {
                    config.min_ratio
                } else {
                    d.config.min_ratio
                }
            })
            .sum();
        if sum_min > 100 {
            return Err(crate::config::KnobError::Invalid {
                knob: knob.to_string(),
                value: value.to_string(),
                reason: "the devices' min_ratio values would add up to more than 100".to_string(),
            });
        }
        let dev = &mut self.devices[device.index()];
        if knob == "wbt_lat_usec" {
            let target = Self::wbt_target(&config, dev.idle_read_latency_ns);
            dev.wbt.set_min_lat(target);
            dev.stats.wbt_enabled = target != 0;
            dev.stats.wbt_target_ns = target;
        }
        if knob == "queue_depth" || knob == "nr_requests" {
            dev.wbt.set_queue_depth(Self::wbt_queue_depth(&config));
            // Tags already handed out stay valid; none is handed out until
            // they drain below a lowered limit (`issue`, `pump`).
            dev.tags_draining = dev.tags_used > config.nr_requests;
        }
        dev.config = config;
        Ok(())
    }

    /// The depth wbt scales from: the device's own queue, or the block
    /// layer's tags when there are fewer (no more can be in flight).
    fn wbt_queue_depth(config: &DeviceConfig) -> u32 {
        config.queue_depth.min(config.nr_requests)
    }

    /// Changes a cache-wide knob at run time. Bad values change nothing;
    /// the cache budget is fixed once the engine exists.
    pub fn set_knob(&mut self, knob: &str, value: &str) -> Result<(), crate::config::KnobError> {
        let mut config = self.config.clone();
        config.set(knob, value)?;
        if config.memory_bytes != self.config.memory_bytes {
            return Err(crate::config::KnobError::Invalid {
                knob: knob.to_string(),
                value: value.to_string(),
                reason: "the cache budget cannot change while the cache runs".to_string(),
            });
        }
        self.thresh = domain_dirty_limits(&config, self.memory_pages);
        // The hard limit follows a raised threshold at once and a lowered one slowly.
        self.dirty_limit = self.dirty_limit.max(self.thresh.thresh);
        if config.dirty_writeback_centisecs != self.config.dirty_writeback_centisecs {
            self.next_kupdate = None;
        }
        self.config = config;
        Ok(())
    }

    /// Reports reads the device served for others since the last report
    /// (from the device's statistics): `reads` reads taking `latency_ns` in
    /// all. Lets wbt protect readers outside the engine.
    pub fn note_foreign_reads(
        &mut self,
        now: Instant,
        device: DeviceId,
        reads: u64,
        latency_ns: u64,
    ) {
        if reads == 0 {
            return;
        }
        let wbt = &mut self.devices[device.index()].wbt;
        if wbt.enabled() {
            wbt.on_foreign_reads(now, reads, latency_ns / reads);
        }
    }

    pub fn add_domain(&mut self, name: &str) -> DomainId {
        assert!(self.domains.len() < MAX_DOMAINS, "too many domains");
        self.domains.push(name.to_string());
        DomainId((self.domains.len() - 1) as u32)
    }

    pub fn add_task(&mut self) -> TaskId {
        assert!(self.tasks.len() < MAX_TASKS, "too many tasks");
        self.tasks.push(Task {
            dirty: TaskDirty::default(),
            op: Op::Idle,
            stall: None,
            last_read: None,
            ratelimit_2007: 0,
        });
        TaskId((self.tasks.len() - 1) as u32)
    }

    pub(crate) fn wb_for(&mut self, device: DeviceId, domain: DomainId, now: Instant) -> WbId {
        if let Some(&wb) = self.wb_index.get(&(device, domain)) {
            return wb;
        }
        let id = WbId(self.wbs.len() as u32);
        self.wbs.push(Wb {
            device,
            dirty: 0,
            writeback: 0,
            dirtied: 0,
            written: 0,
            bw: WriteBandwidth::new(now),
            rl: DirtyRatelimit::default(),
            completions: FpropLocal::default(),
            dirty_files: BTreeSet::new(),
            flusher: Flusher::default(),
            cursor: None,
            dirty_exceeded: false,
        });
        self.wb_index.insert((device, domain), id);
        self.devices[device.index()].wbs.push(id);
        id
    }

    /// Makes a file known to the cache: `size` bytes already on the device.
    pub fn add_file(
        &mut self,
        now: Instant,
        device: DeviceId,
        domain: DomainId,
        size: u64,
    ) -> FileId {
        assert!(device.index() < self.devices.len() && domain.index() < self.domains.len());
        let wb = self.wb_for(device, domain, now);
        self.files.push(CachedFile::new(device, wb, size));
        FileId((self.files.len() - 1) as u32)
    }

    /// Opens a handle on a file; it will see write-back errors from now on.
    pub fn open(&mut self, file: FileId) -> HandleId {
        let f = &mut self.files[file.index()];
        assert!(!f.evicted, "file {} opened after eviction", file.0);
        f.open_handles += 1;
        let handle = Some(Handle {
            file,
            err_seen: f.err_seq,
        });
        // Closed handles' slots are used again: a server opening files all
        // day keeps a table as large as its most handles open at once.
        if let Some(slot) = self.free_handles.pop() {
            assert!(self.handles[slot as usize].is_none());
            self.handles[slot as usize] = handle;
            return HandleId(slot);
        }
        self.handles.push(handle);
        HandleId((self.handles.len() - 1) as u32)
    }

    pub fn close(&mut self, handle: HandleId) -> Result<(), EngineError> {
        let file = self.handle(handle)?.file;
        self.handles[handle.index()] = None;
        self.free_handles.push(handle.0);
        let f = &mut self.files[file.index()];
        assert!(f.open_handles > 0);
        f.open_handles -= 1;
        Ok(())
    }

    pub(crate) fn handle(&self, handle: HandleId) -> Result<&Handle, EngineError> {
        self.handles
            .get(handle.index())
            .and_then(|h| h.as_ref())
            .ok_or(EngineError::BadHandle(handle))
    }

    pub fn file_size(&self, file: FileId) -> u64 {
        self.files[file.index()].size
    }

    pub(crate) fn task_mut(&mut self, task: TaskId) -> Result<&mut Task, EngineError> {
        self.tasks
            .get_mut(task.index())
            .ok_or(EngineError::BadTask(task))
    }

    /// Starts an operation for `task`, which must be idle.
    pub(crate) fn begin(&mut self, task: TaskId, op: Op) -> Result<(), EngineError> {
        let t = self.task_mut(task)?;
        if t.op != Op::Idle {
            return Err(EngineError::Busy(task));
        }
        t.op = op;
        Ok(())
    }

    /// Records that `task` must wait, and returns the step telling it so.
    pub(crate) fn stall(
        &mut self,
        task: TaskId,
        now: Instant,
        stall: Stall,
        key: Option<WaitKey>,
    ) -> Step {
        assert!(stall.until >= now, "a stall ends in the future");
        let t = &mut self.tasks[task.index()];
        assert!(t.stall.is_none(), "task already stalled");
        t.stall = Some((stall.reason, now));
        if let Some(key) = key {
            self.waiting.push((task, key));
        }
        Step::Sleep(stall)
    }

    /// Makes `task` wait for an event, re-checking after at most
    /// EVENT_WAIT_MAX_NS in case the event is late.
    pub(crate) fn wait_for(
        &mut self,
        now: Instant,
        task: TaskId,
        reason: StallReason,
        key: WaitKey,
    ) -> Step {
        let stall = Stall {
            reason,
            until: now + EVENT_WAIT_MAX_NS,
            wakeable: true,
        };
        self.stall(task, now, stall, Some(key))
    }

    /// An event the engine can wait on happened: wake whoever waits for it.
    pub(crate) fn wake(&mut self, key: WaitKey) {
        let actions = &mut self.actions;
        self.waiting.retain(|&(task, k)| {
            if k == key {
                actions.push_back(Action::Wake(task));
                false
            } else {
                true
            }
        });
    }

    /// Continues the task's operation after a sleep.
    pub fn resume(&mut self, now: Instant, task: TaskId) -> Result<Step, EngineError> {
        let t = self.task_mut(task)?;
        if let Some((reason, since)) = t.stall.take() {
            let waited = now.since_ns(since);
            self.stats.stalls[reason.index()].record(waited);
            if reason == StallReason::DirtyThrottle {
                if let Op::Write { handle, .. } = self.tasks[task.index()].op {
                    let file = self.handle(handle)?.file;
                    let device = self.files[file.index()].device;
                    self.devices[device.index()].stats.throttle.record(waited);
                }
            }
        }
        self.waiting.retain(|&(t, _)| t != task);
        match self.tasks[task.index()].op.clone() {
            Op::Idle => Err(EngineError::NothingToResume(task)),
            Op::Write { .. } => self.continue_write(now, task),
            Op::Read { .. } => self.continue_read(now, task),
            Op::Sync { op } => self.continue_sync(now, task, op),
            Op::Truncate { .. } => self.continue_truncate(now, task),
        }
    }

    /// Ends the task's operation.
    pub(crate) fn finish(
        &mut self,
        task: TaskId,
        result: Result<Step, EngineError>,
    ) -> Result<Step, EngineError> {
        self.tasks[task.index()].op = Op::Idle;
        result
    }

    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
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

    pub(crate) fn recent_dirty_sleep(&self, device: DeviceId, now: Instant) -> bool {
        self.devices[device.index()]
            .last_bdp_sleep
            .is_some_and(|t| now.since_ns(t) < crate::wbt::RECENT_WAIT_NS)
    }

    /// Pages dirty or under writeback, globally.
    pub fn dirty_and_writeback_pages(&self) -> u64 {
        self.nr_dirty + self.nr_writeback
    }

    /// The hard dirty limit in pages (max of thresh and the decaying dirty_limit).
    pub fn hard_limit_pages(&self) -> u64 {
        self.thresh.thresh.max(self.dirty_limit)
    }

    /// How far the dirty count may exceed the hard limit: each task may
    /// dirty up to its check interval (capped) plus one page before it
    /// looks at the limit again.
    pub fn dirty_slack_pages(&self) -> u64 {
        self.tasks.len() as u64 * (crate::balance_dirty::MAX_DIRTIED_PAUSE + 1)
    }

    /// The frame holding a cached page's data.
    pub fn page_frame(&self, file: FileId, page: PageIndex) -> Option<u32> {
        self.files.get(file.index())?.frame(page)
    }

    /// Where the task's write has got to (the next byte to copy), while it writes.
    pub fn write_pos(&self, task: TaskId) -> Option<u64> {
        match self.tasks.get(task.index())?.op {
            Op::Write { pos, .. } => Some(pos),
            _ => None,
        }
    }

    pub fn cached_pages(&self) -> u64 {
        self.nr_cached
    }

    pub fn memory_pages(&self) -> u64 {
        self.memory_pages
    }

    pub(crate) fn note_peaks(&mut self) {
        let s = &mut self.stats;
        s.dirty_peak_pages = s.dirty_peak_pages.max(self.nr_dirty);
        s.writeback_peak_pages = s.writeback_peak_pages.max(self.nr_writeback);
        s.cached_peak_pages = s.cached_peak_pages.max(self.nr_cached);
    }

    pub fn stats(&self) -> Stats {
        let mut s = self.stats.clone();
        s.cached_pages = self.nr_cached;
        s.cached_runs = self.files.iter().map(|f| f.nr_runs() as u64).sum();
        s.dirty_pages = self.nr_dirty;
        s.writeback_pages = self.nr_writeback;
        s.thresh_pages = self.thresh.thresh;
        s.bg_thresh_pages = self.thresh.bg_thresh;
        s.works_coalesced = self.wbs.iter().map(|w| w.flusher.works_coalesced).sum();
        s.devices = self
            .devices
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let mut ds = d.stats.clone();
                ds.wbt_max_depth = d.wbt.rq_depth.max_depth;
                ds.wbt_max_depth_min = d.wbt.max_depth_min;
                ds.wbt_max_depth_max = d.wbt.max_depth_max;
                ds.wbt_scale_ups = d.wbt.scale_ups;
                ds.wbt_scale_downs = d.wbt.scale_downs;
                let wbs = self.wbs.iter().filter(|w| w.device.index() == i);
                for w in wbs {
                    ds.dirty_pages += w.dirty;
                    ds.writeback_pages += w.writeback;
                    ds.write_bw_pages_s += w.bw.avg_write_bw;
                }
                ds
            })
            .collect();
        s
    }

    /// The byte range as pages, or an error if it does not fit.
    pub(crate) fn page_range(offset: u64, len: u64) -> Result<(PageIndex, PageIndex), EngineError> {
        let end = offset
            .checked_add(len)
            .ok_or(EngineError::OutOfRange { offset, len })?;
        let last = end.div_ceil(PAGE_SIZE);
        if last > crate::page_cache::MAX_FILE_PAGES {
            return Err(EngineError::OutOfRange { offset, len });
        }
        Ok((offset / PAGE_SIZE, last))
    }
}
