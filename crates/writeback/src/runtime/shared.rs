//! What callers and the runtime's threads (threads.rs) share, and the
//! loop that runs one engine operation for a caller.

use super::clock::Clock;
use super::core::{CopyIn, Core, WriteData};
use super::executor::{Out, Release};
use crate::error::{from_engine, Error};
use crate::io::IoBackend;
use crate::Writeout;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::sync::{Condvar, Mutex, MutexGuard, RwLock};
use std::time::Duration;
use wb_engine::{
    Engine, EngineError, FileId, Instant, PageIndex as Page, StallReason, Step, TaskId,
};

/// The timer thread looks at the engine at least this often.
pub(crate) const TIMER_TICK: Duration = Duration::from_millis(5);
/// How often the timer thread gives memory above a lowered budget back,
/// a batch at a time (`Core::give_back_memory`): 1 GiB a second at most.
/// A cache following memory pressure gives it back at once instead, from
/// its own thread (memory_follow.rs).
pub(super) const RELEASE_EVERY: Duration = Duration::from_millis(250);

static NEXT_CACHE_ID: AtomicUsize = AtomicUsize::new(1);

/// Cached reads served from the page map that a thread notes before
/// telling the engine in one go (see `note_hit`).
const HITS_BATCH: usize = 32;

thread_local! {
    /// This thread's engine task in each cache it used: (cache id, task).
    static TASKS: RefCell<Vec<(usize, TaskId)>> = const { RefCell::new(Vec::new()) };
    /// This thread's cached reads not yet told to the engine.
    static HITS: RefCell<Hits> = const {
        RefCell::new(Hits { cache: 0, reads: 0, frames: Vec::new(), last: None, last_frames: 0 })
    };
}

/// Cached reads of one cache: the frames read, and the last read's pages
/// (file, first, end) for readahead.
struct Hits {
    cache: usize,
    reads: usize,
    frames: Vec<u32>,
    last: Option<(FileId, Page, Page)>,
    /// How many of `frames` are the last read's (reported by range, not
    /// by frame, so it counts once).
    last_frames: usize,
}

pub(crate) struct Shared {
    pub id: usize,
    pub core: Mutex<Core>,
    /// The cache's memory; see `frames.rs` for the lock order.
    pub frames: std::sync::Arc<super::frames::Frames>,
    /// Cached pages, for reads and overwrites without the engine's lock
    /// (`wb_engine::page_map`).
    pub page_map: Arc<wb_engine::PageMap>,
    /// Set when the cache closes; read without the engine's lock.
    pub closed: AtomicBool,
    /// Frames below this are backed with memory, by use or by the
    /// populating thread (populate.rs), which keeps it.
    pub populated_pages: AtomicU64,
    /// The engine's knobs for this runtime's work, readable without the
    /// lock (tuning.rs).
    pub tuning: super::tuning::Tuning,
    /// Writes carried out on a sleeping caller's own thread: its commit's
    /// (`IoRequest::commit`), for `Cache::writes_on_caller`.
    pub writes_on_caller: AtomicU64,
    /// Signalled when the timer thread should look again: an earlier
    /// timeout (`Deferred::KickTimer`), or the cache closing. A sleeping task
    /// is unparked alone (`Core::sleepers`): one wake-up per task woken,
    /// not one per sleeping thread.
    pub timer_cv: Condvar,
    pub backend: RwLock<Option<Box<dyn IoBackend>>>,
    pub backend_name: &'static str,
    pub clock: Clock,
    /// Release steps of unlinked files go to the release thread
    /// (`release_loop`), so that no caller does a backlog's work; None
    /// once the cache closes (steps are then carried out where they come).
    pub(super) release_tx: Mutex<Option<Sender<Release>>>,
    pub(super) release_rx: Mutex<Option<Receiver<Release>>>,
    /// Backing files' length changes, one at a time per file.
    pub lengths: super::length_lock::LengthLocks,
}

