//! The engine's state and its thin facade: registration (devices, domains,
//! tasks, files), a few queries, and the one channel out
//! ([`Engine::poll_action`]). Time comes in as an argument; nothing here
//! sleeps, reads a clock or does I/O.
//!
//! Each operation lives with the stage that carries it out:
//!
//! | call | file |
//! |---|---|
//! | `open`, `close` | here (handles: `handle.rs`) |
//! | `write` | `write_path/` |
//! | `read`, `note_cached_read`, `note_referenced_frames` | `read_path.rs` |
//! | `fsync`, `fsync_all`, `sync` | `sync/` |
//! | `durable_done` | `completion.rs` (the marks: `durability/`) |
//! | `file_unsynced` | `sync/` |
//! | `length_set` | `completion.rs` (the rule: `backing_len/`) |
//! | `set_len` | `truncate.rs` |
//! | `invalidate_range` | `truncate.rs` |
//! | `set_free_space`, `space_unknown` | `space/` |
//! | `set_max_files`, `live_files`, `release_file`, `file_idle`, `evict_file` | `evict/` |
//! | `resume` | here (tasks: `task/`) |
//! | `io_complete` | `completion.rs` |
//! | `poll_timeout`, `handle_timeout` | `timers/` |
//! | `set_knob`, `set_device_knob` | `knobs.rs` |
//! | `note_memory_sample`, `note_memory_given_back` | `memory_budget/` |
//! | `note_foreign_reads`, `set_stable_writes_required` | `knobs.rs` |
//! | `stats` | `stats/` |
//! | `check_invariants` | `invariants.rs` |
//!
//! The fields' types come from files that do not implement `Engine` (a
//! stage's state file, such as `task/state.rs`, never its `mod.rs`), so
//! no module imports itself through this one.
//!
//! Call order: a caller's operation (`write`, `read`, `fsync`, `sync`,
//! `set_len`) returns [`Step::Done`](crate::Step::Done) or [`Step::Sleep`](crate::Step::Sleep); after a sleep the
//! runtime calls `resume` for the task until it is done. After every call
//! the runtime drains `poll_action` and acts in order (pages unmapped,
//! frames to zero, the caller's bytes to copy in, I/O to submit, files to
//! flush, files let go, tasks to wake): nothing else leaves the engine. It
//! reports each submitted request with `io_complete` and each flush with
//! `durable_done`, calls `handle_timeout` at `poll_timeout` (None: no timer
//! armed), and passes monotonic time throughout.

use crate::action::{Action, StallReason, Step};
use crate::balance_dirty::task_dirty::MAX_DIRTIED_PAUSE;
use crate::config::{Config, DeviceConfig};
use crate::device::state::{read_depth_max, Device, MAX_DEVICES};
use crate::dirty_limits::{domain_dirty_limits, WbDomain};
use crate::dispatch::inflight::IoTable;
use crate::error::EngineError;
use crate::handle::{page_range, Handle, Handles};
use crate::ids::{DeviceId, DomainId, FileId, HandleId, PageIndex, TaskId, WbId, PAGE_SIZE};
use crate::page_cache::{CachedFile, PageCache};
use crate::proportions::FpropGlobal;
use crate::stats::counters::{DeviceStats, Stats};
use crate::sync::table::SyncTable;
use crate::task::{Op, Tasks};
use crate::time::Instant;
use crate::timers::state::Timers;
use crate::wb::state::{Wb, MAX_DOMAINS};
use crate::wbt::Wbt;
use std::collections::{BTreeMap, VecDeque};

/// Longest writeback domain name (a cgroup path fits).
pub const MAX_DOMAIN_NAME_BYTES: usize = 256;

