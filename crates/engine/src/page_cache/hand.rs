//! The hand that frees clean pages, and pages in and out of the cache.
//!
//! - A hand over clean pages in the order they became clean, kept as
//!   ranges (one entry per completed request, not per page). The hand
//!   takes the oldest range and walks the runs in it: a run used since
//!   the hand last passed (PG_REFERENCED) loses its mark and its range
//!   goes to the back, its second chance; so do pages a runtime noted as
//!   read from its own index (frame notes, page by page). Other clean pages
//!   are freed. Pages no longer clean leave the queue (PG_IN_LRU cleared)
//!   and are queued again when they come clean.
//! - Two queues, inactive and active (lru.rs): the hand above walks the
//!   inactive one; an active page it meets moves to the active queue, a
//!   page a runtime noted counts as accessed (lru.rs decides), a freed run
//!   leaves a shadow (workingset.rs). Under `lru = clock` there is one
//!   list in effect: PG_REFERENCED is the second chance.
//! - A run is reclaimed as Linux reclaims a large folio.
//!
//! What to do when too few pages are clean (have them written back) is
//! the engine's (reclaim.rs).

use super::{PageCache, PageFlags, Run, SHRINK_ACTIVE_BATCH};
use super::{PG_ACTIVE, PG_DIRTY, PG_IN_LRU, PG_LOCKED, PG_READING, PG_REFERENCED, PG_WRITEBACK};
use crate::action::Action;
use crate::config::Lru;
use crate::ids::{FileId, PageIndex};
use std::collections::VecDeque;

/// Reclaim at least this many pages at a time, so allocation does not run
/// the clock hand for every page.
pub const RECLAIM_BATCH: u64 = 32;
/// Stale entries the reclaim queue may hold beyond one per page of the
/// budget before they are swept (see `bound_reclaim_queue`).
pub const RECLAIM_QUEUE_SLACK: usize = 4096;

impl PageCache {
    /// Room under the budget: pages neither cached nor kept by writes in
    /// flight (none while the cache is over a lowered budget).
    pub fn free_pages(&self) -> u64 {
        self.memory_pages
            .saturating_sub(self.nr_cached + self.nr_snapshot)
    }

    /// Drops `file`'s pages among `first..end` that no I/O or copy holds
    /// (under writeback, being read, locked); whether some are held (the
    /// caller waits for them and comes back).
    pub fn drop_unheld(
        &mut self,
        file: FileId,
        (first, end): (PageIndex, PageIndex),
        out: &mut VecDeque<Action>,
    ) -> bool {
        let runs: Vec<_> = self.files[file.index()].runs_over(first, end).collect();
        let mut held = false;
        for (start, run) in runs {
            if run.flags & (PG_WRITEBACK | PG_READING | PG_LOCKED) != 0 {
                held = true;
            } else {
                // A run reaching past either end loses only what is inside.
                self.remove_pages(file, start.max(first), (start + run.len).min(end), out);
            }
        }
        held
    }

    /// Frees clean pages until `pages` more fit in the budget (at least
    /// `RECLAIM_BATCH` at a time); whether they fit.
    pub fn make_room(&mut self, pages: u64, out: &mut VecDeque<Action>) -> bool {
        let free = self.free_pages();
        if free >= pages {
            return true;
        }
        self.shrink((pages - free).max(RECLAIM_BATCH), out);
        self.free_pages() >= pages
    }

    /// Frees clean pages down to a lowered budget; whether the cache is
    /// still over it (`over_budget`: its dirty pages must be written back
    /// and freed as they come clean).
    pub fn trim(&mut self, out: &mut VecDeque<Action>) -> bool {
        let used = self.nr_cached + self.nr_snapshot;
        if used > self.memory_pages {
            self.shrink(used - self.memory_pages, out);
        }
        self.over_budget = self.nr_cached + self.nr_snapshot > self.memory_pages;
        self.over_budget
    }