impl Shared {
    pub fn new(
        engine: Engine,
        backend: Box<dyn IoBackend>,
        writeout: Writeout,
    ) -> std::io::Result<Shared> {
        let backend_name = backend.name();
        let frames = Arc::new(super::frames::Frames::new(engine.frame_pages())?);
        let (release_tx, release_rx) = std::sync::mpsc::channel();
        let page_map = Arc::new(wb_engine::PageMap::new(engine.frame_pages()));
        let tuning = super::tuning::Tuning::new(engine.config());
        Ok(Shared {
            id: NEXT_CACHE_ID.fetch_add(1, Ordering::Relaxed),
            core: Mutex::new(Core::new(
                engine,
                Arc::clone(&frames),
                Arc::clone(&page_map),
                writeout,
            )),
            frames,
            page_map,
            closed: AtomicBool::new(false),
            populated_pages: AtomicU64::new(0),
            tuning,
            writes_on_caller: AtomicU64::new(0),
            timer_cv: Condvar::new(),
            backend: RwLock::new(Some(backend)),
            backend_name,
            clock: Clock::new(),
            release_tx: Mutex::new(Some(release_tx)),
            release_rx: Mutex::new(Some(release_rx)),
            lengths: super::length_lock::LengthLocks::new(),
        })
    }

