//! A file's runs by first page, in a B-tree whose keys can move forward.
//!
//! The commonest change to a file's runs is a run giving its first pages
//! to the run ending where it starts: a sequential reader marking its next
//! page accessed, a writer dirtying its next chunk of a clean run
//! (change.rs, `join_front`). Keyed by first page, the giving run's key
//! changes. A plain `BTreeMap` can only remove the entry and insert it
//! again (two searches and node shuffles per 4 KiB read); here the key is
//! a `Cell`, and `give_front` moves it in place after one search.
//!
//! Sound by `BTreeMap`'s contract: a key may change through a `Cell` as
//! long as its order relative to every other key does not. `give_front`
//! moves a run's start from `s` to `s + n` with `n` below the run's
//! length, so the start stays above the previous run's (which ends at `s`)
//! and below the next run's (which starts at or after the run's end).
//! Nothing else changes a key.

use super::Run;
use crate::ids::PageIndex;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};

/// A run's first page, as the map's key.
#[derive(Clone, Debug)]
struct Start(Cell<PageIndex>);

impl Start {
    fn at(page: PageIndex) -> Start {
        Start(Cell::new(page))
    }
}

impl PartialEq for Start {
    fn eq(&self, other: &Start) -> bool {
        self.0.get() == other.0.get()
    }
}

impl Eq for Start {}

impl PartialOrd for Start {
    fn partial_cmp(&self, other: &Start) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Start {
    fn cmp(&self, other: &Start) -> std::cmp::Ordering {
        self.0.get().cmp(&other.0.get())
    }
}

/// The bounds of a page range as bounds on keys.
fn keys(range: impl RangeBounds<PageIndex>) -> (Bound<Start>, Bound<Start>) {
    (
        range.start_bound().map(|&p| Start::at(p)),
        range.end_bound().map(|&p| Start::at(p)),
    )
}

/// Runs by first page; they never overlap (the caller's invariant).
#[derive(Clone, Debug, Default)]
// The keys' order never changes while they are in the map (module doc).
#[allow(clippy::mutable_key_type)]
pub(super) struct RunMap {
    map: BTreeMap<Start, Run>,
}

#[allow(clippy::mutable_key_type)]
impl RunMap {
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn get(&self, start: PageIndex) -> Option<Run> {
        self.map.get(&Start::at(start)).copied()
    }

    pub fn get_mut(&mut self, start: PageIndex) -> Option<&mut Run> {
        self.map.get_mut(&Start::at(start))
    }

    /// Adds a run; the run that had this start, if any.
    pub fn insert(&mut self, start: PageIndex, run: Run) -> Option<Run> {
        self.map.insert(Start::at(start), run)
    }

    pub fn remove(&mut self, start: PageIndex) -> Option<Run> {
        self.map.remove(&Start::at(start))
    }

    /// The last run starting at or before `page` (one search, typed for
    /// it: the generic `range` handles both bounds at run time).
    pub fn last_from_or_before(&self, page: PageIndex) -> Option<(PageIndex, Run)> {
        let (s, &r) = self.map.range(..=Start::at(page)).next_back()?;
        Some((s.0.get(), r))
    }

    /// The last run starting before `page`.
    pub fn last_before(&self, page: PageIndex) -> Option<(PageIndex, Run)> {
        let (s, &r) = self.map.range(..Start::at(page)).next_back()?;
        Some((s.0.get(), r))
    }

    /// The first run starting at or after `page`.
    pub fn first_from(&self, page: PageIndex) -> Option<(PageIndex, Run)> {
        let (s, &r) = self.map.range(Start::at(page)..).next()?;
        Some((s.0.get(), r))
    }

    /// The runs whose first pages lie in `range`, in page order.
    pub fn range(
        &self,
        range: impl RangeBounds<PageIndex>,
    ) -> impl DoubleEndedIterator<Item = (PageIndex, Run)> + '_ {
        self.map.range(keys(range)).map(|(s, &r)| (s.0.get(), r))
    }

    /// As `range`, with the runs to change.
    pub fn range_mut(
        &mut self,
        range: impl RangeBounds<PageIndex>,
    ) -> impl Iterator<Item = (PageIndex, &mut Run)> + '_ {
        self.map.range_mut(keys(range)).map(|(s, r)| (s.0.get(), r))
    }

    /// Every run, in page order.
    pub fn iter(&self) -> impl Iterator<Item = (PageIndex, Run)> + '_ {
        self.range(..)
    }

    /// Removes the runs whose first pages lie in `first..end`, in page
    /// order.
    pub fn extract(
        &mut self,
        first: PageIndex,
        end: PageIndex,
    ) -> impl Iterator<Item = (PageIndex, Run)> + '_ {
        self.map
            .extract_if(keys(first..end), |_, _| true)
            .map(|(s, r)| (s.0.get(), r))
    }

    /// The run at `start` gives its first `n` pages to the run before it,
    /// if that one ends at `start` and `joins(before)` says the pages may
    /// join it: the run before grows by `n`, the run at `start` now
    /// starts at `start + n`, one search. Returns the run before's start,
    /// or None (nothing changed) when there is no such run or it may not
    /// join.
    ///
    /// Panics unless a run starts at `start` with more than `n` pages.
    pub fn give_front(
        &mut self,
        start: PageIndex,
        n: u64,
        joins: impl FnOnce(&Run) -> bool,
    ) -> Option<PageIndex> {
        let mut runs = self.map.range_mut(..=Start::at(start));
        let (key, run) = runs.next_back().expect("run exists");
        assert!(key.0.get() == start && n < run.len, "gives a proper front");
        let (prev_key, prev) = runs.next_back()?;
        let prev_start = prev_key.0.get();
        if prev_start + prev.len != start || !joins(prev) {
            return None;
        }
        prev.len += n;
        run.len -= n;
        run.frame += n as u32;
        // Between the run before's new end and this run's end: the keys'
        // order is unchanged (module doc).
        key.0.set(start + n);
        Some(prev_start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(len: u64, frame: u32) -> Run {
        Run {
            len,
            flags: 0,
            frame,
        }
    }

    #[test]
    fn give_front_moves_one_key_and_keeps_order() {
        let mut m = RunMap::default();
        m.insert(0, run(4, 0));
        m.insert(4, run(8, 4));
        m.insert(20, run(2, 50));
        assert_eq!(m.give_front(4, 3, |_| true), Some(0));
        assert_eq!(
            m.iter().collect::<Vec<_>>(),
            vec![(0, run(7, 0)), (7, run(5, 7)), (20, run(2, 50))]
        );
        // Look-ups find the moved key, not the old one.
        assert_eq!(m.get(4), None);
        assert_eq!(m.get(7), Some(run(5, 7)));
        assert_eq!(m.range(..=6).next_back(), Some((0, run(7, 0))));
        assert_eq!(m.range(5..).next(), Some((7, run(5, 7))));
    }

    #[test]
    fn give_front_refuses_a_gap_or_an_unlike_run() {
        let mut m = RunMap::default();
        m.insert(0, run(3, 0));
        m.insert(4, run(8, 4));
        assert_eq!(m.give_front(4, 1, |_| true), None, "page 3 is a gap");
        m.insert(3, run(1, 3));
        assert_eq!(m.give_front(4, 1, |_| false), None);
        assert_eq!(m.get(4), Some(run(8, 4)), "unchanged");
        assert_eq!(m.give_front(0, 1, |_| true), None, "no run before");
    }
}
