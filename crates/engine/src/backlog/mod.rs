//! The backlog: deferred work with watermarks (Chinner 2021), per device,
//! and the paths that feed it: unlink and truncation.
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
//! (`Action::Release`): a cut of at most `RELEASE_STEP_BYTES` while more
//! is left, else the removal, after which the file id is retired. Large
//! files are parked between steps (queue.rs); the cost of steps and the
//! watermarks that throttle producers are in estimate.rs.
//!
//! Truncation (`Engine::set_len`, Linux's mm/truncate.c; which pages go:
//! page_cache/truncate.rs): pages past the new end are dropped, dirty ones
//! without being written, once the I/O in flight past it is done. Freeing
//! the backing file's blocks takes time too (ext4: about half a second a
//! GiB): up to one release step the runtime does it at once; more is an
//! item, a cut: the backing file cut in steps down to the new length,
//! with no `Start` and no retirement, whose producer is throttled as one
//! of removals is. Until it is done the backing file holds the old data
//! past the new end, so a write or truncation that would extend the file
//! waits for it (stall `backlog`), and a cut someone waits for goes first
//! among the parked files. Unlinking a file whose cut is queued folds what
//! the cut had left into the removal.
//!
//! Invalidation (`Engine::invalidate_range`, Linux's
//! truncate_pagecache_range, which fallocate calls): a range's pages are
//! dropped as a truncation's are (page_cache/truncate.rs) before the
//! runtime changes the backing file under them (punch, zero, collapse,
//! insert, unshare); the file's length does not change.
//!
//! Files here: the queue (queue.rs) and its costs and watermarks
//! (estimate.rs), both pure; this file holds the engine's side: unlink,
//! truncation, invalidation, queueing a removal or a cut, the worker's
//! steps, dropping pages, retiring files, waking producers.

mod estimate;
pub(crate) mod queue;

pub use estimate::RELEASE_STEP_BYTES;
pub use queue::{BacklogStats, FLUSH_ALL_MAX_ITEMS};

