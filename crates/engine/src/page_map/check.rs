//! The map checked against the engine: the simulator's VOPR runs it with
//! the engine's invariants (its check "page_map"), the engine's tests
//! after their steps.
//!
//! - (a) every mapped page is cached, valid, at the frame the engine says;
//! - (b) every overwritable frame is the frame of a mapped page that no
//!   write request has taken since it was dirtied: the engine holds it
//!   dirty (under writeback as well, it was dirtied again: in place under
//!   stable_writes = none, in a copy of its own under snapshot), or its
//!   write-back is held back and not yet handed over (rule 5);
//! - (c) every dirty page is mapped but while it is locked (a deferred
//!   copy-in maps its pages after the runtime's lock is let go). Clean
//!   pages may be missing: a page read ahead enters when a read of it is
//!   done (rule 2).
//!
//! Two linear passes, no lookup by page: the engine's cached pages are
//! laid out by frame (a table the size of the cache, kept between calls;
//! only the slots the last check filled are emptied), then every mapped
//! page is met at its frame in that table, shard by shard, each shard
//! locked once. (a) holds when each mapped page finds itself, valid, at
//! its frame; (c) when the mapped pages that are dirty and unlocked are
//! as many as the engine has (each page is mapped at most once); on a
//! fault of (c) a slow walk names the first missing page in the engine's
//! order. The set bits are counted as the keeper sets them, so the cost
//! is linear in the cached pages, not in the frames (a cache of 1 GiB has
//! 262,144), and the simulator can check every 64th event.

use super::PageMap;
use crate::engine::Engine;
use crate::ids::{FileId, PageIndex};
use crate::page_cache::{PageRun, MAX_FILE_PAGES};
use std::sync::atomic::Ordering;

/// The engine's pages by frame, and the frames filled.
#[derive(Debug, Default)]
pub(super) struct FrameTable {
    slots: Vec<FrameSlot>,
    filled: Vec<u32>,
}

/// What the engine holds in one frame: its page and the page's state.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct FrameSlot {
    /// The file's id plus one; 0 for a frame no cached page is in.
    file: u32,
    page: PageIndex,
    dirty: bool,
    valid: bool,
    locked: bool,
}

impl PageMap {
    /// Panics, saying what is wrong, where the map and the engine differ.
    /// Call under the engine's lock, between actions carried out.
    pub fn check(&self, engine: &Engine) {
        let mut guard = self.check_table.lock().unwrap_or_else(|p| p.into_inner());
        let FrameTable { slots, filled } = &mut *guard;
        for &frame in filled.iter() {
            slots[frame as usize] = FrameSlot::default();
        }
        filled.clear();
        slots.resize(self.bits.len(), FrameSlot::default());
        let must_map = lay_out(engine, slots, filled);
        let table = &*slots;
        let (mut mapped, mut mapped_dirty, mut overwritable) = (0, 0, 0);
        for shard in self.shards.read_all().iter() {
            for (&(file, page), &frame) in shard.iter() {
                let held = table.get(frame as usize).copied().unwrap_or_default();
                assert!(
                    held.file == file + 1 && held.page == page,
                    "page {page} of {:?} is mapped at frame {frame}, the engine's frame of {}",
                    FileId(file),
                    describe(held),
                );
                assert!(
                    held.valid,
                    "page {page} of {:?} is mapped while being read",
                    FileId(file)
                );
                mapped += 1;
                mapped_dirty += (held.dirty && !held.locked) as usize;
                if self.overwritable(frame) {
                    assert!(
                        held.dirty || engine.write_held(FileId(file), page),
                        "page {page} of {:?} is overwritable (frame {frame}) but not dirty",
                        FileId(file)
                    );
                    overwritable += 1;
                }
            }
        }
        if mapped_dirty != must_map {
            self.name_unmapped_dirty(engine);
        }
        assert_eq!(
            mapped_dirty, must_map,
            "every dirty page is mapped ({mapped} mapped)"
        );
        let bits = self.bits_set.load(Ordering::Relaxed);
        assert_eq!(
            bits, overwritable,
            "every overwritable frame holds a mapped page"
        );
    }

    /// Panics naming the first dirty, unlocked page (in the engine's
    /// order) that is not mapped, if there is one.
    fn name_unmapped_dirty(&self, engine: &Engine) {
        for_each_page(engine, |file, page, frame, run| {
            let dirty = run.dirty && !run.locked;
            assert!(
                !dirty || self.frame(file, page).is_some(),
                "page {page} of {file:?} is dirty (frame {frame}) but not mapped"
            );
        });
    }
}

/// Lays the engine's cached pages out by frame in `table`; the number of
/// dirty, unlocked pages (those that must be mapped).
fn lay_out(engine: &Engine, table: &mut [FrameSlot], filled: &mut Vec<u32>) -> usize {
    let mut must_map = 0;
    for_each_page(engine, |file, page, frame, run| {
        let slot = table.get_mut(frame as usize);
        let slot = slot.unwrap_or_else(|| {
            panic!("frame {frame} of page {page} of {file:?} beyond the map's frames")
        });
        assert!(
            slot.file == 0,
            "frame {frame} holds page {page} of {file:?} and {}",
            describe(*slot)
        );
        filled.push(frame);
        *slot = FrameSlot {
            file: file.0 + 1,
            page,
            dirty: run.dirty,
            valid: run.valid,
            locked: run.locked,
        };
        must_map += (run.dirty && !run.locked) as usize;
    });
    must_map
}

/// Calls `f` for every cached page in the engine's order: file, page,
/// frame and the page's run.
fn for_each_page(engine: &Engine, mut f: impl FnMut(FileId, PageIndex, u32, &PageRun)) {
    for file in (0..engine.file_ids_end()).map(FileId) {
        for run in engine.page_runs(file, 0, MAX_FILE_PAGES) {
            for (i, page) in (run.first..run.end).enumerate() {
                f(file, page, run.frame + i as u32, &run);
            }
        }
    }
}

fn describe(slot: FrameSlot) -> String {
    match slot.file.checked_sub(1) {
        Some(file) => format!("page {} of {:?}", slot.page, FileId(file)),
        None => "no page".to_string(),
    }
}
