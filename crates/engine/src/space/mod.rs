//! Space reserved at write time: a write that the backing filesystem
//! could not store fails at write(), not later at write-back (Linux's
//! filesystems reserve blocks for delayed allocation in write_begin:
//! ext4_da_reserve_space, xfs_reserve_blocks).
//!
//! The backing filesystem allocates a block when a page is written back.
//! A page dirtied past the end of its backing file (`disk_pages`: what the
//! backing file held when the file was added, grown by completed
//! write-backs, shrunk by truncation) needs one then: it is marked
//! `PG_RESERVED` and counted in its device's `reserved`. Holes inside a
//! backing file are not known (a page dirtied below its end is taken to
//! have its block), nor are copy-on-write overwrites: those can still fail
//! at write-back, and are reported by the next sync of every handle.
//!
//! Free space comes from the runtime, which reports statvfs's f_bavail of
//! the device's directory (`Engine::set_free_space`) when it adds the
//! device and when asked (`Action::StatFs`): after a flush for space, and
//! every `STATFS_INTERVAL_NS` while pages hold reservations.
//! Room for a write is
//!
//!   free − margin − allocated since the report − reserved
//!
//! where the margin (1/64 of the free space, at most `MAX_MARGIN_PAGES`)
//! is left for the filesystem's own metadata. A write that needs more
//! pages than that (pages past `disk_pages` not yet reserved) first has
//! everything dirty on the device written back and the free space
//! reported again — the reservations may be pessimistic (another process
//! freed space; pages that were holes) — waiting for it (stall `sync`,
//! bounded by that write-back, at most `SPACE_FLUSH_MAX_NS`), then either
//! goes on or fails with `EngineError::NoSpace`, having written nothing.
//! Devices whose runtime never reports free space (the simulator's) are
//! not limited.

pub(crate) mod state;

use crate::action::WbReason;
use crate::action::{Action, StallReason, Step};
use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::{DeviceId, FileId, PageIndex, TaskId, PAGE_SIZE};
use crate::page_cache::{PG_DIRTY, PG_RESERVED, PG_WRITEBACK};
use crate::task::WaitKey;
use crate::time::{Instant, NS_PER_MS};

/// How often the runtime is asked for the free space of a device it
/// reported before.
pub const STATFS_INTERVAL_NS: u64 = 1_000 * NS_PER_MS;
/// Longest a writer waits for the write-back that learns the real free
/// space before the space is asked for anyway.
pub const SPACE_FLUSH_MAX_NS: u64 = 30_000 * NS_PER_MS;
impl Engine {
    /// The runtime's report of the free space on `device`'s filesystem
    /// (statvfs: f_bavail × f_frsize), when it adds the device and when
    /// asked (`Action::StatFs`).
    pub fn set_free_space(
        &mut self,
        now: Instant,
        device: DeviceId,
        free_bytes: u64,
    ) -> Result<(), EngineError> {
        let dev = self
            .devices
            .get_mut(device.index())
            .ok_or(EngineError::BadDevice(device))?;
        let space = &mut dev.space;
        space.free_pages = Some(free_bytes / PAGE_SIZE);
        space.allocated_since = 0;
        space.statfs_asked = false;
        space.next_statfs = Some(now + STATFS_INTERVAL_NS);
        self.tasks.wake(WaitKey::Space(device), &mut self.actions);
        Ok(())
    }

    /// The runtime could not learn the free space of `device` (statvfs
    /// failed): writes to it are not limited until a report comes.
    pub fn space_unknown(&mut self, device: DeviceId) -> Result<(), EngineError> {
        let dev = self
            .devices
            .get_mut(device.index())
            .ok_or(EngineError::BadDevice(device))?;
        dev.space.free_pages = None;
        dev.space.statfs_asked = false;
        dev.space.flush_started = None;
        self.tasks.wake(WaitKey::Space(device), &mut self.actions);
        Ok(())
    }

    /// Pages of `file`'s bytes `start..end` a write must reserve: those
    /// past the backing file's end not reserved already.
    fn pages_to_reserve(&self, file: FileId, start: u64, end: u64) -> u64 {
        let f = &self.cache.files[file.index()];
        let first = (start / PAGE_SIZE).max(f.disk_pages);
        let last = end.div_ceil(PAGE_SIZE);
        if first >= last {
            return 0;
        }
        let reserved: u64 = f
            .runs_over(first, last)
            .filter(|(_, run)| run.flags & PG_RESERVED != 0)
            .map(|(s, run)| (s + run.len).min(last) - s.max(first))
            .sum();
        last - first - reserved
    }

