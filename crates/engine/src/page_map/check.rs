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
//! One walk over the engine's cached pages, in its order (so the first
//! fault found is the same in every run), looking each up in the map:
//! every page the map holds is met at most once, so when the pages met
//! are as many as the map holds, it holds no other (a). Linear in the
//! cached pages and the frames.

use super::shard::Shards;
use super::PageMap;
use crate::engine::Engine;
use crate::ids::FileId;
use crate::page_cache::MAX_FILE_PAGES;

impl PageMap {
    /// Panics, saying what is wrong, where the map and the engine differ.
    /// Call under the engine's lock, between actions carried out.
    pub fn check(&self, engine: &Engine) {
        let (mut mapped, mut overwritable) = (0, 0);
        for file in (0..engine.file_ids_end()).map(FileId) {
            for run in engine.page_runs(file, 0, MAX_FILE_PAGES) {
                for (i, page) in (run.first..run.end).enumerate() {
                    let frame = run.frame + i as u32;
                    let at = self.shards.read(Shards::of(file, page));
                    let Some(&found) = at.get(&(file.0, page)) else {
                        assert!(
                            !run.dirty || run.locked,
                            "page {page} of {file:?} is dirty (frame {frame}) but not mapped"
                        );
                        continue;
                    };
                    mapped += 1;
                    assert_eq!(
                        found, frame,
                        "page {page} of {file:?} is mapped at the engine's frame"
                    );
                    assert!(
                        run.valid,
                        "page {page} of {file:?} is mapped while being read"
                    );
                    if self.overwritable(frame) {
                        assert!(
                            run.dirty || engine.write_held(file, page),
                            "page {page} of {file:?} is overwritable (frame {frame}) but not dirty"
                        );
                        overwritable += 1;
                    }
                }
            }
        }
        assert_eq!(self.len(), mapped, "every mapped page is cached");
        let bits = self.bits.iter().filter(|b| b.get()).count();
        assert_eq!(
            bits, overwritable,
            "every overwritable frame holds a mapped page"
        );
    }
}
