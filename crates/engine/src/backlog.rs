//! The backlog: deferred work with watermarks (Chinner 2021), per device.
//!
//! Releasing a file whose last name is gone is work: its cached and dirty
//! pages are dropped, writes in flight waited for, and on the backing
//! filesystem its blocks freed (ext4 frees extents synchronously: a large
//! fragmented file can take seconds). `Engine::unlink` returns once the
//! item is queued; a worker per device takes the items one at a time, in
//! order. A file's first step, `Start`, asks nothing of the backing file:
//! when the runtime reports it (from wherever it carries out release
//! steps, not from the unlinking caller), the engine drops the file's
//! pages, waiting for its I/O if need be. Then the worker asks the runtime
//! for one step at a time of the backing file's release
//! (`Action::Release`): a cut of at most
//! `RELEASE_STEP_BYTES` while more is left, else the removal, after which
//! the file id is retired. A file with more to cut after its first step
//! is parked: the worker takes parked files' steps (one at a time, in
//! turn) only while the backlog is under its low watermark or has
//! nothing else, so the files behind a large one keep flowing, no step
//! takes long, and a waiting producer never waits for a parked file.
//!
//! A large truncation (`Engine::set_len` freeing more than one step) is
//! an item too, a cut: the backing file cut in steps down to the new
//! length, with no `Start` (the truncation dropped the pages) and no
//! retirement. Until it is done the backing file holds the old data past
//! the new end, so a write or truncation that would extend the file waits
//! for it (stall `backlog`), and a cut someone waits for goes first among
//! the parked files. Unlinking a file whose cut is queued folds what the
//! cut had left into the removal.
//!
//! Each item carries the estimated cost of its next step,
//! `MiB freed x est_mib_ns` (fractions of a MiB too), plus `est_file_ns` for a removal, learned
//! from the steps' measured durations (EWMA, weight 1/8). The backlog's
//! level is the sum of its items' estimates (the one in progress
//! included). With `backlog_throttle = watermarks`:
//!
//! - low = `backlog_wait_ms` of work, high = twice that: high − low is
//!   what the worker does in `backlog_wait_ms`, i.e. the measured item
//!   rate times `backlog_wait_ms` items;
//! - a producer that finds the level at or over high, or the throttle bit
//!   set, sets the bit and sleeps (stall `backlog`) until the worker has
//!   brought the level under low, which clears the bit and wakes every
//!   producer. So a producer waits about `backlog_wait_ms`, plus a
//!   documented margin of two steps (the item that took the level over
//!   high, and the step in progress when it falls under low: each frees
//!   at most `RELEASE_STEP_BYTES`), plus the error of the estimates;
//! - the level never exceeds high plus one step per producer (each checks
//!   before it adds). Parked files are not in the level: each holds the
//!   rest of a large file, one entry, freed when the backlog has room.
//!
//! With `backlog_throttle = flush-all` (XFS 2021), the worker releases a
//! file whole before the next (its steps back to back, as XFS inactivates
//! an inode), and a producer that finds more than `FLUSH_ALL_MAX_ITEMS`
//! items waits until every item queued before it is done (flush_work):
//! however long that is.

use crate::action::ReleaseStep;
use crate::action::{Action, IoErrorKind, StallReason, Step};
use crate::config::BacklogThrottle;
use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::{DeviceId, FileId, TaskId};
use crate::page_cache::{MAX_FILE_PAGES, PG_READING, PG_WRITEBACK};
use crate::task::{Op, WaitKey};
use crate::time::Instant;
use std::collections::VecDeque;