use crate::action::{Action, IoErrorKind, ReleaseStep, StallReason, Step};
use crate::backing_len::resize_now;
use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::{DeviceId, FileId, HandleId, PageIndex, TaskId, PAGE_SIZE};
use crate::page_cache::MAX_FILE_PAGES;
use crate::task::{Op, WaitKey};
use crate::time::Instant;
pub(crate) use estimate::ItemKind;
use estimate::{next_step, watermarks_ns};
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

    // Truncation.

    /// Sets the file's length. The backing file's length follows as
    /// backing_len/ says: set by the runtime before this returns
    /// (`Action::SetLength`), cut in steps by the backlog
    /// ([`Engine::cut_queued`], `Action::Release`), or, lengthened over
    /// data not yet written, by the next flush. The cached tail of a now
    /// partial last page must read as zeros if the file grows again (the
    /// runtime zeroes it).
    pub fn set_len(
        &mut self,
        now: Instant,
        task: TaskId,
        handle: HandleId,
        len: u64,
    ) -> Result<Step, EngineError> {
        let file = self.handle(handle)?.file;
        crate::handle::page_range(len, 0)?;
        self.tasks.begin(
            task,
            Op::Truncate {
                file,
                len,
                flush_until: None,
                resize: None,
            },
        )?;
        self.continue_truncate(now, task)
    }

    pub(crate) fn continue_truncate(
        &mut self,
        now: Instant,
        task: TaskId,
    ) -> Result<Step, EngineError> {
        let Op::Truncate {
            file,
            len,
            flush_until,
            resize,
        } = self.tasks[task.index()].op.clone()
        else {
            unreachable!("continue_truncate on a task that is not truncating");
        };
        if let Some(id) = resize {
            // The file is cut in the cache; its backing file's length is
            // being set.
            return match self.resizes.take(id) {
                Some(result) => {
                    let result = result.map(|()| Step::Done).map_err(EngineError::Resize);
                    self.tasks.finish(task, result)
                }
                None => {
                    Ok(self
                        .tasks
                        .wait_for(now, task, StallReason::Sync, WaitKey::FileIo(file)))
                }
            };
        }
        if self.cache.files[file.index()].resizing.is_some() {
            // Another truncation's length change first: lengths reach the
            // backing file in the order they were set.
            return Ok(self
                .tasks
                .wait_for(now, task, StallReason::Sync, WaitKey::FileIo(file)));
        }
        if self.extends_over_cut(file, len) {
            return Ok(self.wait_for_cut(now, task, file));
        }
        if let Some(reason) = self.drop_past_end(file, len) {
            // I/O in flight past the new end, or a copy into a page there:
            // wait for it, then drop the pages.
            return Ok(self
                .tasks
                .wait_for(now, task, reason, WaitKey::FileIo(file)));
        }
        let old_size = self.cache.files[file.index()].size;
        let cut = old_size.saturating_sub(len) > RELEASE_STEP_BYTES;
        if cut || self.cache.files[file.index()].cut_pending {
            // A cut for the backlog: the producer is throttled first.
            let device = self.cache.files[file.index()].device;
            let mut until = flush_until;
            if let Some(step) = self.backlog_throttle(now, task, device, &mut until) {
                self.tasks[task.index()].op = Op::Truncate {
                    file,
                    len,
                    flush_until: until,
                    resize: None,
                };
                return Ok(step);
            }
        }
        self.set_len_now(now, task, file, len, flush_until)
    }

    /// Truncation's last step: the file takes length `len` (its pages
    /// past it are gone) and its backing file follows (backing_len/).
    fn set_len_now(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
        len: u64,
        flush_until: Option<u64>,
    ) -> Result<Step, EngineError> {
        let old_size = self.cache.files[file.index()].size;
        let first_gone = len.div_ceil(PAGE_SIZE);
        crate::space::truncated(&mut self.cache.files[file.index()], len);
        let f = &mut self.cache.files[file.index()];
        f.size = len;
        f.writeback_index = f.writeback_index.min(first_gone);
        // The backlog cuts the backing file in steps, or the runtime sets
        // its length now (and no write of the file starts until it has),
        // or, lengthened over data not yet written, the next flush does.
        self.queue_cut(now, file, len, old_size);
        self.durability
            .mark_unsynced(&mut self.cache.files[file.index()]);
        if self.cut_queued(file) {
            // Writes past the new end wait for the cut (extends_over_cut).
            self.cache.files[file.index()].disk_size = len;
        } else if resize_now(&self.cache.files[file.index()], &self.io, len) {
            let f = &mut self.cache.files[file.index()];
            let id = self.resizes.request(file, f, len, &mut self.actions);
            self.tasks[task.index()].op = Op::Truncate {
                file,
                len,
                flush_until,
                resize: Some(id),
            };
            return Ok(self
                .tasks
                .wait_for(now, task, StallReason::Sync, WaitKey::FileIo(file)));
        }
        self.tasks.finish(task, Ok(Step::Done))
    }

    /// Drops `file`'s pages past a new length of `len` bytes that no
    /// I/O or copy holds; the stall to wait in while some remain (then
    /// the truncation waits and comes back).
    fn drop_past_end(&mut self, file: FileId, len: u64) -> Option<StallReason> {
        self.discard_dirty(file, len.div_ceil(PAGE_SIZE), MAX_FILE_PAGES);
        self.cache.truncate_pages(file, len, &mut self.actions)
    }

    /// Makes the dirty pages `first..end` clean without writing them
    /// (page_cache/truncate.rs), and gives back their reserved room.
    pub(crate) fn discard_dirty(&mut self, file: FileId, first: PageIndex, end: PageIndex) {
        if let Some(when) = self.cache.discard_dirty(file, first, end) {
            let wb = self.cache.files[file.index()].wb;
            self.wbs[wb.index()].dirty_files.remove(&(when, file));
        }
        let f = &mut self.cache.files[file.index()];
        self.devices[f.device.index()]
            .space
            .unreserve_discarded(f, first, end);
    }

    // Invalidation.

    /// Drops the cached pages of bytes `offset..offset + len` of the
    /// handle's file (a `len` reaching past the largest file: to the end).
    /// Done once none is left; the runtime then changes the backing file.
    pub fn invalidate_range(
        &mut self,
        now: Instant,
        task: TaskId,
        handle: HandleId,
        offset: u64,
        len: u64,
    ) -> Result<Step, EngineError> {
        let file = self.handle(handle)?.file;
        let first = (offset / PAGE_SIZE).min(MAX_FILE_PAGES);
        let end = offset
            .saturating_add(len)
            .div_ceil(PAGE_SIZE)
            .min(MAX_FILE_PAGES);
        self.tasks
            .begin(task, Op::Invalidate { file, first, end })?;
        self.continue_invalidate(now, task)
    }

    pub(crate) fn continue_invalidate(
        &mut self,
        now: Instant,
        task: TaskId,
    ) -> Result<Step, EngineError> {
        let Op::Invalidate { file, first, end } = self.tasks[task.index()].op.clone() else {
            unreachable!("continue_invalidate on a task that is not invalidating");
        };
        self.discard_dirty(file, first, end);
        let range = (first, end);
        if let Some(reason) = self.cache.invalidate_pages(file, range, &mut self.actions) {
            // I/O in flight in the range, or a copy into a page there: wait
            // for it, then drop the pages.
            return Ok(self
                .tasks
                .wait_for(now, task, reason, WaitKey::FileIo(file)));
        }
        // The backing file is about to change: the next sync flushes it.
        self.durability
            .mark_unsynced(&mut self.cache.files[file.index()]);
        self.tasks.finish(task, Ok(Step::Done))
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
        if self.cache.io_over(file, 0, MAX_FILE_PAGES) {
            return false;
        }
        self.discard_dirty(file, 0, MAX_FILE_PAGES);
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
}
