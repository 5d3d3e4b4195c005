//! The CLOCK queue of clean pages, as ranges (reclaim/ walks it).

use crate::ids::{FileId, PageIndex};
use std::collections::VecDeque;

/// The CLOCK queue: ranges of pages in the order they became clean
/// (reclaim/). A page is covered by an entry while it has PG_IN_LRU, so
/// each clean page is queued once; entries for pages that left the cache
/// otherwise are dropped when the hand reaches them.
#[derive(Clone, Debug, Default)]
pub struct ReclaimQueue {
    queue: VecDeque<(FileId, PageIndex, PageIndex)>,
}

impl ReclaimQueue {
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn push_back(&mut self, file: FileId, first: PageIndex, end: PageIndex) {
        debug_assert!(first < end);
        self.queue.push_back((file, first, end));
    }

    /// As `push_back`, but extends the last entry if it was queued at or
    /// after position `since` and ends at `first` of the same file.
    pub fn push_back_joining(
        &mut self,
        file: FileId,
        first: PageIndex,
        end: PageIndex,
        since: usize,
    ) {
        debug_assert!(first < end);
        if self.queue.len() > since {
            if let Some(last) = self.queue.back_mut() {
                if last.0 == file && last.2 == first {
                    last.2 = end;
                    return;
                }
            }
        }
        self.queue.push_back((file, first, end));
    }

    /// Puts back the rest of an entry the hand stopped in.
    pub fn push_front(&mut self, file: FileId, first: PageIndex, end: PageIndex) {
        debug_assert!(first < end);
        self.queue.push_front((file, first, end));
    }

    pub fn pop(&mut self) -> Option<(FileId, PageIndex, PageIndex)> {
        self.queue.pop_front()
    }

    pub fn entries(&self) -> impl Iterator<Item = (FileId, PageIndex, PageIndex)> + '_ {
        self.queue.iter().copied()
    }

    /// Keeps only the entries `keep` says still cover something.
    pub fn retain(&mut self, keep: impl FnMut(&(FileId, PageIndex, PageIndex)) -> bool) {
        self.queue.retain(keep);
    }
}
