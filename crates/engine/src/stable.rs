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

use crate::action::Action;
use crate::engine::Engine;
use crate::ids::{FileId, IoId, PageIndex};
use crate::page_cache::PG_WRITEBACK;
use crate::reclaim::RECLAIM_BATCH;
use crate::task::WaitKey;

impl Engine {
    /// Gives pages `first..end` of `file`, which lie in one run under
    /// writeback, frames of their own with a copy of their content. Returns
    /// the end of the pages copied (memory may allow fewer than asked), or
    /// None when no frame is free even after reclaim.
    pub(crate) fn snapshot_pages(
        &mut self,
        file: FileId,
        first: PageIndex,
        end: PageIndex,
    ) -> Option<PageIndex> {
        let (start, run) = self.cache.files[file.index()]
            .run_at(first)
            .expect("the page to copy is cached");
        assert!(run.flags & PG_WRITEBACK != 0 && end <= start + run.len);
        let want = end - first;
        if self.cache.free_pages() < want {
            self.cache.shrink(
                (want - self.cache.free_pages()).max(RECLAIM_BATCH),
                &mut self.actions,
            );
        }
        let room = want.min(self.cache.free_pages());
        if room == 0 {
            return None;
        }
        let (to, count) = self
            .cache
            .frames
            .alloc(room)
            .expect("frames are free below the budget");
        self.cache.frame_notes.clear(to, count);
        let from = run.frame + (first - start) as u32;
        let id = self.write_in_flight(file, first);
        self.io
            .inflight
            .get_mut(&id)
            .expect("in flight")
            .snapshot_frames
            .push((from, count));
        self.cache.nr_snapshot += count;
        self.cache.files[file.index()].move_frames(first, first + count, to);
        self.actions.push_back(Action::CopyFrames {
            from,
            to,
            count: count as u32,
        });
        let device = self.cache.files[file.index()].device;
        self.devices[device.index()].stats.snapshot_pages += count;
        Some(first + count)
    }

    /// The write in flight that carries `page` of `file` (one exists for
    /// every page under writeback).
    fn write_in_flight(&self, file: FileId, page: PageIndex) -> IoId {
        *self.cache.files[file.index()]
            .inflight_writes
            .iter()
            .find(|id| {
                let req = &self.io.inflight[*id].req;
                (req.first_page..req.first_page + req.pages as u64).contains(&page)
            })
            .expect("a page under writeback has its write in flight")
    }

    /// A write completed: the frames it kept for itself are free again.
    pub(crate) fn free_snapshot_frames(&mut self, frames: &[(u32, u64)]) {
        for &(first, count) in frames {
            self.cache.frames.free(first, count);
            self.cache.nr_snapshot -= count;
        }
        if !frames.is_empty() {
            self.wake(WaitKey::Memory);
        }
    }
}