    /// Frees up to `want` clean pages. Returns how many were freed.
    pub fn shrink(&mut self, want: u64, out: &mut VecDeque<Action>) -> u64 {
        let mut freed = 0;
        // Every entry is looked at a bounded number of times: once more
        // after a second chance or a move between the queues.
        let mut budget = 3 * (self.inactive.len() + self.active.len()) + 1;
        while freed < want && budget > 0 {
            budget -= 1;
            if self.inactive_is_low() {
                self.shrink_active(SHRINK_ACTIVE_BATCH);
            }
            let Some((file, first, end)) = self.inactive.pop() else {
                // Nothing inactive: take from the active list.
                if self.shrink_active(SHRINK_ACTIVE_BATCH) == 0 {
                    break;
                }
                continue;
            };
            freed += self.shrink_range(file, first, end, want - freed, out);
        }
        self.events.reclaimed_pages += freed;
        freed
    }

    /// The inactive hand passes the queued range `first..end` of `file`,
    /// freeing up to `want` pages; returns how many it freed. What it did
    /// not reach goes back to the front.
    fn shrink_range(
        &mut self,
        file: FileId,
        first: PageIndex,
        end: PageIndex,
        want: u64,
        out: &mut VecDeque<Action>,
    ) -> u64 {
        let mut freed = 0;
        let mut pos = first;
        while let Some((at, start, run)) = self.files[file.index()].run_within(pos, end) {
            pos = at;
            if freed == want {
                self.inactive.push_front(file, pos, end);
                break;
            }
            let stop = (start + run.len).min(end);
            let frame = run.frame + (pos - start) as u32;
            pos = if !run.reclaimable() {
                // Not clean now: queued again when it comes clean.
                self.files[file.index()].update(pos, stop, |fl| fl & !PG_IN_LRU);
                stop
            } else if run.flags & PG_ACTIVE != 0 {
                self.rotate_active(file, pos, stop);
                stop
            } else if self.lru == Lru::Clock && run.flags & PG_REFERENCED != 0 {
                // CLOCK's second chance.
                self.files[file.index()].update(pos, stop, |fl| fl & !PG_REFERENCED);
                self.inactive.push_back(file, pos, stop);
                stop
            } else {
                match self.frame_notes.first_noted(frame, stop - pos) {
                    Some(0) => {
                        let (noted, twice) = self.frame_notes.take_prefix(frame, stop - pos);
                        self.noted_access(file, pos, pos + noted, twice);
                        pos + noted
                    }
                    unnoted => {
                        let n = unnoted.unwrap_or(stop - pos).min(want - freed);
                        self.drop_pages(file, pos, pos + n, out);
                        if self.lru == Lru::ActiveInactive {
                            // Replaces the range's old shadows with one.
                            self.workingset
                                .evicted(file, pos, pos + n, self.frame_pages);
                        } else {
                            self.workingset.forget(file, pos, pos + n);
                        }
                        freed += n;
                        pos + n
                    }
                }
            };
        }
        freed
    }

    /// An active page found on the inactive queue (activated there) moves
    /// to the active queue; under `lru = clock` it is deactivated instead.
    fn rotate_active(&mut self, file: FileId, pos: PageIndex, stop: PageIndex) {
        if self.lru == Lru::ActiveInactive {
            self.active.push_back(file, pos, stop);
            return;
        }
        let f = &mut self.files[file.index()];
        let before = f.counts();
        f.update(pos, stop, |fl| fl & !PG_ACTIVE);
        self.account(file, before);
        self.inactive.push_back(file, pos, stop);
    }

    /// Inactive pages `pos..stop` a runtime read from its own index since
    /// the hand last passed, once or `twice` (or more). A second access
    /// activates them; a first one (or any, under `lru = clock`) gives
    /// them another pass.
    fn noted_access(&mut self, file: FileId, pos: PageIndex, stop: PageIndex, twice: bool) {
        let referenced = self.files[file.index()]
            .run_at(pos)
            .is_some_and(|(_, r)| r.flags & PG_REFERENCED != 0);
        // The first access (if an earlier one did not mark them already).
        self.files[file.index()].update(pos, stop, |fl| fl | PG_REFERENCED);
        if (referenced || twice) && self.lru == Lru::ActiveInactive {
            // The second: activate.
            self.mark_accessed(file, pos, stop);
            self.active.push_back(file, pos, stop);
        } else {
            self.inactive.push_back(file, pos, stop);
        }
    }