/// XFS_INODEGC_MAX_BACKLOG: the count bound of `flush-all`.
pub const FLUSH_ALL_MAX_ITEMS: usize = 256;
/// The most blocks one release step frees. A producer's wait overshoots
/// `backlog_wait_ms` by at most two steps: the item that took the level
/// over high, and the step in progress when the level falls under low.
pub const RELEASE_STEP_BYTES: u64 = 16 << 20;
/// First estimates, before any step was measured: 50 us a file (Chinner's
/// ~20,000 inactivations/s) and 1 ms a MiB (ext4 freeing a fragmented
/// file's extents: a GiB in about a second).
const INITIAL_EST_FILE_NS: u64 = 50_000;
const INITIAL_EST_MIB_NS: u64 = 1_000_000;
/// A removal step measures the per-file cost when it frees less than this.
const SMALL_REMOVE_BYTES: u64 = 1 << 20;
const MIB: u64 = 1 << 20;

/// What an item does to its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ItemKind {
    /// An unlinked file: its pages dropped (`Start`), its backing file cut
    /// in steps, then removed; the file id is retired.
    Remove,
    /// A large truncation: the backing file cut in steps down to `to`
    /// bytes; the file stays (its pages past `to` were dropped by the
    /// truncation already).
    Cut { to: u64 },
}

/// A file to release, or to cut.
#[derive(Clone, Copy, Debug)]
struct Item {
    file: FileId,
    kind: ItemKind,
    /// Bytes of the backing file still to free.
    bytes: u64,
    /// Estimated cost of its next step; the level counts it until the
    /// step is done.
    cost_ns: u64,
    seq: u64,
    /// Its `Start` step was reported: its pages are dropped now, or once
    /// its I/O in flight is done.
    started: bool,
    /// Its cached pages are dropped.
    dropped: bool,
    /// A task waits for this cut (a write or truncation that extends the
    /// file): it goes before the other parked files.
    waited: bool,
}

/// The step of the item being worked on, while the runtime carries it out.
#[derive(Clone, Copy, Debug)]
struct StepInFlight {
    id: u64,
    /// The item is the head of `parked` (else of `queue`).
    parked: bool,
    step: ReleaseStep,
    /// Bytes the step frees.
    bytes: u64,
    started: Instant,
}

/// What a backlog has done, for stats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BacklogStats {
    /// Items queued now (the one being worked on included).
    pub items: u64,
    /// Their estimated cost, ns.
    pub level_ns: u64,
    pub max_items: u64,
    pub max_level_ns: u64,
    /// Most large files parked at once (past their first step).
    pub max_parked: u64,
    pub high_ns: u64,
    pub low_ns: u64,
    pub items_done: u64,
    pub steps_done: u64,
    /// Large truncations whose backing file was cut (items of their own).
    pub cuts_done: u64,
    /// Times a producer found the backlog full and set the throttle bit
    /// (watermarks) or waited for a flush (flush-all).
    pub throttles: u64,
    /// Release steps the runtime reported failed (the file is gone from
    /// the cache all the same; its blocks may stay allocated).
    pub errors: u64,
    pub est_file_ns: u64,
    pub est_mib_ns: u64,
}

/// One device's backlog.
#[derive(Debug)]
pub(crate) struct Backlog {
    queue: VecDeque<Item>,
    level_ns: u64,
    /// The throttle bit: producers sleep until the level is under low.
    throttled: bool,
    /// The level when a knob last changed (the bound holds from there).
    grace_ns: u64,
    /// Large files past their first step, with what is left of them.
    parked: VecDeque<Item>,
    step: Option<StepInFlight>,
    next_seq: u64,
    /// The highest sequence number of a file wholly released; under
    /// flush-all files are released in queue order, so all before it are.
    done_seq: u64,
    est_file_ns: u64,
    est_mib_ns: u64,
    stats: BacklogStats,
}

impl Default for Backlog {
    fn default() -> Backlog {
        Backlog {
            queue: VecDeque::new(),
            level_ns: 0,
            throttled: false,
            grace_ns: 0,
            parked: VecDeque::new(),
            step: None,
            next_seq: 1,
            done_seq: 0,
            est_file_ns: INITIAL_EST_FILE_NS,
            est_mib_ns: INITIAL_EST_MIB_NS,
            stats: BacklogStats::default(),
        }
    }
}

