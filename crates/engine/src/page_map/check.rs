//! The map checked against the engine: the simulator's VOPR runs it with
//! the engine's invariants (its check "page_map"), the engine's tests
//! after their steps.
//!
//! - (a) every mapped page is cached, valid, at the frame the engine says;
//! - (b) every overwritable frame is the frame of a mapped page the engine
//!   holds dirty (dirtied since a write request last took it: a page
//!   under writeback may be dirty again, in place under stable_writes =
//!   none, in a copy of its own under snapshot);
//! - (c) every dirty page is mapped, while no page is locked (a deferred
//!   copy-in maps its pages after the runtime's lock is let go). Clean
//!   pages may be missing: a page read ahead enters when a read of it is
//!   done (rule 2).

use super::PageMap;
use crate::engine::Engine;

impl PageMap {
    /// Panics, saying what is wrong, where the map and the engine differ.
    /// Call under the engine's lock, between actions carried out.
    pub fn check(&self, engine: &Engine) {
        let mut dirty = 0;
        let mut overwritable = 0;
        for (file, page, frame) in self.pages() {
            let run = engine.page_runs(file, page, page + 1).next();
            let Some(run) = run else {
                panic!("page {page} of {file:?} is mapped (frame {frame}) but not cached");
            };
            assert!(
                run.valid,
                "page {page} of {file:?} is mapped while being read"
            );
            assert_eq!(
                run.frame, frame,
                "page {page} of {file:?} is mapped at the engine's frame"
            );
            dirty += run.dirty as u64;
            if self.overwritable(frame) {
                assert!(
                    run.dirty,
                    "page {page} of {file:?} is overwritable (frame {frame}) but not dirty"
                );
                overwritable += 1;
            }
        }
        let bits = self.bits.iter().filter(|b| b.get()).count();
        assert_eq!(
            bits, overwritable,
            "every overwritable frame holds a mapped page"
        );
        if !engine.pages_locked() {
            assert_eq!(dirty, engine.nr_dirty(), "every dirty page is mapped");
        }
    }
}