    /// Inserts `pages` uncached pages from `first` with `flags`; room must
    /// have been reserved. Frames come in ranges, so this may make several
    /// runs. Pages that will not be read from the device get zeroed frames,
    /// unless `overwritten`: a write covers them whole and its data is
    /// copied in before anything else can see them (see
    /// `Action::ZeroFrames`).
    pub fn insert_pages(
        &mut self,
        file: FileId,
        first: PageIndex,
        pages: u64,
        flags: PageFlags,
        overwritten: bool,
        out: &mut VecDeque<Action>,
    ) {
        assert!(pages <= self.free_pages(), "cache over budget");
        let before = self.files[file.index()].counts();
        let mut done = 0;
        while done < pages {
            let (frame, n) = self
                .frames
                .alloc(pages - done)
                .expect("frames are free below the budget");
            // Notes for the frames' last pages are not notes for these.
            self.frame_notes.clear(frame, n);
            let run = Run {
                len: n,
                flags,
                frame,
            };
            self.files[file.index()].insert(first + done, run);
            if flags & PG_READING == 0 && !overwritten {
                out.push_back(Action::ZeroFrames {
                    first: frame,
                    count: n as u32,
                });
            }
            done += n;
        }
        self.account(file, before);
        self.activate_refaults(file, first, first + pages);
    }

    /// Drops the cached pages `first..end` of a file and frees their frames.
    pub fn remove_pages(
        &mut self,
        file: FileId,
        first: PageIndex,
        end: PageIndex,
        out: &mut VecDeque<Action>,
    ) {
        self.drop_pages(file, first, end, out);
        // Shadows of pages that went other than by eviction mean nothing.
        self.workingset.forget(file, first, end);
    }

    /// `remove_pages` without the shadows: the caller leaves its own.
    fn drop_pages(
        &mut self,
        file: FileId,
        first: PageIndex,
        end: PageIndex,
        out: &mut VecDeque<Action>,
    ) {
        let frames = &mut self.frames;
        let before = self.files[file.index()].counts();
        self.files[file.index()].remove(first, end, |start, run| {
            frames.free(run.frame, run.len);
            out.push_back(Action::Unmapped {
                file,
                first: start,
                end: start + run.len,
            });
        });
        self.account(file, before);
    }

    /// Changes the flags of pages `first..end` of a file as `change` says
    /// and queues for reclaim, in one pass, the pages that come out clean
    /// and are not queued yet (one entry per stretch).
    pub fn update_and_queue(
        &mut self,
        file: FileId,
        first: PageIndex,
        end: PageIndex,
        mut change: impl FnMut(PageFlags) -> PageFlags,
    ) {
        let (inactive, active) = (&mut self.inactive, &mut self.active);
        let queued_before = (inactive.len(), active.len());
        let f = &mut self.files[file.index()];
        let active_before = f.counts().active;
        f.update_runs(first, end, |start, len, flags| {
            let mut flags = change(flags);
            let clean = flags & (PG_DIRTY | PG_WRITEBACK | PG_READING) == 0;
            if clean && flags & PG_IN_LRU == 0 {
                flags |= PG_IN_LRU;
                if flags & PG_ACTIVE != 0 {
                    active.push_back_joining(file, start, start + len, queued_before.1);
                } else {
                    inactive.push_back_joining(file, start, start + len, queued_before.0);
                }
            }
            flags
        });
        debug_assert_eq!(
            f.counts().active,
            active_before,
            "update_and_queue changed PG_ACTIVE"
        );
        self.bound_reclaim_queue();
    }

    /// Pages `first..end` of a file may have come clean: queue those that
    /// are clean and not queued yet.
    pub fn note_clean(&mut self, file: FileId, first: PageIndex, end: PageIndex) {
        self.update_and_queue(file, first, end, |flags| flags);
    }

    /// Entries for pages that left the cache other than through reclaim
    /// (truncate, eviction, failed reads) stay until the hand reaches
    /// them; past this many, drop those that cover no queued page.
    fn bound_reclaim_queue(&mut self) {
        let limit = self.frame_pages as usize + RECLAIM_QUEUE_SLACK;
        if self.inactive.len() + self.active.len() <= limit {
            return;
        }
        let files = &self.files;
        let live = |&(file, first, end): &(FileId, PageIndex, PageIndex)| {
            files[file.index()]
                .runs_over(first, end)
                .any(|(_, r)| r.flags & PG_IN_LRU != 0)
        };
        self.inactive.retain(live);
        self.active.retain(live);
    }
}