impl Backlog {
    /// The next step of an item with `bytes` left, and what it frees.
    fn next_step(kind: ItemKind, bytes: u64) -> (ReleaseStep, u64) {
        let to = match kind {
            ItemKind::Remove => 0,
            ItemKind::Cut { to } => to,
        };
        if bytes > RELEASE_STEP_BYTES {
            let len = to + bytes - RELEASE_STEP_BYTES;
            (ReleaseStep::Truncate { len }, RELEASE_STEP_BYTES)
        } else if kind == ItemKind::Remove {
            (ReleaseStep::Remove, bytes)
        } else {
            (ReleaseStep::Truncate { len: to }, bytes)
        }
    }

    /// Estimated cost of the next step of an item with `bytes` left.
    fn estimate_ns(&self, kind: ItemKind, bytes: u64) -> u64 {
        let (step, freed) = Self::next_step(kind, bytes);
        let file = if step == ReleaseStep::Remove {
            self.est_file_ns
        } else {
            0
        };
        file + (freed as u128 * self.est_mib_ns as u128 / MIB as u128) as u64
    }

    /// Appends an item for a file with `bytes` left. A cut has no
    /// `Start` step: the truncation dropped its pages.
    fn push(&mut self, file: FileId, kind: ItemKind, bytes: u64) {
        let cost_ns = self.estimate_ns(kind, bytes);
        let seq = self.next_seq;
        self.next_seq += 1;
        let cut = kind != ItemKind::Remove;
        self.queue.push_back(Item {
            file,
            kind,
            bytes,
            cost_ns,
            seq,
            started: cut,
            dropped: cut,
            waited: false,
        });
        self.level_ns += cost_ns;
        self.stats.max_items = self.stats.max_items.max(self.queue.len() as u64);
        self.stats.max_level_ns = self.stats.max_level_ns.max(self.level_ns);
    }

    fn watermarks_ns(wait_ms: u32) -> (u64, u64) {
        let low = wait_ms as u64 * 1_000_000;
        (2 * low, low)
    }

    /// Learns from a finished step: (bytes freed, what it took).
    fn learn(&mut self, step: ReleaseStep, bytes: u64, took_ns: u64) {
        let ewma = |old: u64, new: u64| (old * 7 + new) / 8;
        match step {
            ReleaseStep::Remove if bytes < SMALL_REMOVE_BYTES => {
                self.est_file_ns = ewma(self.est_file_ns, took_ns).max(1);
            }
            ReleaseStep::Truncate { .. } if bytes >= MIB => {
                let per_mib = (took_ns as u128 * MIB as u128 / bytes as u128) as u64;
                self.est_mib_ns = ewma(self.est_mib_ns, per_mib).max(1);
            }
            _ => {}
        }
    }

    /// Whether releases are queued or in progress.
    pub fn busy(&self) -> bool {
        !self.queue.is_empty() || !self.parked.is_empty()
    }

    /// Which item the worker takes next: parked files go while the
    /// backlog is under `low` or has nothing else, or when a task waits
    /// for the first (a cut, moved there by `wait_for_cut`).
    fn take_parked(&self, low: u64) -> bool {
        let Some(first) = self.parked.front() else {
            return false;
        };
        self.queue.is_empty() || self.level_ns < low || first.waited
    }

    /// The queued or parked cut of `file`, if any.
    fn cut_of(&mut self, file: FileId) -> Option<&mut Item> {
        self.queue
            .iter_mut()
            .chain(self.parked.iter_mut())
            .find(|i| i.file == file && i.kind != ItemKind::Remove)
    }

    pub fn stats(&self, wait_ms: u32) -> BacklogStats {
        let (high, low) = Self::watermarks_ns(wait_ms);
        BacklogStats {
            items: self.queue.len() as u64,
            level_ns: self.level_ns,
            high_ns: high,
            low_ns: low,
            est_file_ns: self.est_file_ns,
            est_mib_ns: self.est_mib_ns,
            ..self.stats
        }
    }
}

