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

use crate::error::EngineError;
use crate::ids::{PageIndex, PAGE_SIZE};
use crate::page_cache::{CachedFile, PG_DIRTY, PG_RESERVED, PG_WRITEBACK};
use crate::time::{Instant, NS_PER_MS};
use state::DeviceSpace;

/// How often the runtime is asked for the free space of a device it
/// reported before.
pub const STATFS_INTERVAL_NS: u64 = 1_000 * NS_PER_MS;
/// Longest a writer waits for the write-back that learns the real free
/// space before the space is asked for anyway.
pub const SPACE_FLUSH_MAX_NS: u64 = 30_000 * NS_PER_MS;

/// What a write of bytes `start..end` to `f` finds on its device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Room {
    /// It fits, or the device has no limit.
    Enough,
    /// Someone's write-back for space is under way: wait for its report.
    WaitForReport,
    /// Too little room: write back everything dirty on the device first
    /// (the reservations may be pessimistic), then look again.
    FlushFirst,
    /// Too little room even after that write-back: the write fails
    /// (`EngineError::NoSpace`, in bytes).
    NoSpace(EngineError),
}

impl DeviceSpace {
    /// The runtime's report of the free space (statvfs's f_bavail).
    pub(crate) fn reported(&mut self, now: Instant, free_bytes: u64) {
        self.free_pages = Some(free_bytes / PAGE_SIZE);
        self.allocated_since = 0;
        self.statfs_asked = false;
        self.next_statfs = Some(now + STATFS_INTERVAL_NS);
    }

    /// The runtime could not learn the free space: no limit until a
    /// report comes.
    pub(crate) fn unknown(&mut self) {
        self.free_pages = None;
        self.statfs_asked = false;
        self.flush_started = None;
    }

    /// Whether a write of bytes `start..end` of `f` fits; `flushed`: the
    /// writer has had the device written back for it already.
    pub(crate) fn room_for(&self, f: &CachedFile, (start, end): (u64, u64), flushed: bool) -> Room {
        let Some(room) = self.room() else {
            return Room::Enough;
        };
        let need = pages_to_reserve(f, start, end);
        if need <= room {
            Room::Enough
        } else if self.flush_started.is_some() || self.statfs_asked {
            Room::WaitForReport
        } else if flushed {
            Room::NoSpace(EngineError::NoSpace {
                needed_bytes: need * PAGE_SIZE,
                room_bytes: room * PAGE_SIZE,
            })
        } else {
            Room::FlushFirst
        }
    }

    /// After I/O completes and on timers: whether to ask for the free
    /// space now. A space flush whose write-back is done (`idle`: nothing
    /// dirty or in flight on the device), or that took
    /// `SPACE_FLUSH_MAX_NS`, asks; so does a device whose last report is
    /// `STATFS_INTERVAL_NS` old while pages hold reservations.
    pub(crate) fn ask_now(&mut self, now: Instant, idle: impl FnOnce() -> bool) -> bool {
        // Called after every completion: nothing to look at, most of the time.
        if self.flush_started.is_none() && self.next_statfs.is_none_or(|at| now < at) {
            return false;
        }
        let flush_done = self
            .flush_started
            .is_some_and(|at| idle() || now.since_ns(at) >= SPACE_FLUSH_MAX_NS);
        let due = self.reserved > 0 && self.next_statfs.is_some_and(|at| now >= at);
        if flush_done {
            self.flush_started = None;
        }
        if (flush_done || due) && !self.statfs_asked {
            self.statfs_asked = true;
            self.next_statfs = None;
            return true;
        }
        false
    }

    /// Pages `first..end` of `f` were just dirtied: those past the
    /// backing file's end get a reservation.
    pub(crate) fn reserve_dirtied(&mut self, f: &mut CachedFile, first: PageIndex, end: PageIndex) {
        if self.free_pages.is_none() {
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
        self.reserved += f.counts().reserved - before;
    }

    /// A write-back of `f`'s pages `first..end` completed: their blocks
    /// are allocated, their reservations used.
    pub(crate) fn written(&mut self, f: &mut CachedFile, first: PageIndex, end: PageIndex) {
        f.disk_pages = f.disk_pages.max(end);
        let before = f.counts().reserved;
        if before > 0 {
            f.update(first, end, |fl| fl & !PG_RESERVED);
        }
        let used = before - f.counts().reserved;
        self.reserved -= used;
        self.allocated_since += used;
    }

    /// `f`'s reserved pages among `first..end` that are no longer dirty
    /// nor under write-back (discarded: truncated, punched, unlinked) give
    /// their reservations back.
    pub(crate) fn unreserve_discarded(
        &mut self,
        f: &mut CachedFile,
        first: PageIndex,
        end: PageIndex,
    ) {
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
        self.reserved -= before - f.counts().reserved;
    }
}

/// The backing file of `f` was cut to `len` bytes: pages past it are no
/// longer on it.
pub(crate) fn truncated(f: &mut CachedFile, len: u64) {
    f.disk_pages = f.disk_pages.min(len.div_ceil(PAGE_SIZE));
}

/// Pages of `f`'s bytes `start..end` a write must reserve: those past the
/// backing file's end not reserved already.
fn pages_to_reserve(f: &CachedFile, start: u64, end: u64) -> u64 {
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