pub struct Engine {
    pub(crate) config: Config,
    /// Files, frames, lists, budget and page counts (page_cache/).
    pub(crate) cache: PageCache,
    /// The memory pressure policy, once a runtime passes samples
    /// (memory_budget/, memory_pressure/).
    pub(crate) memory_pressure: Option<crate::memory_pressure::MemoryPressure>,
    /// The budget's counters and why it is what it is.
    pub(crate) memory_stats: crate::memory_budget::stats::MemoryBudgetStats,
    /// The global dirty limits and writeout shares (dirty_limits.rs).
    pub(crate) dom: WbDomain,
    pub(crate) handles: Handles,
    pub(crate) tasks: Tasks,
    pub(crate) devices: Vec<Device>,
    pub(crate) domains: Vec<String>,
    pub(crate) wbs: Vec<Wb>,
    pub(crate) wb_index: BTreeMap<(DeviceId, DomainId), WbId>,
    /// Requests handed to the runtime and not yet completed (dispatch/).
    pub(crate) io: IoTable,
    /// fsync and sync operations in progress (sync/).
    pub(crate) syncs: SyncTable,
    pub(crate) durability: crate::durability::state::Durability,
    /// Length changes of backing files in flight (backing_len/).
    pub(crate) resizes: crate::backing_len::resizes::Resizes,
    pub(crate) eviction: crate::evict::state::Eviction,
    pub(crate) actions: VecDeque<Action>,
    pub(crate) dirty_exceeded_2007: bool,
    /// The engine's clocks (timers/).
    pub(crate) timers: Timers,
    pub(crate) stats: Stats,
    /// Calls of `check_invariants` so far (some checks are sampled).
    pub(crate) invariant_checks: std::cell::Cell<u64>,
}

