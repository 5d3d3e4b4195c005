//! Tasks and stalls: a caller's operation runs until it must wait; the
//! engine records why (a [`StallReason`]) and since when, hands back a
//! [`Step::Sleep`] with a bound, and counts the wait when the task
//! resumes. Events (I/O done, memory freed, a sync finished) wake only the
//! tasks waiting for them, through [`Action::Wake`].

pub(crate) mod state;

use crate::action::{Action, Stall, StallReason, Step, EVENT_WAIT_MAX_NS};
use crate::balance_dirty::task_dirty::TaskDirty;
use crate::direct::phase::DirectPhase;
use crate::error::EngineError;
use crate::ids::TaskId;
use crate::time::Instant;
use std::collections::VecDeque;
use std::ops::{Index, IndexMut};

pub(crate) use crate::task::state::{Op, Task, WaitKey, WriteOp, MAX_TASKS};

/// The tasks, and which wait for what.
#[derive(Debug, Default)]
pub(crate) struct Tasks {
    all: Vec<Task>,
    /// Tasks waiting for an event, with the event.
    waiting: Vec<(TaskId, WaitKey)>,
}

impl Index<usize> for Tasks {
    type Output = Task;
    fn index(&self, i: usize) -> &Task {
        &self.all[i]
    }
}

impl IndexMut<usize> for Tasks {
    fn index_mut(&mut self, i: usize) -> &mut Task {
        &mut self.all[i]
    }
}

impl Tasks {
    /// The progress of `task`'s write.
    pub fn write_op(&mut self, task: TaskId) -> &mut WriteOp {
        match &mut self.all[task.index()].op {
            Op::Write(op) => op,
            _ => unreachable!("a write path step on a task that is not writing"),
        }
    }

    /// Moves `task`'s direct write on to its next phase.
    pub fn set_direct_phase(&mut self, task: TaskId, next: DirectPhase) {
        if let Op::DirectWrite { phase, .. } = &mut self.all[task.index()].op {
            *phase = next;
        }
    }

    pub fn len(&self) -> usize {
        self.all.len()
    }

    pub fn get(&self, i: usize) -> Option<&Task> {
        self.all.get(i)
    }

    /// A new idle task.
    pub fn add(&mut self) -> TaskId {
        assert!(self.all.len() < MAX_TASKS, "too many tasks");
        self.all.push(Task {
            dirty: TaskDirty::default(),
            op: Op::Idle,
            stall: None,
            last_read: None,
            ra_file: None,
            read_marked: None,
        });
        TaskId((self.all.len() - 1) as u32)
    }

    pub fn task_mut(&mut self, task: TaskId) -> Result<&mut Task, EngineError> {
        self.all
            .get_mut(task.index())
            .ok_or(EngineError::BadTask(task))
    }

    /// Starts an operation for `task`, which must be idle.
    pub fn begin(&mut self, task: TaskId, op: Op) -> Result<(), EngineError> {
        let t = self.task_mut(task)?;
        if t.op != Op::Idle {
            return Err(EngineError::Busy(task));
        }
        t.op = op;
        Ok(())
    }

    /// Records that `task` must wait, and returns the step telling it so.
    pub fn stall(
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
        let t = &mut self.all[task.index()];
        assert!(t.stall.is_none(), "task already stalled");
        t.stall = Some((stall.reason, now));
        if let Some(key) = key {
            self.waiting.push((task, key));
        }
        Step::Sleep(stall)
    }

    /// Makes `task` wait for an event, re-checking after at most
    /// EVENT_WAIT_MAX_NS in case the event is late.
    pub fn wait_for(
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
    pub fn wake(&mut self, key: WaitKey, out: &mut VecDeque<Action>) {
        self.waiting.retain(|&(task, k)| {
            if k == key {
                out.push_back(Action::Wake(task));
                false
            } else {
                true
            }
        });
    }

    /// `task` is running again: it waits for nothing; returns the stall
    /// it was in, with its start.
    pub fn resumed(&mut self, task: TaskId) -> Option<(StallReason, Instant)> {
        self.waiting.retain(|&(t, _)| t != task);
        self.all[task.index()].stall.take()
    }

    /// Ends the task's operation.
    pub fn finish(
        &mut self,
        task: TaskId,
        result: Result<Step, EngineError>,
    ) -> Result<Step, EngineError> {
        self.all[task.index()].op = Op::Idle;
        result
    }
}
