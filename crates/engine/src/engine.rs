//! The engine's state and its thin facade: registration (devices, domains,
//! tasks, files), handles, room for pages (`reserve`, `trim_to_budget`),
//! and the one channel out ([`Engine::poll_action`]). Time comes in as an argument; nothing here
//! sleeps, reads a clock or does I/O.
//!
//! Each operation lives with the stage that carries it out:
//!
//! | call | file |
//! |---|---|
//! | `open`, `close` | here (handles: `handle.rs`) |
//! | `write` | `write_path/` |
//! | `write_direct` | `dispatch/` (the requests and phases: `direct/`) |
//! | `read`, `note_cached_read`, `note_referenced_frames` | `read_path.rs` |
//! | `fsync`, `fsync_all`, `sync` | `sync/` |
//! | `durable_done` | `completion.rs` (the marks: `durability/`) |
//! | `file_unsynced` | `sync/` |
//! | `length_set` | `completion.rs` (the rule: `backing_len/`) |
//! | `set_len`, `invalidate_range` | `backlog/` (the pages: `page_cache/truncate.rs`) |
//! | `set_free_space`, `space_unknown` | `completion.rs` (the rule: `space/`) |
//! | `set_max_files`, `live_files`, `release_file`, `file_idle`, `evict_file` | here (the rules: `evict/`) |
//! | `resume` | here (tasks: `task/`) |
//! | `io_complete` | `completion.rs` |
//! | `poll_timeout`, `handle_timeout` | `completion.rs` (the clocks: `timers/`) |
//! | `set_knob`, `set_device_knob` | `control.rs` |
//! | `note_memory_sample`, `note_memory_given_back` | `completion.rs` (the budget: `memory_budget/`) |
//! | `note_foreign_reads`, `set_stable_writes_required` | `control.rs` |
//! | `stats`, `gauges`, `check_invariants`, the queries | `control.rs` |
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

use crate::action::{Action, StallReason, Step, WbReason};
use crate::config::{Config, DeviceConfig};
use crate::device::state::{Device, MAX_DEVICES};
use crate::dirty_limits::{domain_dirty_limits, WbDomain};
use crate::dispatch::inflight::IoTable;
use crate::durability::state::FlushFor;
use crate::error::EngineError;
use crate::evict::closed_files_work;
use crate::handle::{page_range, Handle, Handles};
use crate::ids::{DeviceId, DomainId, FileId, HandleId, TaskId, WbId, PAGE_SIZE};
use crate::page_cache::{CachedFile, PageCache, MAX_FILE_PAGES};
use crate::proportions::FpropGlobal;
use crate::stats::counters::Stats;
use crate::sync::table::SyncTable;
use crate::task::{Op, Tasks, WriteOp};
use crate::time::Instant;
use crate::timers::Timers;
use crate::wb::state::{Wb, MAX_DOMAINS};
use std::collections::{BTreeMap, VecDeque};

/// Longest writeback domain name (a cgroup path fits).
pub const MAX_DOMAIN_NAME_BYTES: usize = 256;