    /// At the start of a write of bytes `start..end` to `file`: None when
    /// there is room for it; else the wait for the write-back that learns
    /// the real free space (the first time, `flushed` false), or NoSpace.
    pub(crate) fn check_space(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
        (start, end): (u64, u64),
        flushed: &mut bool,
    ) -> Option<Result<Step, EngineError>> {
        let device = self.cache.files[file.index()].device;
        let room = self.devices[device.index()].space.room()?;
        let need = self.pages_to_reserve(file, start, end);
        if need <= room {
            return None;
        }
        let space = &self.devices[device.index()].space;
        if space.flush_started.is_some() || space.statfs_asked {
            // Someone's write-back for space is under way: wait for its report.
            return Some(Ok(self.tasks.wait_for(
                now,
                task,
                StallReason::Sync,
                WaitKey::Space(device),
            )));
        }
        if *flushed {
            self.devices[device.index()].stats.enospc_writes += 1;
            return Some(Err(EngineError::NoSpace {
                needed_bytes: need * PAGE_SIZE,
                room_bytes: room * PAGE_SIZE,
            }));
        }
        *flushed = true;
        self.start_space_flush(now, device);
        Some(Ok(self.tasks.wait_for(
            now,
            task,
            StallReason::Sync,
            WaitKey::Space(device),
        )))
    }

    /// Writes back everything dirty on `device`; the free space is asked
    /// for once that is done (`space_progress`).
    fn start_space_flush(&mut self, now: Instant, device: DeviceId) {
        self.devices[device.index()].space.flush_started = Some(now);
        self.devices[device.index()].stats.space_flushes += 1;
        let wbs = self.devices[device.index()].wbs.clone();
        for wb in wbs {
            if self.cache.wb(wb).dirty > 0 {
                self.wbs[wb.index()].flusher.start_all(WbReason::Sync);
            }
        }
        self.pump(now, device);
        self.space_progress(now, device);
    }

    /// After I/O completes and on timers: a space flush whose write-back
    /// is done (nothing dirty or in flight on the device), or that took
    /// `SPACE_FLUSH_MAX_NS`, asks for the free space; so does a device
    /// whose last report is `STATFS_INTERVAL_NS` old.
    pub(crate) fn space_progress(&mut self, now: Instant, device: DeviceId) {
        let space = &self.devices[device.index()].space;
        // Called after every completion: nothing to look at, most of the time.
        if space.flush_started.is_none() && space.next_statfs.is_none_or(|at| now < at) {
            return;
        }
        let idle = self.devices[device.index()]
            .wbs
            .iter()
            .all(|&wb| !self.cache.wb(wb).has_io());
        let space = &mut self.devices[device.index()].space;
        let flush_done = space
            .flush_started
            .is_some_and(|at| idle || now.since_ns(at) >= SPACE_FLUSH_MAX_NS);
        let due = space.reserved > 0 && space.next_statfs.is_some_and(|at| now >= at);
        if flush_done {
            space.flush_started = None;
        }
        if (flush_done || due) && !space.statfs_asked {
            space.statfs_asked = true;
            space.next_statfs = None;
            self.actions.push_back(Action::StatFs { device });
        }
    }

    /// Pages `first..end` of `file` were just dirtied: those past the
    /// backing file's end get a reservation.
    pub(crate) fn reserve_dirtied(&mut self, file: FileId, first: PageIndex, end: PageIndex) {
        let f = &mut self.cache.files[file.index()];
        let device = f.device;
        if self.devices[device.index()].space.free_pages.is_none() {
            return;
        }
        let first = first.max(f.disk_pages);
        if first >= end {
            return;
        }
        let before = f.counts().reserved;
        f.update(first, end, |fl| {
            debug_assert!(fl & PG_DIRTY != 0, "only dirty pages are reserved");
            fl | PG_RESERVED
        });
        let added = f.counts().reserved - before;
        self.devices[device.index()].space.reserved += added;
    }

    /// A write-back of `file`'s pages `first..end` completed: their blocks
    /// are allocated, their reservations used.
    pub(crate) fn space_written(&mut self, file: FileId, first: PageIndex, end: PageIndex) {
        let f = &mut self.cache.files[file.index()];
        f.disk_pages = f.disk_pages.max(end);
        let device = f.device;
        let before = f.counts().reserved;
        if before > 0 {
            f.update(first, end, |fl| fl & !PG_RESERVED);
        }
        let used = before - f.counts().reserved;
        let space = &mut self.devices[device.index()].space;
        space.reserved -= used;
        space.allocated_since += used;
    }

    /// `file`'s reserved pages among `first..end` that are no longer dirty
    /// nor under write-back (discarded: truncated, punched, unlinked) give
    /// their reservations back.
    pub(crate) fn unreserve_discarded(&mut self, file: FileId, first: PageIndex, end: PageIndex) {
        let f = &mut self.cache.files[file.index()];
        let before = f.counts().reserved;
        if before == 0 {
            return;
        }
        f.update(first, end, |fl| {
            if fl & (PG_DIRTY | PG_WRITEBACK) == 0 {
                fl & !PG_RESERVED
            } else {
                fl
            }
        });
        let freed = before - f.counts().reserved;
        let device = f.device;
        self.devices[device.index()].space.reserved -= freed;
    }

    /// The backing file was cut to `len` bytes: pages past it are no
    /// longer on it.
    pub(crate) fn space_truncated(&mut self, file: FileId, len: u64) {
        let f = &mut self.cache.files[file.index()];
        f.disk_pages = f.disk_pages.min(len.div_ceil(PAGE_SIZE));
    }
}