    pub fn lock(&self) -> MutexGuard<'_, Core> {
        // A panic while holding the lock leaves the engine in an unknown
        // state; carrying on would risk data, so propagate it.
        self.core
            .lock()
            .unwrap_or_else(|poisoned| panic!("cache state poisoned: {poisoned}"))
    }

    /// The task of the caller this thread acts for (caller.rs), if it is
    /// idle; else this thread's task in this cache, created on first use.
    pub fn task(&self, core: &mut Core) -> TaskId {
        if let Some(caller) = super::caller::current() {
            if let Some((task, new)) = core.callers.task(&mut core.engine, caller) {
                if new {
                    core.add_task_slots();
                }
                return task;
            }
        }
        TASKS.with(|tasks| {
            let mut tasks = tasks.borrow_mut();
            if let Some(&(_, t)) = tasks.iter().find(|(id, _)| *id == self.id) {
                return t;
            }
            let t = core.add_task();
            tasks.push((self.id, t));
            t
        })
    }

    /// Notes a cached read served from the page map; every HITS_BATCH
    /// reads the thread tells the engine (pages referenced for reclaim, the
    /// readahead position), as Linux batches folio references per CPU.
    /// Notes of another cache the thread used before are dropped: they are
    /// hints, and a late one is worth less than a bound on the batch.
    pub fn note_hit(&self, file: FileId, first: Page, end: Page, frames: &[u32]) {
        let full = HITS.with(|hits| {
            let mut hits = hits.borrow_mut();
            if hits.cache != self.id {
                hits.cache = self.id;
                hits.reads = 0;
                hits.frames.clear();
            }
            hits.reads += 1;
            hits.frames.extend_from_slice(frames);
            hits.last = Some((file, first, end));
            hits.last_frames = frames.len();
            hits.reads >= HITS_BATCH
        });
        if full {
            let mut core = self.lock();
            self.flush_hits(&mut core);
        }
    }

    /// Tells the engine this thread's noted cached reads.
    fn flush_hits(&self, core: &mut Core) {
        let task = self.task(core);
        HITS.with(|hits| {
            let mut hits = hits.borrow_mut();
            if hits.cache != self.id {
                return;
            }
            hits.reads = 0;
            let others = hits.frames.len() - hits.last_frames.min(hits.frames.len());
            core.engine.note_referenced_frames(&hits.frames[..others]);
            hits.frames.clear();
            hits.last_frames = 0;
            if let Some((file, first, end)) = hits.last.take() {
                // A file unknown to the engine cannot be: ids are never reused.
                let noted = core.engine.note_cached_read(task, file, first, end);
                debug_assert!(noted.is_ok(), "{noted:?}");
            }
        });
    }

    /// Carries out `out` for a caller about to sleep (for `reason`): when
    /// it is a single read (what the caller waits for: a read miss without
    /// readahead), or an fsync's few small writes (its commit), the caller
    /// does them itself and reports the completions, instead of handing
    /// them to the backend's thread and being woken by the completion
    /// thread (IoBackend::read_on_caller, writes_on_caller).
    fn carry_out_while_waiting(&self, task: TaskId, reason: StallReason, mut out: Out) {
        let read = out.only_op_is_read();
        // The engine says which writes are a commit's (sync/).
        let commit = reason == StallReason::Sync && out.only_commit_ops();
        if !read && !commit {
            return self.carry_out(out);
        }
        let ops = out.take_ops();
        let (done, others) = {
            let backend = self.backend.read().unwrap_or_else(|p| p.into_inner());
            match backend.as_ref() {
                Some(backend) if commit => backend.writes_on_caller(ops),
                Some(backend) => {
                    match ops.into_iter().next().map(|op| backend.read_on_caller(op)) {
                        Some(Ok(done)) => (vec![done], Vec::new()),
                        Some(Err(op)) => (Vec::new(), vec![op]),
                        None => (Vec::new(), Vec::new()),
                    }
                }
                None => (Vec::new(), ops),
            }
        };
        if commit {
            self.writes_on_caller
                .fetch_add(done.len() as u64, Ordering::Relaxed);
        }
        // Those the caller did not do go first, as they would have.
        out.put_back_ops(others, commit);
        self.carry_out(out);
        if done.is_empty() {
            return;
        }
        let mut more = self.tell(|core, now| {
            for d in done {
                core.complete(d, now);
            }
        });
        // The caller is awake (its flag is set, `wait` looks at it
        // first): only others need unparking.
        more.skip_wake(task);
        self.carry_out(more);
    }

    /// Runs one engine operation for the calling thread to its end.
    /// `start` begins it; `write` is the caller's data for a write (the
    /// engine asks for it to be copied in, `Action::CopyIn`); `progress`
    /// runs under the lock after the actions of every engine call, told
    /// whether the operation is done (the read path copies out when done).
    pub fn run_op(
        &self,
        start: impl FnOnce(&mut Engine, Instant, TaskId) -> Result<Step, EngineError>,
        write: Option<WriteData<'_>>,
        mut progress: impl FnMut(&mut Core, TaskId, bool),
    ) -> Result<(), Error> {
        let mut core = self.lock();
        if core.closed {
            return Err(Error::Closed);
        }
        let task = self.task(&mut core);
        // The engine hears of this thread's cached reads before its next
        // operation (readahead follows the reader).
        self.flush_hits(&mut core);
        core.woken[task.index()] = false;
        let now = self.clock.now();
        let mut step = start(&mut core.engine, now, task);
        loop {
            let mut out = core.drain(write);
            if !out.copies.is_empty() {
                let copies = std::mem::take(&mut out.copies);
                core = self.copy_unlocked(core, task, write, &copies);
                let more = core.drain(write);
                debug_assert!(more.copies.is_empty(), "write_end asks for no copy");
                out.append(more);
            }
            progress(&mut core, task, matches!(step, Ok(Step::Done)));
            let stall = match step {
                Ok(Step::Sleep(stall)) => stall,
                Ok(Step::Done) => {
                    drop(core);
                    self.carry_out(out);
                    return Ok(());
                }
                Err(e) => {
                    drop(core);
                    self.carry_out(out);
                    return Err(from_engine(e));
                }
            };
            if let Some(trace) = core.trace.as_mut() {
                let planned_ns = stall.until.since_ns(self.clock.now());
                trace.slept(task.index(), &stall, planned_ns, || track_name(task));
            }
            // The file only names a tracing span; the metrics do not need it.
            #[cfg(feature = "tracing")]
            let file = core.engine.stall_file(task);
            #[cfg(all(feature = "metrics", not(feature = "tracing")))]
            let file = None;
            drop(core);
            #[cfg(any(feature = "metrics", feature = "tracing"))]
            let waiting = crate::telemetry::Wait::begin(stall.reason, file);
            self.carry_out_while_waiting(task, stall.reason, out);
            core = self.wait(task, self.clock.at(stall.until), stall.wakeable);
            #[cfg(any(feature = "metrics", feature = "tracing"))]
            waiting.end();
            if let Some(trace) = core.trace.as_mut() {
                trace.woke(task.index());
            }
            core.woken[task.index()] = false;
            step = core.engine.resume(self.clock.now(), task);
        }
    }

    /// `file`'s last name is gone: hand its release to the engine's
    /// backlog now if no handle is open, else when the last one closes.
    pub fn unlink_when_closed(&self, file: FileId) -> Result<(), Error> {
        {
            let mut core = self.lock();
            if core.engine.file_open_handles(file).unwrap_or(0) > 0 {
                core.unlink_on_close.insert(file);
                return Ok(());
            }
        }
        self.unlink_now(file)
    }

    /// Hands `file`'s release to the engine's backlog. From now on its
    /// inode number is not its own: once the backlog closes the last
    /// descriptor, a new file may get it.
    fn unlink_now(&self, file: FileId) -> Result<(), Error> {
        self.run_op(
            |e, now, task| e.unlink(now, task, file),
            None,
            |core, _, _| core.forget_inode(file),
        )
    }

    /// Closes `handle` of `file`; the file's release follows if its name
    /// went while it was open and this was its last handle.
    pub fn close(&self, file: FileId, handle: wb_engine::HandleId) {
        let mut core = self.lock();
        let _ = core.engine.close(handle);
        let last = core.engine.file_open_handles(file) == Some(0);
        if !(last && core.unlink_on_close.remove(&file)) {
            return;
        }
        drop(core);
        // Like Linux's last iput of an unlinked inode: the backlog may
        // hold the closing thread back, boundedly.
        let _ = self.unlink_now(file);
    }

    /// Carries out a deferred write's copies without the lock: copies the
    /// caller's bytes into the frames the engine locked for them, then
    /// retakes the lock and tells the engine (`write_end`), before the
    /// caller's operation goes on, carries out what its engine calls left
    /// (flushes among them) or waits: pages stay locked for one copy.
    fn copy_unlocked<'a>(
        &'a self,
        core: MutexGuard<'a, Core>,
        task: TaskId,
        write: Option<WriteData<'_>>,
        copies: &[CopyIn],
    ) -> MutexGuard<'a, Core> {
        drop(core);
        let w = write.expect("copies come from the writer's own calls");
        for &c in copies {
            w.copy_in(&self.frames, &self.page_map, c);
        }
        let mut core = self.lock();
        // The task is this thread's own, known to the engine.
        let ended = core.engine.write_end(self.clock.now(), task);
        debug_assert!(ended.is_ok(), "{ended:?}");
        let mut files: Vec<FileId> = copies.iter().map(|c| c.file).collect();
        files.dedup();
        for file in files {
            // After the data it covers is in the frames.
            core.publish_size(file);
        }
        core
    }

    /// Sleeps until `deadline`, or until woken if `wakeable`. Bounded by
    /// the deadline the engine set.
    fn wait(
        &self,
        task: TaskId,
        deadline: std::time::Instant,
        wakeable: bool,
    ) -> MutexGuard<'_, Core> {
        let mut core = self.lock();
        loop {
            let now = std::time::Instant::now();
            if now >= deadline || (wakeable && core.woken[task.index()]) {
                core.sleepers[task.index()] = None;
                return core;
            }
            // Whoever wakes the task sees this under the lock and unparks
            // us once it is released; an unpark before the park below
            // makes the park return at once (its token).
            core.sleepers[task.index()] = Some(std::thread::current());
            drop(core);
            std::thread::park_timeout(deadline - now);
            core = self.lock();
        }
    }
}

/// The name of `task`'s track in a trace: the process it acts for (the
/// mount's callers), else the thread's name, else the task's number.
fn track_name(task: TaskId) -> String {
    if let Some(pid) = super::caller::current() {
        return format!("pid {pid}");
    }
    match std::thread::current().name() {
        Some(name) => format!("{name} (task {})", task.index()),
        None => format!("task {}", task.index()),
    }
}
