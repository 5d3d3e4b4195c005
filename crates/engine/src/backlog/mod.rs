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
//!
//! Files here: the queue (queue.rs) and its costs and watermarks
//! (estimate.rs), both pure;
//! this file holds the engine's side: queueing a removal or a cut, the
//! worker's steps, dropping pages, retiring files, waking producers.

mod estimate;
pub(crate) mod queue;

pub use estimate::RELEASE_STEP_BYTES;
pub use queue::{BacklogStats, FLUSH_ALL_MAX_ITEMS};

use crate::action::{Action, IoErrorKind, ReleaseStep, StallReason, Step};
use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::{DeviceId, FileId, TaskId};
use crate::page_cache::{MAX_FILE_PAGES, PG_READING, PG_WRITEBACK};
use crate::task::{Op, WaitKey};
use crate::time::Instant;
use estimate::{next_step, watermarks_ns, ItemKind};
use queue::StepEnd;

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
            .cache
            .files
            .get(file.index())
            .filter(|f| !f.evicted && !f.unlinked)
            .ok_or(EngineError::BadFile(file))?;
        if f.open_handles > 0 {
            return Err(EngineError::FileBusy(file));
        }
        self.tasks.begin(
            task,
            Op::Unlink {
                file,
                flush_until: None,
            },
        )?;
        self.cache.files[file.index()].unlinked = true;
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
        let device = self.cache.files[file.index()].device;
        let mut until = flush_until;
        if let Some(step) = self.backlog_throttle(now, task, device, &mut until) {
            self.tasks[task.index()].op = Op::Unlink {
                file,
                flush_until: until,
            };
            return Ok(step);
        }
        let mut bytes = self.cache.files[file.index()].size;
        if self.cache.files[file.index()].cut_pending {
            // The removal frees what the queued cut has not: one item a file.
            let Some(cut_bytes) = self.take_cut(file) else {
                // A step of the cut is in flight: its end wakes the backlog.
                return Ok(self.tasks.wait_for(
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
        self.tasks.finish(task, Ok(Step::Done))
    }

    /// Takes `file`'s queued cut out of its backlog; returns the bytes it
    /// had left to free, or None while a step of it is in flight.
    fn take_cut(&mut self, file: FileId) -> Option<u64> {
        let device = self.cache.files[file.index()].device;
        let bytes = self.devices[device.index()].backlog.take_cut(file)?;
        self.cache.files[file.index()].cut_pending = false;
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
        let device = self.cache.files[file.index()].device;
        let b = &mut self.devices[device.index()].backlog;
        if self.cache.files[file.index()].cut_pending {
            b.lower_cut(file, len);
            return true;
        }
        let bytes = old_size.saturating_sub(len);
        if bytes <= RELEASE_STEP_BYTES {
            return false;
        }
        b.push(file, ItemKind::Cut { to: len }, bytes);
        self.cache.files[file.index()].cut_pending = true;
        self.pump_backlog(now, device);
        true
    }

    /// A write or truncation would extend `file` while its backing file
    /// still holds data the queued cut is to free (a read of the new
    /// range would find it): the task waits for the cut, which goes
    /// before the other parked files.
    pub(crate) fn wait_for_cut(&mut self, now: Instant, task: TaskId, file: FileId) -> Step {
        let device = self.cache.files[file.index()].device;
        self.devices[device.index()].backlog.hurry_cut(file);
        self.pump_backlog(now, device);
        self.tasks
            .wait_for(now, task, StallReason::Backlog, WaitKey::Backlog(device))
    }

    /// Whether a write or truncation to `end` bytes must wait for a cut.
    pub(crate) fn extends_over_cut(&self, file: FileId, end: u64) -> bool {
        let f = &self.cache.files[file.index()];
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
        if !b.throttles(mode, wait_ms, flush_until) {
            return None;
        }
        Some(
            self.tasks
                .wait_for(now, task, StallReason::Backlog, WaitKey::Backlog(device)),
        )
    }

    /// The worker: starts the head item, or its next step, if nothing is
    /// in flight. Called whenever the device is pumped.
    pub(crate) fn pump_backlog(&mut self, now: Instant, device: DeviceId) {
        let b = &self.devices[device.index()].backlog;
        // Every device pump passes here: most find nothing to do.
        if b.stepping() || !b.busy() {
            return;
        }
        let (_, low) = watermarks_ns(self.config.backlog_wait_ms);
        let Some((item, parked)) = b.head(low) else {
            return;
        };
        let (step, bytes) = if !item.started {
            (ReleaseStep::Start, 0)
        } else {
            if !item.dropped && !self.drop_for_release(item.file) {
                // Writes or reads of it are in flight: a completion pumps again.
                return;
            }
            next_step(item.kind, item.bytes)
        };
        let id = (device.index() as u64) << 48 | item.seq;
        self.devices[device.index()]
            .backlog
            .begin_step(id, parked, step, bytes, now);
        self.actions.push_back(Action::Release {
            id,
            file: item.file,
            step,
        });
    }

    /// Drops an unlinked file's pages, dirty ones without writing them;
    /// false while I/O of it is in flight (nothing is dropped then).
    fn drop_for_release(&mut self, file: FileId) -> bool {
        let busy = self.cache.files[file.index()]
            .runs_over(0, MAX_FILE_PAGES)
            .any(|(_, run)| run.flags & (PG_WRITEBACK | PG_READING) != 0);
        if busy {
            return false;
        }
        self.discard_dirty(file, 0);
        self.cache
            .remove_pages(file, 0, MAX_FILE_PAGES, &mut self.actions);
        // Nothing of it needs making durable any more.
        self.cache.files[file.index()].unsynced = None;
        true
    }

    /// The runtime carried out release step `id` (`Action::Release`).
    /// Unknown ids are ignored (a late report after a knob change cannot
    /// happen, but must not panic).
    pub fn release_done(&mut self, now: Instant, id: u64, result: Result<(), IoErrorKind>) {
        let device = DeviceId((id >> 48) as u32);
        let mode = self.config.backlog_throttle;
        let Some(dev) = self.devices.get_mut(device.index()) else {
            return;
        };
        let Some(end) = dev.backlog.step_done(id, result, now, mode) else {
            return;
        };
        match end {
            StepEnd::Started => {
                self.pump_backlog(now, device);
                return;
            }
            StepEnd::Removed(file) => self.retire_file(file),
            StepEnd::CutDone(file) => {
                self.cache.files[file.index()].cut_pending = false;
                // Writers waiting to extend the file go on.
                self.tasks.wake(WaitKey::Backlog(device), &mut self.actions);
            }
            StepEnd::More => {}
        }
        let item_done = end != StepEnd::More;
        let wait_ms = self.config.backlog_wait_ms;
        let b = &mut self.devices[device.index()].backlog;
        if b.release_producers(mode, wait_ms, item_done) {
            self.tasks.wake(WaitKey::Backlog(device), &mut self.actions);
        }
        self.pump_backlog(now, device);
    }

    /// After a backlog knob changed: producers re-check.
    pub(crate) fn backlog_recheck(&mut self) {
        for d in 0..self.devices.len() {
            self.devices[d].backlog.recheck();
            self.tasks
                .wake(WaitKey::Backlog(DeviceId(d as u32)), &mut self.actions);
        }
    }

    /// Checks every backlog's bound and accounting.
    pub(crate) fn check_backlogs(&self) {
        let (mode, wait_ms) = (self.config.backlog_throttle, self.config.backlog_wait_ms);
        let producers = self.tasks.len() as u64;
        let mut queued_cuts = 0;
        for (d, dev) in self.devices.iter().enumerate() {
            dev.backlog.check(d, mode, wait_ms, producers);
            for item in dev.backlog.items() {
                let f = &self.cache.files[item.file.index()];
                assert!(!f.evicted);
                match item.kind {
                    ItemKind::Remove => assert!(f.unlinked && f.open_handles == 0),
                    ItemKind::Cut { to } => {
                        assert!(f.cut_pending && to <= f.size);
                        queued_cuts += 1;
                    }
                }
            }
        }
        // One cut a file: the flags and the items agree.
        let flagged = self.cache.files.iter().filter(|f| f.cut_pending).count();
        assert_eq!(
            queued_cuts, flagged,
            "queued cuts and files waiting for one"
        );
    }
}