pub struct Engine {
    pub(crate) config: Config,
    /// Files, frames, lists, budget and page counts (page_cache/).
    pub(crate) cache: PageCache,
    /// The budget's pressure policy and figures (memory_budget/).
    pub(crate) memory: crate::memory_budget::MemoryBudget,
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
    pub(crate) eviction: crate::evict::Eviction,
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
            memory: Default::default(),
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
        self.devices
            .push(Device::new(name, config, idle_read_latency_ns));
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
            Op::Write(_) => self.continue_write(now, task),
            Op::Read { .. } => self.continue_read(now, task),
            Op::Sync { op } => self.continue_sync(now, task, op),
            Op::Truncate { .. } => self.continue_truncate(now, task),
            Op::Invalidate { .. } => self.continue_invalidate(now, task),
            Op::Unlink { .. } => self.continue_unlink(now, task),
            Op::DirectWrite { .. } => self.continue_direct(now, task),
        }
    }

    /// The file a task's wait is for, for a runtime's reports of it: the
    /// file of its read or write, of its fsync (a handle's; None for a
    /// cache-wide sync), truncation, invalidation or unlink.
    pub fn stall_file(&self, task: TaskId) -> Option<FileId> {
        let op = &self.tasks.get(task.index())?.op;
        match *op {
            Op::Sync { op } => {
                let handle = self.syncs.ops.get(&op)?.handle?;
                self.handle(handle).ok().map(|h| h.file)
            }
            Op::Truncate { file, .. } | Op::Invalidate { file, .. } | Op::Unlink { file, .. } => {
                Some(file)
            }
            _ => self.op_file(task),
        }
    }

    /// The file the task's operation is on, if it is on one file.
    fn op_file(&self, task: TaskId) -> Option<FileId> {
        let handle = match self.tasks[task.index()].op {
            Op::Write(WriteOp { handle, .. })
            | Op::Read { handle, .. }
            | Op::DirectWrite { handle, .. } => handle,
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

    /// Whether `file` could be evicted now (see `evict_file`).
    pub fn file_idle(&self, file: FileId) -> bool {
        self.cache.files.get(file.index()).is_some_and(|f| f.idle())
    }

    /// Sets the most files the engine keeps at once (None: no limit).
    pub fn set_max_files(&mut self, max_files: Option<usize>) {
        self.eviction.set_max_files(max_files);
    }

    /// Files known and not evicted.
    pub fn live_files(&self) -> usize {
        self.eviction.live
    }

    /// Notes a use of `file` (evict/).
    pub(crate) fn touch_file(&mut self, file: FileId) {
        self.touch_file_times(file, 1);
    }

    /// `uses` uses of `file` one after another (as many `touch_file`).
    pub(crate) fn touch_file_times(&mut self, file: FileId, uses: u64) {
        self.eviction
            .touch(&mut self.cache.files[file.index()], uses);
    }

    /// `added` was added: over the limit, idle files go and the oldest
    /// dirty files nobody has open are written back (evict/).
    fn make_room_for_files(&mut self, now: Instant, added: FileId) {
        let scan = self.eviction.scan(&self.cache.files, added);
        if scan.write_back > 0 {
            for w in 0..self.wbs.len() {
                let dirty = &self.wbs[w].dirty_files;
                let Some(work) = closed_files_work(dirty, &self.cache.files, scan.write_back)
                else {
                    continue;
                };
                self.wbs[w].flusher.queue(work);
                self.pump(now, self.wbs[w].device);
            }
        }
        for file in scan.idle {
            self.let_go(file);
        }
    }

    /// Lets `file` go as soon as it is idle and its writes are durable.
    /// Returns false if it is busy (nothing happens) or unknown.
    pub fn release_file(&mut self, file: FileId) -> bool {
        if !self
            .cache
            .files
            .get(file.index())
            .is_some_and(|f| f.evictable())
        {
            return false;
        }
        self.let_go(file);
        true
    }

    /// Flushes an idle file if it is unsynced, else evicts it now.
    fn let_go(&mut self, file: FileId) {
        if self.cache.files[file.index()].unsynced.is_some() {
            if self.eviction.flushing.insert(file) {
                self.request_flush(file, FlushFor::Eviction, false);
            }
            return;
        }
        let evicted = self.evict_file(file);
        debug_assert!(evicted.is_ok(), "{evicted:?}");
    }

    /// A flush asked for by eviction was reported.
    pub(crate) fn eviction_flushed(&mut self, file: FileId) {
        self.eviction.flushing.remove(&file);
        let f = &self.cache.files[file.index()];
        if f.evictable() && f.unsynced.is_none() {
            let evicted = self.evict_file(file);
            debug_assert!(evicted.is_ok(), "{evicted:?}");
        }
    }

    /// Drops an idle file's cached pages and retires its id: it may not be
    /// opened again (a runtime adds the file anew if it is needed later),
    /// and the runtime gets `Action::Evict`. Busy files are an error and
    /// are left as they are. The file's unsynced changes, if any, are the
    /// caller's business (`release_file` flushes first).
    pub fn evict_file(&mut self, file: FileId) -> Result<(), EngineError> {
        let Some(f) = self.cache.files.get(file.index()).filter(|f| !f.evicted) else {
            return Err(EngineError::BadFile(file));
        };
        if !f.idle() || f.unlinked {
            return Err(EngineError::FileBusy(file));
        }
        self.retire_file(file);
        Ok(())
    }

    /// Drops an idle file's pages and retires its id (see `evict_file`).
    pub(crate) fn retire_file(&mut self, file: FileId) {
        debug_assert!(self.cache.files[file.index()].idle());
        self.cache
            .remove_pages(file, 0, MAX_FILE_PAGES, &mut self.actions);
        let f = &mut self.cache.files[file.index()];
        f.evicted = true;
        f.size = 0;
        f.read_error = None;
        self.eviction.retired(file);
        self.actions.push_back(Action::Evict { file });
    }

    /// An evicted file's id that a new file may take, if any: none named
    /// by a sync in progress.
    fn reusable_file_id(&mut self) -> Option<FileId> {
        let syncs = &self.syncs;
        let id = self.eviction.take_free(|id| syncs.names(id))?;
        debug_assert!(self.cache.files[id.index()].evicted);
        self.cache.forget_file(id);
        Some(id)
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
        if action.is_none() {
            // Every Evict queued so far was taken: those ids may be reused.
            self.eviction.actions_taken();
        }
        action
    }

    // Memory: room for pages (the cache's hand; the flusher for dirty ones).

    /// Ensures room for `pages` more cached pages. On failure, has the
    /// dirty pages written (Linux's wakeup_flusher_threads(WB_REASON_VMSCAN));
    /// the caller must wait (reason Memory).
    pub(crate) fn reserve(&mut self, now: Instant, pages: u64) -> bool {
        if self.cache.make_room(pages, &mut self.actions) {
            return true;
        }
        for w in 0..self.wbs.len() {
            if self.cache.wb_pages[w].dirty > 0 {
                self.wbs[w].flusher.start_all(WbReason::Vmscan);
                let device = self.wbs[w].device;
                self.pump(now, device);
            }
        }
        false
    }

    /// Brings the cache within a lowered budget: frees clean pages now,
    /// and while that is not enough has the dirty ones written back
    /// (reason vmscan, as `reserve` does) and frees them as they come
    /// clean (`io_complete`, `handle_timeout`). Returns whether the cache
    /// is still over its budget.
    pub(crate) fn trim_to_budget(&mut self) -> bool {
        if !self.cache.trim(&mut self.actions) {
            return false;
        }
        let pages = &self.cache.wb_pages;
        for (wb, _) in self.wbs.iter_mut().zip(pages).filter(|(_, p)| p.dirty > 0) {
            wb.flusher.start_all(WbReason::Vmscan);
        }
        true
    }
}
