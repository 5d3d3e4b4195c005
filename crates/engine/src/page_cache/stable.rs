//! Stable pages: what a writer does with a page under writeback
//! (Linux's stable_writes, Wong 2013), per device (`stable_writes`):
//!
//! - `none`: it modifies the page in place; the page is dirty again, so
//!   its final content is written once more (the write in flight may carry
//!   a mix, harmless where the device does not checksum data in flight);
//! - `wait`: it waits for the page's writeback to end (stall `stable_page`,
//!   write_path/), as every Linux writer did from 3.0 to 3.9;
//! - `snapshot` (here): copy on write. The writer's pages get fresh frames
//!   holding a copy of their content (`Action::CopyFrames`), and the write
//!   in flight keeps the old frames, which are freed when it completes.
//!   The copies come out of the cache budget; with no frame free even
//!   after reclaim the writer waits for memory (stall `memory`).
//!
//! Differs from Linux: Linux 3.9 bounced whole bios for the few devices
//! that could not wait (ext3 journal data); here any device can choose it.

use super::RECLAIM_BATCH;
use super::{PageCache, PageFlags, PG_READING, PG_WRITEBACK};
use crate::action::{Action, StallReason};
use crate::config::StableWrites;
use crate::ids::{FileId, PageIndex};
use std::collections::VecDeque;

/// What a writer does with a cached run before it modifies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteOver {
    /// Modifies it in place.
    Modify,
    /// Waits for its I/O: a read, or (`wait`) a write in flight.
    Wait(StallReason),
    /// Gets copies of its pages (`snapshot`).
    Copy,
}

/// What a writer does with a run of `flags` on a device whose stable
/// pages are `mode` (the module's docs): a page being read is waited for
/// whatever the mode.
pub(crate) fn write_over(flags: PageFlags, mode: StableWrites) -> WriteOver {
    if flags & PG_READING != 0 {
        return WriteOver::Wait(StallReason::ReadIo);
    }
    match mode {
        _ if flags & PG_WRITEBACK == 0 => WriteOver::Modify,
        // The device checksums data in flight: wait for the write to finish.
        StableWrites::Wait => WriteOver::Wait(StallReason::StablePage),
        StableWrites::Snapshot => WriteOver::Copy,
        _ => WriteOver::Modify,
    }
}

/// Pages a writer got frames of its own for: the frames the write in
/// flight keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Snapshot {
    /// The write's frames (freed when it completes: `free_snapshot`).
    pub from: u32,
    pub count: u64,
}

impl PageCache {
    /// Gives pages `first..end` of `file`, which lie in one run under
    /// writeback, frames of their own with a copy of their content
    /// (`Action::CopyFrames`). Memory may allow fewer pages than asked;
    /// None when no frame is free even after reclaim.
    pub fn snapshot(
        &mut self,
        file: FileId,
        first: PageIndex,
        end: PageIndex,
        out: &mut VecDeque<Action>,
    ) -> Option<Snapshot> {
        let (start, run) = self.files[file.index()]
            .run_at(first)
            .expect("the page to copy is cached");
        assert!(run.flags & PG_WRITEBACK != 0 && end <= start + run.len);
        let want = end - first;
        if self.free_pages() < want {
            self.shrink((want - self.free_pages()).max(RECLAIM_BATCH), out);
        }
        let room = want.min(self.free_pages());
        if room == 0 {
            return None;
        }
        let (to, count) = self
            .frames
            .alloc(room)
            .expect("frames are free below the budget");
        self.frame_notes.clear(to, count);
        let from = run.frame + (first - start) as u32;
        self.nr_snapshot += count;
        self.files[file.index()].move_frames(first, first + count, to);
        out.push_back(Action::CopyFrames {
            file,
            first,
            from,
            to,
            count: count as u32,
        });
        Some(Snapshot { from, count })
    }

    /// A write completed: the frames it kept for itself are free again.
    /// Returns whether there were any.
    pub fn free_snapshot(&mut self, frames: &[(u32, u64)]) -> bool {
        for &(first, count) in frames {
            self.frames.free(first, count);
            self.nr_snapshot -= count;
        }
        !frames.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page_cache::PG_DIRTY;

    #[test]
    fn a_write_over_writeback_follows_the_stable_mode() {
        let wb = PG_WRITEBACK | PG_DIRTY;
        assert_eq!(write_over(PG_DIRTY, StableWrites::Wait), WriteOver::Modify);
        assert_eq!(write_over(wb, StableWrites::None), WriteOver::Modify);
        let stable = WriteOver::Wait(StallReason::StablePage);
        assert_eq!(write_over(wb, StableWrites::Wait), stable);
        assert_eq!(write_over(wb, StableWrites::Snapshot), WriteOver::Copy);
        let read = WriteOver::Wait(StallReason::ReadIo);
        assert_eq!(write_over(PG_READING, StableWrites::Snapshot), read);
    }
}
