//! A task's state: the operation it is in the middle of, what it waits
//! for, and its own throttle and readahead state (task/).

use crate::action::StallReason;
use crate::balance_dirty::task_dirty::TaskDirty;
use crate::direct::phase::DirectPhase;
use crate::ids::{DeviceId, FileId, HandleId, PageIndex, TaskId, WbId};
use crate::time::Instant;
use crate::write_path::flags::WriteFlags;

/// Most tasks (callers) one engine serves (the table is dense).
pub const MAX_TASKS: usize = 1 << 16;

/// What a task is in the middle of.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Op {
    Idle,
    Write(WriteOp),
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
        /// Under `backlog_throttle = flush-all`, the backlog item a large
        /// cut's producer waits for (backlog/).
        flush_until: Option<u64>,
        /// The backing file's length change it waits for (backing_len/).
        resize: Option<u64>,
    },
    /// Dropping cached pages `first..end` of a file (backlog/).
    Invalidate {
        file: FileId,
        first: PageIndex,
        end: PageIndex,
    },
    /// Queueing the release of an unlinked file (backlog/); with
    /// flush-all, the last item that must be done first.
    Unlink {
        file: FileId,
        flush_until: Option<u64>,
    },
    DirectWrite {
        handle: HandleId,
        offset: u64,
        end: u64,
        phase: DirectPhase,
    },
}

/// A buffered write's progress (write_path/), kept in its task's
/// operation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct WriteOp {
    pub handle: HandleId,
    /// First byte of the write.
    pub start: u64,
    /// Next byte to copy.
    pub pos: u64,
    pub end: u64,
    pub flags: WriteFlags,
    /// `dontcache_flush = inline`: the submission of what was written
    /// (a sync op that only issues), once the bytes are in.
    pub flush_op: Option<u64>,
    /// The throttle asked to look again after the pause.
    pub throttle_again: bool,
    /// 2007-style throttle: waiting for own writeback since this count.
    pub wait_2007: Option<u64>,
    /// Too little free space was found once: the device's dirty pages
    /// were written back to learn the real free space (space/).
    pub space_flushed: bool,
}

impl WriteOp {
    /// A write of bytes `start..end` through `handle`, nothing done yet.
    pub fn new(handle: HandleId, (start, end): (u64, u64), flags: WriteFlags) -> WriteOp {
        WriteOp {
            handle,
            start,
            pos: start,
            end,
            flags,
            flush_op: None,
            throttle_again: false,
            wait_2007: None,
            space_flushed: false,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Task {
    pub dirty: TaskDirty,
    pub op: Op,
    /// The stall the task is in, and when it began.
    pub stall: Option<(StallReason, Instant)>,
    /// Where the task's last read ended, for readahead.
    pub last_read: Option<(FileId, PageIndex)>,
    /// The file this task's readahead read a window of last: Linux
    /// marks a page of each window it reads ahead (PG_readahead) and
    /// reads ahead asynchronously only when a reader reaches one, so a
    /// reader whose pages were written, not read, never reads ahead.
    pub ra_file: Option<FileId>,
    /// The read in progress has marked its pages accessed below this one
    /// (page_cache/lru.rs), so a read that waits and resumes counts once.
    pub read_marked: Option<(FileId, PageIndex)>,
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
    /// This task's direct write requests are all done.
    Direct(TaskId),
    /// The device's backlog went under its low watermark (or, flush-all,
    /// finished an item).
    Backlog(DeviceId),
    /// The device's free space was reported (space/).
    Space(DeviceId),
}
