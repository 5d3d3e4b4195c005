//! A task's own dirty-throttle state: pages dirtied since its last check,
//! and how many it may dirty before the next (balance_dirty/ decides).

use crate::time::Instant;

/// Pages a new task may dirty before its first check.
pub const INITIAL_DIRTIED_PAUSE: u64 = 32;
/// Our cap on pages between checks (16 MiB), which bounds how far one task
/// can overshoot the hard limit. Linux has no explicit cap; its values
/// stay below this at realistic bandwidths.
pub const MAX_DIRTIED_PAUSE: u64 = 4096;

/// Per-task throttle state (Linux keeps it in task_struct).
#[derive(Clone, Debug)]
pub struct TaskDirty {
    /// Pages dirtied since the last check.
    pub nr_dirtied: u64,
    /// Check again after this many pages.
    pub nr_dirtied_pause: u64,
    /// Virtual time of the end of the last pause; think time is measured from it.
    pub dirty_paused_when: Option<Instant>,
    /// 2007 mode: pages dirtied since the last check. Linux kept this per
    /// CPU; here each task counts as running on its own CPU.
    pub ratelimit_2007: u64,
}

impl Default for TaskDirty {
    fn default() -> Self {
        TaskDirty {
            nr_dirtied: 0,
            nr_dirtied_pause: INITIAL_DIRTIED_PAUSE,
            dirty_paused_when: None,
            ratelimit_2007: 0,
        }
    }
}

impl TaskDirty {
    /// The task newly dirtied `pages` pages: both throttles count them.
    #[inline]
    pub fn dirtied(&mut self, pages: u64) {
        self.nr_dirtied += pages;
        self.ratelimit_2007 += pages;
    }
}
