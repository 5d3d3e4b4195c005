//! Refault distance: recognising a page that comes back soon after it was
//! evicted (Linux's mm/workingset.c).
//!
//! - A clock, `nonresident_age`, advances by one for every page evicted
//!   from the inactive list and every page activated: the inactive list's
//!   throughput.
//! - At eviction, reclaim leaves a shadow for the freed pages: their file,
//!   range and the clock's reading (one entry per freed run, as a shadow
//!   per folio).
//! - At a refault (the page is brought in again, by a read or a write),
//!   the distance is the clock's advance since the eviction: how many more
//!   pages the inactive list would have needed to keep it. If that is no
//!   more than the active list's size, the page would have stayed had the
//!   active pages been inactive; it is part of the working set, so it
//!   enters the cache active (workingset_refault, workingset_activate).
//!   A stream never refaults; a hot set pushed out does, and returns.
//! - Bounded: a shadow older than `frame_pages` of the clock can never
//!   activate anything (the active list is smaller than the cache), so the
//!   oldest go as the clock moves on; at most `2 × frame_pages` records
//!   are kept in any case. Shadows in a range that is truncated, punched
//!   or brought back are dropped.

use crate::ids::{FileId, PageIndex};
use std::collections::{BTreeMap, VecDeque};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shadow {
    end: PageIndex,
    evicted_at: u64,
}

#[derive(Clone, Debug, Default)]
pub struct Workingset {
    /// Linux's lruvec->nonresident_age.
    nonresident_age: u64,
    /// Shadows by file, then first page; they never overlap. One map per
    /// file keeps searches short and keys small.
    shadows: Vec<BTreeMap<PageIndex, Shadow>>,
    /// The shadows' keys in the order they were made, for expiry; a record
    /// whose shadow changed or went is skipped.
    order: VecDeque<(FileId, PageIndex, u64)>,
}