impl Engine {
    /// The last name of `file` is gone and no handle is open: queue the
    /// release of its data on its device's backlog and return, unless the
    /// backlog holds the producer back (stall `backlog`, see the module
    /// docs). The file cannot be opened again.
    pub fn unlink(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
    ) -> Result<Step, EngineError> {
        let f = self
            .files
            .get(file.index())
            .filter(|f| !f.evicted && !f.unlinked)
            .ok_or(EngineError::BadFile(file))?;
        if f.open_handles > 0 {
            return Err(EngineError::FileBusy(file));
        }
        self.begin(
            task,
            Op::Unlink {
                file,
                flush_until: None,
            },
        )?;
        self.files[file.index()].unlinked = true;
        self.continue_unlink(now, task)
    }

    pub(crate) fn continue_unlink(
        &mut self,
        now: Instant,
        task: TaskId,
    ) -> Result<Step, EngineError> {
        let Op::Unlink { file, flush_until } = self.tasks[task.index()].op.clone() else {
            unreachable!("continue_unlink on a task that is not unlinking");
        };
        let device = self.files[file.index()].device;
        let mut until = flush_until;
        if let Some(step) = self.backlog_throttle(now, task, device, &mut until) {
            self.tasks[task.index()].op = Op::Unlink {
                file,
                flush_until: until,
            };
            return Ok(step);
        }
        let mut bytes = self.files[file.index()].size;
        if self.files[file.index()].cut_pending {
            // The removal frees what the queued cut has not: one item a file.
            let Some(cut_bytes) = self.take_cut(file) else {
                // A step of the cut is in flight: its end wakes the backlog.
                return Ok(self.wait_for(
                    now,
                    task,
                    StallReason::Backlog,
                    WaitKey::Backlog(device),
                ));
            };
            bytes += cut_bytes;
        }
        self.devices[device.index()]
            .backlog
            .push(file, ItemKind::Remove, bytes);
        self.pump_backlog(now, device);
        self.finish(task, Ok(Step::Done))
    }

    /// Takes `file`'s queued cut out of its backlog; returns the bytes it
    /// had left to free, or None while a step of it is in flight.
    fn take_cut(&mut self, file: FileId) -> Option<u64> {
        let device = self.files[file.index()].device;
        let b = &mut self.devices[device.index()].backlog;
        let in_flight = b.step.is_some_and(|s| {
            let head = if s.parked {
                b.parked.front()
            } else {
                b.queue.front()
            };
            head.is_some_and(|i| i.file == file)
        });
        if in_flight {
            return None;
        }
        let bytes = if let Some(at) = b
            .queue
            .iter()
            .position(|i| i.file == file && i.kind != ItemKind::Remove)
        {
            let item = b.queue.remove(at).expect("the position found");
            b.level_ns -= item.cost_ns;
            item.bytes
        } else if let Some(at) = b.parked.iter().position(|i| i.file == file) {
            b.parked.remove(at).expect("the position found").bytes
        } else {
            0
        };
        self.files[file.index()].cut_pending = false;
        Some(bytes)
    }

    /// A truncation of `file` from `old_size` to `len` bytes, its pages
    /// dropped: more than one release step of backing data to free goes
    /// to the backlog as a cut (true: the runtime leaves the backing file
    /// alone); less, the runtime cuts it at once (false), as one step
    /// would. A file with a queued cut has its target lowered.
    pub(crate) fn queue_cut(
        &mut self,
        now: Instant,
        file: FileId,
        len: u64,
        old_size: u64,
    ) -> bool {
        let device = self.files[file.index()].device;
        let b = &mut self.devices[device.index()].backlog;
        if self.files[file.index()].cut_pending {
            let item = b.cut_of(file).expect("a pending cut is queued");
            let ItemKind::Cut { to } = item.kind else {
                unreachable!("cut_of finds cuts");
            };
            // What is left above the old target is still to free, and the
            // old target down to the new one.
            item.bytes += to.saturating_sub(len);
            item.kind = ItemKind::Cut { to: to.min(len) };
            return true;
        }
        let bytes = old_size.saturating_sub(len);
        if bytes <= RELEASE_STEP_BYTES {
            return false;
        }
        b.push(file, ItemKind::Cut { to: len }, bytes);
        self.files[file.index()].cut_pending = true;
        self.pump_backlog(now, device);
        true
    }

