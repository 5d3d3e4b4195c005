//! Acting for a caller: a front end that serves many processes from a few
//! threads (the FUSE mount) runs each request as its caller, so the
//! engine's per-task state — the dirty throttle's pauses and the pages a
//! task may dirty before its next check, the readahead position — belongs
//! to the process thread that asked, as it does in Linux, and not to
//! whichever serving thread took the request. A database's commits then
//! are not paused for a copy's dirtying because both happened to be
//! served by one thread.
//!
//! - [`as_caller`] marks the current thread as acting for a caller id (a
//!   thread id) for the length of a closure.
//! - Each cache keeps a task per caller, at most [`MAX_CALLER_TASKS`];
//!   past that the least recently used idle one is given to the new
//!   caller (its throttle state is a stranger's for a while: bounded
//!   memory over precision).
//! - A caller's task that is busy (the same caller has another request in
//!   flight: asynchronous I/O) is not shared: that request runs on the
//!   serving thread's own task, as without a caller.

use std::cell::Cell;
use std::collections::HashMap;
use wb_engine::{Engine, TaskId};

/// Tasks a cache keeps for callers.
pub const MAX_CALLER_TASKS: usize = 1024;

thread_local! {
    /// The caller this thread acts for; 0 for none.
    static CALLER: Cell<u32> = const { Cell::new(0) };
}

/// Runs `f` with the current thread acting for `caller` (a thread id, as
/// FUSE reports the requesting process's; 0 means none): the cache's
/// operations in `f` use that caller's task.
pub fn as_caller<R>(caller: u32, f: impl FnOnce() -> R) -> R {
    struct Restore(u32);
    impl Drop for Restore {
        fn drop(&mut self) {
            CALLER.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CALLER.with(|c| c.replace(caller)));
    f()
}

/// The caller the current thread acts for, if any.
pub(crate) fn current() -> Option<u32> {
    Some(CALLER.with(Cell::get)).filter(|&c| c != 0)
}

/// A cache's tasks by caller.
#[derive(Default)]
pub(crate) struct CallerTasks {
    tasks: HashMap<u32, (TaskId, u64)>,
    /// Counts lookups, for least-recently-used.
    clock: u64,
}

impl CallerTasks {
    /// The caller's task if it is idle, or a new (or recycled) one, and
    /// whether it is a new engine task; None when its task is busy.
    pub fn task(&mut self, engine: &mut Engine, caller: u32) -> Option<(TaskId, bool)> {
        self.clock += 1;
        let now = self.clock;
        if let Some((task, used)) = self.tasks.get_mut(&caller) {
            *used = now;
            return engine.task_is_idle(*task).then_some((*task, false));
        }
        let (task, new) = if self.tasks.len() < MAX_CALLER_TASKS {
            (engine.add_task(), true)
        } else {
            let (&old, &(task, _)) = self
                .tasks
                .iter()
                .filter(|(_, (t, _))| engine.task_is_idle(*t))
                .min_by_key(|(_, (_, used))| *used)?;
            self.tasks.remove(&old);
            (task, false)
        };
        self.tasks.insert(caller, (task, now));
        Some((task, new))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wb_engine::{Config, Instant};

    #[test]
    fn each_caller_has_its_task_and_the_oldest_is_recycled_past_the_bound() {
        let mut engine = Engine::new(Config::default(), Instant(0));
        let mut callers = CallerTasks::default();
        let (a, new_a) = callers.task(&mut engine, 7).unwrap();
        let (b, new_b) = callers.task(&mut engine, 8).unwrap();
        assert!(new_a && new_b && a != b);
        assert_eq!(callers.task(&mut engine, 7), Some((a, false)), "kept");
        for caller in 100..100 + MAX_CALLER_TASKS as u32 - 2 {
            assert!(callers.task(&mut engine, caller).unwrap().1);
        }
        // Full: caller 8 was used least recently; its task goes to the new one.
        assert_eq!(callers.task(&mut engine, 5000), Some((b, false)));
        assert_eq!(callers.tasks.len(), MAX_CALLER_TASKS);
    }

    #[test]
    fn as_caller_sets_and_restores_the_thread_caller() {
        assert_eq!(current(), None);
        as_caller(42, || {
            assert_eq!(current(), Some(42));
            as_caller(0, || assert_eq!(current(), None));
            assert_eq!(current(), Some(42));
        });
        assert_eq!(current(), None);
    }
}