impl Workingset {
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.shadows.iter().map(BTreeMap::len).sum()
    }

    /// Whether `file` has a shadow (else there is nothing to look up).
    #[inline]
    fn has_shadows(&self, file: FileId) -> bool {
        self.shadows
            .get(file.index())
            .is_some_and(|s| !s.is_empty())
    }

    /// `file`'s shadows, made if it has none yet.
    fn of(&mut self, file: FileId) -> &mut BTreeMap<PageIndex, Shadow> {
        let i = file.index();
        if i >= self.shadows.len() {
            self.shadows.resize_with(i + 1, BTreeMap::new);
        }
        &mut self.shadows[i]
    }

    /// Pages activated other than by a refault also age the clock.
    pub fn age(&mut self, pages: u64) {
        self.nonresident_age += pages;
    }

    /// Pages `first..end` of `file` were evicted from the inactive list.
    /// `horizon` is the cache's frames: older shadows expire.
    pub fn evicted(&mut self, file: FileId, first: PageIndex, end: PageIndex, horizon: u64) {
        debug_assert!(first < end);
        self.forget(file, first, end);
        let evicted_at = self.nonresident_age;
        self.of(file).insert(first, Shadow { end, evicted_at });
        self.order.push_back((file, first, self.nonresident_age));
        self.nonresident_age += end - first;
        self.expire(horizon);
    }

    /// Pages `first..end` of `file` are brought in again: consumes their
    /// shadows and returns the stretches whose refault distance is at most
    /// `workingset_pages` (they are to be activated).
    pub fn refault(
        &mut self,
        file: FileId,
        first: PageIndex,
        end: PageIndex,
        workingset_pages: u64,
    ) -> Vec<(PageIndex, PageIndex)> {
        if !self.has_shadows(file) {
            return Vec::new();
        }
        let found = self.overlapping(file, first, end);
        let mut hot = Vec::new();
        for &(start, shadow) in &found {
            let distance = self.nonresident_age - shadow.evicted_at;
            if distance <= workingset_pages {
                hot.push((start.max(first), shadow.end.min(end)));
            }
        }
        self.forget_found(file, first, end, found);
        hot
    }

    /// Drops the shadows of pages `first..end` of `file` (truncated,
    /// punched, or cached again), keeping what lies outside the range.
    pub fn forget(&mut self, file: FileId, first: PageIndex, end: PageIndex) {
        // Most removals are of files that never lost a page to eviction.
        if !self.has_shadows(file) {
            return;
        }
        let found = self.overlapping(file, first, end);
        self.forget_found(file, first, end, found);
    }

    /// `forget`, given the shadows overlapping `first..end` (`overlapping`).
    fn forget_found(
        &mut self,
        file: FileId,
        first: PageIndex,
        end: PageIndex,
        found: Vec<(PageIndex, Shadow)>,
    ) {
        for (start, shadow) in found {
            // `found` is not empty only if the file has shadows.
            let shadows = &mut self.shadows[file.index()];
            if start < first {
                // Its head, before `first`, stays.
                let kept = shadows.get_mut(&start).expect("shadow found");
                kept.end = first;
            } else {
                shadows.remove(&start);
            }
            if shadow.end > end {
                shadows.insert(end, shadow);
                self.order.push_back((file, end, shadow.evicted_at));
            }
        }
    }

    /// The shadows of `file` that overlap `first..end`, by first page.
    fn overlapping(
        &self,
        file: FileId,
        first: PageIndex,
        end: PageIndex,
    ) -> Vec<(PageIndex, Shadow)> {
        // One search, backwards from `end`: shadows never overlap, so
        // the first one starting before `first` is the last candidate.
        let mut found = Vec::new();
        let Some(shadows) = self.shadows.get(file.index()) else {
            return found;
        };
        for (&start, &s) in shadows.range(..end).rev() {
            if start < first {
                if s.end > first {
                    found.push((start, s));
                }
                break;
            }
            found.push((start, s));
        }
        found.reverse();
        found
    }

    /// Drops shadows that can no longer activate anything, and the oldest
    /// past the records' bound.
    fn expire(&mut self, horizon: u64) {
        let oldest_useful = self.nonresident_age.saturating_sub(horizon);
        let max_records = 2 * horizon.max(1) as usize;
        while let Some(&(file, start, at)) = self.order.front() {
            if at >= oldest_useful && self.order.len() <= max_records {
                break;
            }
            self.order.pop_front();
            let shadows = &mut self.shadows[file.index()];
            if shadows.get(&start).is_some_and(|s| s.evicted_at == at) {
                shadows.remove(&start);
            }
        }
    }

    /// Every shadow has a record; shadows do not overlap.
    pub fn check(&self) {
        let count: usize = self.shadows.iter().map(BTreeMap::len).sum();
        assert!(count <= self.order.len(), "shadow without a record");
        for shadows in &self.shadows {
            let mut last_end: Option<PageIndex> = None;
            for (&start, s) in shadows {
                assert!(start < s.end, "empty shadow");
                assert!(
                    s.evicted_at <= self.nonresident_age,
                    "shadow from the future"
                );
                if let Some(end) = last_end {
                    assert!(end <= start, "overlapping shadows");
                }
                last_end = Some(s.end);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: FileId = FileId(0);

    #[test]
    fn a_page_back_within_the_active_size_is_hot() {
        let mut ws = Workingset::default();
        ws.evicted(F, 10, 12, 1000);
        ws.age(100);
        // Distance 102 (the two evicted pages and 100 more): hot if the
        // active list holds at least 102 pages.
        assert_eq!(ws.refault(F, 10, 11, 102), vec![(10, 11)]);
        // The shadow of page 10 is consumed; page 11's remains.
        assert_eq!(ws.refault(F, 10, 11, 102), vec![]);
        assert_eq!(ws.refault(F, 11, 12, 101), vec![], "distance 102 > 101");
        assert_eq!(ws.len(), 0);
    }

    #[test]
    fn forget_keeps_what_lies_outside() {
        let mut ws = Workingset::default();
        ws.evicted(F, 0, 10, 1000);
        ws.forget(F, 3, 5);
        ws.check();
        assert_eq!(ws.refault(F, 0, 10, 1000), vec![(0, 3), (5, 10)]);
        ws.check();
    }

    #[test]
    fn shadows_expire_past_the_horizon() {
        let mut ws = Workingset::default();
        for p in 0..100 {
            ws.evicted(F, p, p + 1, 10);
        }
        ws.check();
        assert!(ws.len() <= 11, "{} shadows kept", ws.len());
        assert_eq!(ws.refault(F, 0, 1, u64::MAX), vec![], "expired");
        assert_eq!(ws.refault(F, 99, 100, 10), vec![(99, 100)]);
    }

    #[test]
    fn files_do_not_share_shadows() {
        let mut ws = Workingset::default();
        ws.evicted(FileId(1), 0, 4, 1000);
        assert_eq!(ws.refault(F, 0, 4, 1000), vec![]);
        assert_eq!(ws.refault(FileId(2), 0, 4, 1000), vec![]);
        assert_eq!(ws.refault(FileId(1), 2, 8, 1000), vec![(2, 4)]);
    }
}