    /// A write or truncation would extend `file` while its backing file
    /// still holds data the queued cut is to free (a read of the new
    /// range would find it): the task waits for the cut, which goes
    /// before the other parked files.
    pub(crate) fn wait_for_cut(&mut self, now: Instant, task: TaskId, file: FileId) -> Step {
        let device = self.files[file.index()].device;
        let b = &mut self.devices[device.index()].backlog;
        if let Some(at) = b.parked.iter().position(|i| i.file == file) {
            // Behind the head while a step of the head is in flight: the
            // step's report pops the head.
            let front = usize::from(b.step.is_some_and(|s| s.parked));
            let mut item = b.parked.remove(at).expect("the position found");
            item.waited = true;
            b.parked.insert(at.min(front), item);
        } else if let Some(item) = b.cut_of(file) {
            // Still queued: parked in front when its first step is done.
            item.waited = true;
        }
        self.pump_backlog(now, device);
        self.wait_for(now, task, StallReason::Backlog, WaitKey::Backlog(device))
    }

    /// Whether a write or truncation to `end` bytes must wait for a cut.
    pub(crate) fn extends_over_cut(&self, file: FileId, end: u64) -> bool {
        let f = &self.files[file.index()];
        f.cut_pending && end > f.size
    }

    /// Whether the producer must wait before queueing, and the wait.
    /// `flush_until` is the producer's flush under flush-all (set here
    /// when it starts one; the caller keeps it in its op).
    pub(crate) fn backlog_throttle(
        &mut self,
        now: Instant,
        task: TaskId,
        device: DeviceId,
        flush_until: &mut Option<u64>,
    ) -> Option<Step> {
        let (mode, wait_ms) = (self.config.backlog_throttle, self.config.backlog_wait_ms);
        let b = &mut self.devices[device.index()].backlog;
        match mode {
            BacklogThrottle::Watermarks => {
                let (high, _) = Backlog::watermarks_ns(wait_ms);
                if !b.throttled && b.level_ns < high {
                    return None;
                }
                if !b.throttled {
                    // Set the bit; the worker is busy already (it works
                    // whenever items are queued): the kick is implicit.
                    b.throttled = true;
                    b.stats.throttles += 1;
                }
            }
            BacklogThrottle::FlushAll => {
                if let Some(until) = *flush_until {
                    if b.done_seq >= until {
                        return None;
                    }
                } else if b.queue.len() <= FLUSH_ALL_MAX_ITEMS {
                    return None;
                } else {
                    // flush_work: everything queued so far.
                    *flush_until = Some(b.next_seq - 1);
                    b.stats.throttles += 1;
                }
            }
        }
        Some(self.wait_for(now, task, StallReason::Backlog, WaitKey::Backlog(device)))
    }

