//! Tasks and stalls: a caller's operation runs until it must wait; the
//! engine records why (a [`StallReason`]) and since when, hands back a
//! [`Step::Sleep`] with a bound, and counts the wait when the task
//! resumes. Events (I/O done, memory freed, a sync finished) wake only the
//! tasks waiting for them, through [`Action::Wake`].

use crate::action::{Action, Stall, StallReason, Step};
use crate::balance_dirty::TaskDirty;
use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::{FileId, HandleId, PageIndex, TaskId, WbId};
use crate::time::Instant;

use crate::action::EVENT_WAIT_MAX_NS;

/// Most tasks (callers) one engine serves (the table is dense).
pub const MAX_TASKS: usize = 1 << 16;

/// What a task is in the middle of.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Op {
    Idle,
    Write {
        handle: HandleId,
        /// First byte of the write.
        start: u64,
        /// Next byte to copy.
        pos: u64,
        end: u64,
        flags: crate::write_path::WriteFlags,
        /// `dontcache_flush = inline`: the submission of what was written
        /// (a sync op that only issues), once the bytes are in.
        flush_op: Option<u64>,
        /// The throttle asked to look again after the pause.
        throttle_again: bool,
        /// 2007-style throttle: waiting for own writeback since this count.
        wait_2007: Option<u64>,
        /// Too little free space was found once: the device's dirty pages
        /// were written back to learn the real free space (space.rs).
        space_flushed: bool,
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
        /// Under `backlog_throttle = flush-all`, the backlog item a large
        /// cut's producer waits for (backlog/).
        flush_until: Option<u64>,
        /// The backing file's length change it waits for (backing_len.rs).
        resize: Option<u64>,
    },
    /// Dropping cached pages `first..end` of a file (invalidate.rs).
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
        phase: crate::direct::DirectPhase,
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
    /// The file this task's readahead read a window of last: Linux
    /// marks a page of each window it reads ahead (PG_readahead) and
    /// reads ahead asynchronously only when a reader reaches one, so a
    /// reader whose pages were written, not read, never reads ahead.
    pub ra_file: Option<FileId>,
    /// The read in progress has marked its pages accessed below this one
    /// (lru.rs), so a read that waits and resumes counts once.
    pub read_marked: Option<(FileId, PageIndex)>,
    /// 2007 mode: pages dirtied since the last check. Linux kept this per
    /// CPU; here each task counts as running on its own CPU.
    pub ratelimit_2007: u64,
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
    Backlog(crate::ids::DeviceId),
    /// The device's free space was reported (space.rs).
    Space(crate::ids::DeviceId),
}

impl Engine {
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
        assert!(
            stall.until.since_ns(now) <= stall.reason.max_sleep_ns(),
            "a {} sleep within its bound",
            stall.reason.name()
        );
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
            throttle: None,
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
            if let Some(file) = self.op_file(task) {
                let f = &self.files[file.index()];
                self.wbs[f.wb.index()].stalls[reason.index()].record(waited);
                if reason == StallReason::DirtyThrottle {
                    self.devices[f.device.index()].stats.throttle.record(waited);
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
            Op::Invalidate { .. } => self.continue_invalidate(now, task),
            Op::Unlink { .. } => self.continue_unlink(now, task),
            Op::DirectWrite { .. } => self.continue_direct(now, task),
        }
    }

    /// The file the task's operation is on, if it is on one file.
    fn op_file(&self, task: TaskId) -> Option<crate::ids::FileId> {
        let handle = match self.tasks[task.index()].op {
            Op::Write { handle, .. } | Op::Read { handle, .. } | Op::DirectWrite { handle, .. } => {
                handle
            }
            _ => return None,
        };
        self.handle(handle).ok().map(|h| h.file)
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
}
