//! The active and inactive lists: which clean pages reclaim takes first
//! (Linux's two-list LRU: mm/swap.c folio_mark_accessed, mm/vmscan.c
//! shrink_active_list and inactive_is_low).
//!
//! - Clean pages sit on one of two queues of ranges (reclaim/). A page
//!   comes clean onto the inactive queue, or the active one if PG_ACTIVE.
//! - An access (`mark_accessed`: a read the engine serves, a cached read a
//!   runtime reports, a frame note the hand finds) sets PG_REFERENCED the
//!   first time; a second access while the page is cached activates it
//!   (PG_ACTIVE). Writes do not count, as in Linux (FGP_WRITEBEGIN has no
//!   FGP_ACCESSED), nor does a read that only finishes a page the task's
//!   previous read ended in (filemap_read's same-folio rule).
//! - Reclaim frees inactive pages; an active page the hand finds on the
//!   inactive queue (activated there) moves to the active queue.
//! - The active list may hold at most `ratio / (ratio + 1)` of the cache,
//!   ratio = √(10 × cache size in GiB), at least 1 (inactive_is_low): 50 %
//!   below 1 GiB, 80 % at 2 GiB, 90 % at 10 GiB. When the inactive list is
//!   lower, reclaim first deactivates the oldest active pages (they keep
//!   PG_REFERENCED, so one more access brings them back).
//! - A page that comes back soon after its eviction enters active
//!   (workingset.rs).
//!
//! So a stream (each page touched once) cycles through the inactive list
//! and cannot push out pages used repeatedly. With `lru = clock` none of
//! this happens: every access sets PG_REFERENCED, the hand gives such a
//! page a second chance, and the active list is drained.

use super::{PageCache, PG_ACTIVE, PG_IN_LRU, PG_READING, PG_REFERENCED};
use crate::config::Lru;
use crate::ids::{FileId, PageIndex, PAGE_SIZE};

/// Pages deactivated at a time while the inactive list is low.
pub const SHRINK_ACTIVE_BATCH: u64 = 128;

impl PageCache {
    /// An access to cached pages `first..end` of `file` (pages being read
    /// are skipped: their reader marks them once they are valid).
    pub fn mark_accessed(&mut self, file: FileId, first: PageIndex, end: PageIndex) {
        if first >= end {
            return;
        }
        let two_lists = self.lru == Lru::ActiveInactive;
        let f = &mut self.files[file.index()];
        // The common case, a hot page: nothing to change, no split.
        let settled = PG_REFERENCED | if two_lists { PG_ACTIVE } else { 0 };
        if f.runs_over(first, end)
            .all(|(_, r)| r.flags & settled == settled || r.flags & PG_READING != 0)
        {
            return;
        }
        let before = f.counts();
        f.update(first, end, |fl| {
            if fl & PG_READING != 0 {
                fl
            } else if fl & PG_REFERENCED == 0 || !two_lists {
                fl | PG_REFERENCED
            } else if fl & PG_ACTIVE == 0 {
                // The second access: activate.
                (fl | PG_ACTIVE) & !PG_REFERENCED
            } else {
                fl
            }
        });
        let activated = f.counts().active - before.active;
        self.account(file, before);
        self.events.pgactivate += activated;
        self.workingset.age(activated);
    }

    /// Pages just brought into the cache at `first..end` of `file` whose
    /// refault distance says they are part of the working set enter active.
    pub fn activate_refaults(&mut self, file: FileId, first: PageIndex, end: PageIndex) {
        if self.lru != Lru::ActiveInactive {
            return;
        }
        let hot = self.workingset.refault(file, first, end, self.nr_active);
        for (a, b) in hot {
            let f = &mut self.files[file.index()];
            let before = f.counts();
            f.update(a, b, |fl| fl | PG_ACTIVE);
            let activated = f.counts().active - before.active;
            self.account(file, before);
            self.events.workingset_activate += activated;
            self.events.pgactivate += activated;
            self.workingset.age(activated);
        }
    }

    /// Whether the inactive list is too small for the active one
    /// (inactive_is_low). Under `lru = clock` any active page is too many.
    pub fn inactive_is_low(&self) -> bool {
        if self.nr_active == 0 {
            return false;
        }
        if self.lru == Lru::Clock {
            return true;
        }
        let inactive = self.nr_cached - self.nr_active;
        let gib = (self.nr_cached * PAGE_SIZE) >> 30;
        let ratio = if gib == 0 { 1 } else { (10 * gib).isqrt() };
        inactive * ratio < self.nr_active
    }

    /// Moves up to `want` of the oldest active clean pages to the inactive
    /// queue (shrink_active_list). Frame notes taken on the way count as
    /// one access (PG_REFERENCED). Returns the pages looked at.
    pub fn shrink_active(&mut self, want: u64) -> u64 {
        let mut seen = 0;
        while seen < want {
            let Some((file, first, end)) = self.active.pop() else {
                break;
            };
            let mut pos = first;
            while let Some((at, start, run)) = self.files[file.index()].run_within(pos, end) {
                pos = at;
                if seen >= want {
                    self.active.push_front(file, pos, end);
                    break;
                }
                let stop = (start + run.len).min(end).min(pos + (want - seen));
                seen += stop - pos;
                self.deactivate(file, pos, stop, run.frame + (pos - start) as u32);
                pos = stop;
            }
        }
        seen
    }

    /// The active hand passes pages `pos..stop` of one run.
    fn deactivate(&mut self, file: FileId, pos: PageIndex, stop: PageIndex, frame: u32) {
        let f = &mut self.files[file.index()];
        let Some((_, run)) = f.run_at(pos) else {
            return;
        };
        if !run.reclaimable() {
            // Queued again, by its flag, when it comes clean.
            f.update(pos, stop, |fl| fl & !PG_IN_LRU);
            return;
        }
        let noted = self.frame_notes.first_noted(frame, stop - pos).is_some();
        if noted {
            self.frame_notes.clear(frame, stop - pos);
        }
        let before = f.counts();
        f.update(pos, stop, |fl| {
            let fl = fl & !PG_ACTIVE;
            if noted {
                fl | PG_REFERENCED
            } else {
                fl
            }
        });
        let deactivated = before.active - f.counts().active;
        self.account(file, before);
        self.events.pgdeactivate += deactivated;
        self.inactive.push_back(file, pos, stop);
    }
}