    /// The worker: starts the head item, or its next step, if nothing is
    /// in flight. Called whenever the device is pumped.
    pub(crate) fn pump_backlog(&mut self, now: Instant, device: DeviceId) {
        let b = &self.devices[device.index()].backlog;
        // Every device pump passes here: most find nothing to do.
        if b.step.is_some() || !b.busy() {
            return;
        }
        let (_, low) = Backlog::watermarks_ns(self.config.backlog_wait_ms);
        let parked = b.take_parked(low);
        let head = if parked {
            b.parked.front()
        } else {
            b.queue.front()
        };
        let Some(&item) = head else {
            return;
        };
        let (step, bytes) = if !item.started {
            (ReleaseStep::Start, 0)
        } else {
            if !item.dropped && !self.drop_for_release(item.file) {
                // Writes or reads of it are in flight: a completion pumps again.
                return;
            }
            Backlog::next_step(item.kind, item.bytes)
        };
        let b = &mut self.devices[device.index()].backlog;
        if !parked {
            let head = b.queue.front_mut().expect("the head item");
            head.dropped = head.started;
        }
        let id = (device.index() as u64) << 48 | item.seq;
        b.step = Some(StepInFlight {
            id,
            parked,
            step,
            bytes,
            started: now,
        });
        self.actions.push_back(Action::Release {
            id,
            file: item.file,
            step,
        });
    }

    /// Drops an unlinked file's pages, dirty ones without writing them;
    /// false while I/O of it is in flight (nothing is dropped then).
    fn drop_for_release(&mut self, file: FileId) -> bool {
        let busy = self.files[file.index()]
            .runs_over(0, MAX_FILE_PAGES)
            .any(|(_, run)| run.flags & (PG_WRITEBACK | PG_READING) != 0);
        if busy {
            return false;
        }
        self.discard_dirty(file, 0);
        self.remove_pages(file, 0, MAX_FILE_PAGES);
        // Nothing of it needs making durable any more.
        self.files[file.index()].unsynced = None;
        true
    }

    /// The runtime carried out release step `id` (`Action::Release`).
    /// Unknown ids are ignored (a late report after a knob change cannot
    /// happen, but must not panic).
    pub fn release_done(&mut self, now: Instant, id: u64, result: Result<(), IoErrorKind>) {
        let device = DeviceId((id >> 48) as u32);
        let Some(dev) = self.devices.get_mut(device.index()) else {
            return;
        };
        let b = &mut dev.backlog;
        let Some(step) = b.step.filter(|s| s.id == id) else {
            return;
        };
        b.step = None;
        if step.step == ReleaseStep::Start {
            // Parked items were started long ago: this is the queue's head.
            b.queue
                .front_mut()
                .expect("a step belongs to the head item")
                .started = true;
            self.pump_backlog(now, device);
            return;
        }
        b.stats.steps_done += 1;
        if result.is_err() {
            b.stats.errors += 1;
        }
        b.learn(step.step, step.bytes, now.since_ns(step.started));
        let mut item = if step.parked {
            b.parked
                .pop_front()
                .expect("a step belongs to the head item")
        } else {
            let item = b
                .queue
                .pop_front()
                .expect("a step belongs to the head item");
            b.level_ns -= item.cost_ns;
            item
        };
        item.bytes = item.bytes.saturating_sub(step.bytes);
        if result.is_err() {
            // A failed cut goes on to the removal; a failed removal ends
            // the item: the file is gone from the cache either way.
            item.bytes = 0;
        }
        let item_done =
            step.step == ReleaseStep::Remove || (item.kind != ItemKind::Remove && item.bytes == 0);
        if step.step == ReleaseStep::Remove {
            b.stats.items_done += 1;
            // Items finish in queue order under flush-all, the one mode
            // that reads this: a flush waits for whole files, as XFS's.
            b.done_seq = b.done_seq.max(item.seq);
            self.retire_file(item.file);
        } else if item.kind != ItemKind::Remove && item.bytes == 0 {
            b.stats.cuts_done += 1;
            b.done_seq = b.done_seq.max(item.seq);
            self.files[item.file.index()].cut_pending = false;
            // Writers waiting to extend the file go on.
            self.wake(WaitKey::Backlog(device));
        } else if self.config.backlog_throttle == BacklogThrottle::FlushAll && !step.parked {
            // XFS releases an inode whole: the next step at once.
            let b = &mut self.devices[device.index()].backlog;
            item.cost_ns = b.estimate_ns(item.kind, item.bytes);
            b.level_ns += item.cost_ns;
            b.queue.push_front(item);
        } else {
            // Parked: its next steps when the backlog has room, in turn.
            let b = &mut self.devices[device.index()].backlog;
            item.cost_ns = 0;
            debug_assert!(item.started && item.dropped);
            if item.waited {
                b.parked.push_front(item);
            } else {
                b.parked.push_back(item);
            }
            b.stats.max_parked = b.stats.max_parked.max(b.parked.len() as u64);
        }
        self.backlog_release_producers(device, item_done);
        self.pump_backlog(now, device);
    }

