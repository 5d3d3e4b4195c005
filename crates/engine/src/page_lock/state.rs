//! A page lock held: pages of a file a writer copies into outside the
//! runtime's lock (page_lock/).

use crate::ids::{FileId, PageIndex, TaskId};

/// Pages `first..end` of `file`, locked by `task`'s write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PageLock {
    pub task: TaskId,
    pub file: FileId,
    pub first: PageIndex,
    pub end: PageIndex,
}
