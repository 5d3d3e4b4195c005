//! Tasks and stalls: a caller's operation runs until it must wait; the
//! engine records why (a [`StallReason`]) and since when, hands back a
//! [`Step::Sleep`] with a bound, and counts the wait when the task
//! resumes. Events (I/O done, memory freed, a sync finished) wake only the
//! tasks waiting for them, through [`Action::Wake`].

pub(crate) mod state;

use crate::action::{Action, Stall, StallReason, Step};
use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::TaskId;
use crate::time::Instant;

pub(crate) use crate::task::state::{Op, Task, WaitKey};

use crate::action::EVENT_WAIT_MAX_NS;

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
                let f = &self.cache.files[file.index()];
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