    /// A step is done (`item_done`: the last of its item): with
    /// watermarks, producers go once the level is under low; with
    /// flush-all, they re-check their flush when an item is done (a flush
    /// ends only then: one wait, not one a step).
    fn backlog_release_producers(&mut self, device: DeviceId, item_done: bool) {
        let (mode, wait_ms) = (self.config.backlog_throttle, self.config.backlog_wait_ms);
        let b = &mut self.devices[device.index()].backlog;
        let (high, low) = Backlog::watermarks_ns(wait_ms);
        let release = match mode {
            BacklogThrottle::Watermarks => b.throttled && b.level_ns < low,
            BacklogThrottle::FlushAll => item_done,
        };
        if b.level_ns < high {
            // The bound holds again as it is.
            b.grace_ns = 0;
        }
        if release {
            b.throttled = false;
        }
        // A sync waits for the backlog to empty.
        if release || b.queue.is_empty() {
            self.wake(WaitKey::Backlog(device));
        }
    }

    /// After a backlog knob changed: producers re-check.
    pub(crate) fn backlog_recheck(&mut self) {
        for d in 0..self.devices.len() {
            let b = &mut self.devices[d].backlog;
            b.throttled = false;
            b.grace_ns = b.level_ns;
            self.wake(WaitKey::Backlog(DeviceId(d as u32)));
        }
    }

    /// Checks every backlog's bound and accounting.
    pub(crate) fn check_backlogs(&self) {
        let (high, _) = Backlog::watermarks_ns(self.config.backlog_wait_ms);
        let producers = self.tasks.len() as u64;
        let mut queued_cuts = 0;
        for (d, dev) in self.devices.iter().enumerate() {
            let b = &dev.backlog;
            let sum: u64 = b.queue.iter().map(|i| i.cost_ns).sum();
            assert_eq!(sum, b.level_ns, "device {d}: backlog level");
            let largest = b.queue.iter().map(|i| i.cost_ns).max().unwrap_or(0);
            if self.config.backlog_throttle == BacklogThrottle::Watermarks {
                assert!(
                    b.level_ns <= b.grace_ns.max(high) + producers * largest,
                    "device {d}: backlog {} ns over high {high} plus one step a producer",
                    b.level_ns
                );
            } else if b.grace_ns == 0 {
                assert!(
                    b.queue.len() as u64 <= FLUSH_ALL_MAX_ITEMS as u64 + producers,
                    "device {d}: {} items over the flush-all bound",
                    b.queue.len()
                );
            }
            for item in b.queue.iter().chain(&b.parked) {
                let f = &self.files[item.file.index()];
                assert!(!f.evicted);
                match item.kind {
                    ItemKind::Remove => assert!(f.unlinked && f.open_handles == 0),
                    ItemKind::Cut { to } => assert!(f.cut_pending && to <= f.size),
                }
            }
            queued_cuts += b
                .queue
                .iter()
                .chain(&b.parked)
                .filter(|i| i.kind != ItemKind::Remove)
                .count();
        }
        // One cut a file: the flags and the items agree.
        let flagged = self.files.iter().filter(|f| f.cut_pending).count();
        assert_eq!(
            queued_cuts, flagged,
            "queued cuts and files waiting for one"
        );
    }
}