impl Engine {
    pub fn new(config: Config, now: Instant) -> Engine {
        let memory_pages = config.memory_bytes / PAGE_SIZE;
        let thresh = domain_dirty_limits(&config, memory_pages);
        let timers = Timers::new(&config, now);
        let mut engine = Engine {
            cache: PageCache::new(memory_pages, config.lru),
            config,
            memory_pressure: None,
            memory_stats: Default::default(),
            dom: WbDomain {
                thresh,
                dirty_limit: thresh.thresh,
                completions: FpropGlobal::default(),
            },
            handles: Handles::default(),
            tasks: Tasks::default(),
            devices: Vec::new(),
            domains: vec!["root".to_string()],
            wbs: Vec::new(),
            wb_index: BTreeMap::new(),
            io: IoTable::default(),
            syncs: SyncTable::default(),
            durability: Default::default(),
            resizes: Default::default(),
            eviction: Default::default(),
            actions: VecDeque::new(),
            dirty_exceeded_2007: false,
            timers,
            stats: Stats::default(),
            invariant_checks: std::cell::Cell::new(0),
        };
        engine.stats.memory_pages = memory_pages;
        engine
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// A device's knobs; None for an unknown device.
    pub fn device_config(&self, device: DeviceId) -> Option<&DeviceConfig> {
        self.devices.get(device.index()).map(|d| &d.config)
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
        let target = crate::device::state::wbt_target(&config, idle_read_latency_ns);
        let mut wbt = Wbt::new(crate::device::state::wbt_queue_depth(&config), target);
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
        self.devices.push(Device {
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
        });
        DeviceId((self.devices.len() - 1) as u32)
    }

    /// The writeback domain named `name`, added if new. Names are 1 to
    /// MAX_DOMAIN_NAME_BYTES printable characters (a cgroup path fits).
    pub fn domain(&mut self, name: &str) -> Result<DomainId, EngineError> {
        let bad = |reason| EngineError::BadDomainName {
            name: name.to_string(),
            reason,
        };
        if name.is_empty() {
            return Err(bad("it is empty"));
        }
        if name.len() > MAX_DOMAIN_NAME_BYTES {
            return Err(bad("it is longer than 256 bytes"));
        }
        if name.chars().any(|c| c.is_control()) {
            return Err(bad("it holds control characters"));
        }
        if let Some(i) = self.domains.iter().position(|d| d == name) {
            return Ok(DomainId(i as u32));
        }
        if self.domains.len() >= MAX_DOMAINS {
            return Err(EngineError::TooManyDomains { max: MAX_DOMAINS });
        }
        Ok(self.add_domain(name))
    }

    /// The name of a writeback domain, if it exists.
    pub fn domain_name(&self, domain: DomainId) -> Option<&str> {
        self.domains.get(domain.index()).map(String::as_str)
    }

    pub fn add_domain(&mut self, name: &str) -> DomainId {
        assert!(self.domains.len() < MAX_DOMAINS, "too many domains");
        self.domains.push(name.to_string());
        DomainId((self.domains.len() - 1) as u32)
    }

    pub fn add_task(&mut self) -> TaskId {
        self.tasks.add()
    }

    /// Continues the task's operation after a sleep, counting the sleep.
    pub fn resume(&mut self, now: Instant, task: TaskId) -> Result<Step, EngineError> {
        self.tasks.task_mut(task)?;
        if let Some((reason, since)) = self.tasks.resumed(task) {
            let waited = now.since_ns(since);
            self.stats.stalls[reason.index()].record(waited);
            if let Some(file) = self.op_file(task) {
                let f = &self.cache.files[file.index()];
                self.wbs[f.wb.index()].stalls[reason.index()].record(waited);
                if reason == StallReason::DirtyThrottle {
                    self.devices[f.device.index()].stats.throttle.record(waited);
                }
            }
        }
        match self.tasks[task.index()].op.clone() {
            Op::Idle => Err(EngineError::NothingToResume(task)),
            Op::Write { .. } => self.continue_write(now, task),
            Op::Read { .. } => self.continue_read(now, task),
            Op::Sync { op } => self.continue_sync(now, task, op),
            Op::Truncate { .. } => self.continue_truncate(now, task),
            Op::Invalidate { .. } => self.continue_invalidate(now, task),
            Op::Unlink { .. } => self.continue_unlink(now, task),
            Op::DirectWrite { .. } => self.continue_direct(now, task),
        }
    }

    /// The file the task's operation is on, if it is on one file.
    fn op_file(&self, task: TaskId) -> Option<FileId> {
        let handle = match self.tasks[task.index()].op {
            Op::Write { handle, .. } | Op::Read { handle, .. } | Op::DirectWrite { handle, .. } => {
                handle
            }
            _ => return None,
        };
        self.handle(handle).ok().map(|h| h.file)
    }

    /// The writeback context of (`device`, `domain`), made if new.
    fn wb_for(&mut self, device: DeviceId, domain: DomainId, now: Instant) -> WbId {
        if let Some(&wb) = self.wb_index.get(&(device, domain)) {
            return wb;
        }
        let id = WbId(self.wbs.len() as u32);
        self.wbs.push(Wb::new(device, domain, now));
        self.cache.add_wb(id);
        self.wb_index.insert((device, domain), id);
        self.devices[device.index()].wbs.push(id);
        id
    }

    /// Makes a file known to the cache: `size` bytes already on the device.
    /// An unknown device or domain is an error.
    pub fn add_file(
        &mut self,
        now: Instant,
        device: DeviceId,
        domain: DomainId,
        size: u64,
    ) -> Result<FileId, EngineError> {
        if device.index() >= self.devices.len() {
            return Err(EngineError::BadDevice(device));
        }
        if domain.index() >= self.domains.len() {
            return Err(EngineError::BadDomain(domain));
        }
        let wb = self.wb_for(device, domain, now);
        let record = CachedFile::new(device, wb, size);
        let file = match self.reusable_file_id() {
            Some(id) => {
                self.cache.files[id.index()] = record;
                id
            }
            None => {
                self.cache.files.push(record);
                FileId((self.cache.files.len() - 1) as u32)
            }
        };
        self.eviction.live += 1;
        self.touch_file(file);
        self.make_room_for_files(now, file);
        Ok(file)
    }

    /// Opens a handle on a file; it will see write-back errors from now on.
    /// An unknown or evicted file (its id is retired) is an error.
    pub fn open(&mut self, file: FileId) -> Result<HandleId, EngineError> {
        let f = self
            .cache
            .files
            .get_mut(file.index())
            .filter(|f| !f.evicted && !f.unlinked)
            .ok_or(EngineError::BadFile(file))?;
        f.open_handles += 1;
        let handle = self.handles.open(file, f.err_seq);
        self.touch_file(file);
        Ok(handle)
    }

    pub fn close(&mut self, handle: HandleId) -> Result<(), EngineError> {
        let file = self.handles.close(handle)?;
        let f = &mut self.cache.files[file.index()];
        assert!(f.open_handles > 0);
        f.open_handles -= 1;
        self.touch_file(file);
        Ok(())
    }

    pub(crate) fn handle(&self, handle: HandleId) -> Result<&Handle, EngineError> {
        self.handles.get(handle)
    }

    /// The file behind `handle`, for an operation on bytes
    /// `offset..offset + len` (which must fit a file); the file counts as
    /// used now (evict/).
    pub(crate) fn file_in_use(
        &mut self,
        handle: HandleId,
        offset: u64,
        len: u64,
    ) -> Result<FileId, EngineError> {
        let file = self.handle(handle)?.file;
        page_range(offset, len)?;
        self.touch_file(file);
        Ok(file)
    }

    /// Handles open on a file; None for an unknown or evicted file.
    pub fn file_open_handles(&self, file: FileId) -> Option<u32> {
        self.cache
            .files
            .get(file.index())
            .filter(|f| !f.evicted)
            .map(|f| f.open_handles)
    }

    /// A file's size in bytes, including extensions not yet written back;
    /// None for an unknown file.
    pub fn file_size(&self, file: FileId) -> Option<u64> {
        self.cache.files.get(file.index()).map(|f| f.size)
    }

    /// Whether actions wait to be carried out (`poll_action` would return
    /// one).
    pub fn has_actions(&self) -> bool {
        !self.actions.is_empty()
    }

    pub fn poll_action(&mut self) -> Option<Action> {
        let action = self.actions.pop_front();
        if action.is_none() && !self.eviction.retiring.is_empty() {
            // Every Evict queued so far was taken: those ids may be reused.
            let retired = std::mem::take(&mut self.eviction.retiring);
            self.eviction.free.extend(retired);
        }
        action
    }

    /// Pages dirty or under writeback, globally.
    pub fn dirty_and_writeback_pages(&self) -> u64 {
        self.cache.nr_dirty + self.cache.nr_writeback
    }

    /// The hard dirty limit in pages (max of thresh and the decaying dirty_limit).
    pub fn hard_limit_pages(&self) -> u64 {
        self.dom.thresh.thresh.max(self.dom.dirty_limit)
    }

    /// How far the dirty count may exceed the hard limit: each task may
    /// dirty up to its check interval (capped) plus one page before it
    /// looks at the limit again.
    pub fn dirty_slack_pages(&self) -> u64 {
        self.tasks.len() as u64 * (MAX_DIRTIED_PAUSE + 1)
    }

    /// The frame holding a cached page's data.
    pub fn page_frame(&self, file: FileId, page: PageIndex) -> Option<u32> {
        self.cache.files.get(file.index())?.frame(page)
    }

    /// Pages on the active list (PG_ACTIVE, in any state).
    pub fn nr_active(&self) -> u64 {
        self.cache.nr_active
    }

    pub fn cached_pages(&self) -> u64 {
        self.cache.nr_cached
    }

    /// Whether a task has no operation in progress (false for an unknown
    /// task).
    pub fn task_is_idle(&self, task: TaskId) -> bool {
        self.tasks
            .get(task.index())
            .is_some_and(|t| t.op == Op::Idle)
    }

    /// A file's cached pages, and how many of them are active (page_cache/lru.rs);
    /// None for an unknown file.
    pub fn file_cached_pages(&self, file: FileId) -> Option<(u64, u64)> {
        let counts = self.cache.files.get(file.index())?.counts();
        Some((counts.cached, counts.active))
    }

    /// The cache budget now (the `memory` knob).
    pub fn memory_pages(&self) -> u64 {
        self.cache.memory_pages
    }

    /// The frames the runtime provides: the budget the cache started with,
    /// the most the `memory` knob can be raised to.
    pub fn frame_pages(&self) -> u64 {
        self.cache.frame_pages
    }

    /// One past the highest frame in use: no frame from there on is in
    /// use, and first fit takes new frames from the lowest free ones, so
    /// a growing cache uses the frames from here up next. A runtime may
    /// prepare their memory ahead (runtime/populate.rs in the library).
    pub fn frames_used_end(&self) -> u64 {
        self.cache.frames.used_end() as u64
    }

    /// Free frames below frame `end`, highest first, `max` in all at most:
    /// the engine neither reads nor writes a free frame, so a runtime whose
    /// budget was lowered may give their memory back to the system (they
    /// come back zeroed when next used; the engine fills a frame before
    /// any reader sees it).
    pub fn free_frames_below(&self, end: u32, max: u64) -> Vec<(u32, u64)> {
        self.cache.frames.free_below(end, max)
    }

    /// Frames freed since the engine started, counted: unchanged since a
    /// runtime last gave free frames' memory back, there is nothing new
    /// to give back.
    pub fn frames_freed_total(&self) -> u64 {
        self.cache.frames.freed_total()
    }
}
