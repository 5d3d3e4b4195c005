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
    /// What a `RunMap` must answer: a plain map whose moved keys are
    /// removed and inserted again.
    #[derive(Default)]
    struct Model(BTreeMap<PageIndex, Run>);

    impl Model {
        fn give_front(&mut self, start: PageIndex, n: u64, ok: bool) -> Option<PageIndex> {
            let (&prev, &before) = self.0.range(..start).next_back()?;
            if prev + before.len != start || !ok {
                return None;
            }
            let run = self.0.remove(&start).expect("run exists");
            self.0.get_mut(&prev).expect("run exists").len += n;
            let rest = Run {
                len: run.len - n,
                frame: run.frame + n as u32,
                ..run
            };
            self.0.insert(start + n, rest);
            Some(prev)
        }

        /// A gap of `len` pages at or after `page`, if there is one.
        fn gap(&self, page: PageIndex, len: u64) -> Option<PageIndex> {
            let mut p = page;
            for (&s, r) in self
                .0
                .range(..p + len)
                .rev()
                .take(1)
                .chain(self.0.range(p..))
            {
                if s + r.len <= p {
                    continue;
                }
                if p + len <= s {
                    return Some(p);
                }
                p = s + r.len;
            }
            Some(p)
        }
    }

    use proptest::prelude::*;

    proptest! {
        /// Any sequence of changes and look-ups gives the answers of a
        /// plain map, however the keys moved in place.
        #[test]
        fn answers_as_a_plain_map_would(
            ops in proptest::collection::vec((0u8..12, 0u64..400, 1u64..40, any::<bool>()), 1..300)
        ) {
            let (mut m, mut model) = (RunMap::default(), Model::default());
            for (op, page, len, flag) in ops {
                let run_at = model.0.range(..=page).next_back().map(|(&s, &r)| (s, r));
                match op {
                    0 | 1 => {
                        if let Some(p) = model.gap(page, len) {
                            let r = run(len, (page % 3) as u32 * 1000 + p as u32);
                            prop_assert_eq!(m.insert(p, r), None);
                            model.0.insert(p, r);
                        }
                    }
                    2..=4 => {
                        // Give the front of the run holding `page`, often
                        // the same pair again.
                        if let Some((s, r)) = run_at.filter(|&(_, r)| r.len > 1) {
                            let n = 1 + len % (r.len - 1);
                            let want = model.give_front(s, n, flag || op != 2);
                            prop_assert_eq!(m.give_front(s, n, |_| flag || op != 2), want);
                        }
                    }
                    5 => {
                        if let Some((s, _)) = run_at {
                            prop_assert_eq!(m.remove(s), model.0.remove(&s));
                        }
                    }
                    6 => {
                        if let Some((s, r)) = run_at.filter(|&(_, r)| r.len > 1) {
                            m.get_mut(s).expect("run exists").len = r.len - 1;
                            model.0.get_mut(&s).expect("run exists").len = r.len - 1;
                        }
                    }
                    7 => {
                        let got: Vec<_> = m.extract(page, page + len).collect();
                        let want: Vec<_> = model.0.extract_if(page..page + len, |_, _| true).collect();
                        prop_assert_eq!(got, want);
                    }
                    8 => {
                        let end = page + len;
                        prop_assert!(m.range(page..end).eq(model.0.range(page..end).map(|(&s, &r)| (s, r))));
                        prop_assert!(m.range(page..=end).rev().eq(model.0.range(page..=end).rev().map(|(&s, &r)| (s, r))));
                        let excl = (Bound::Excluded(page), Bound::Excluded(end));
                        prop_assert!(m.range(excl).eq(model.0.range(excl).map(|(&s, &r)| (s, r))));
                    }
                    9 => {
                        if let Some((s, r)) = run_at {
                            let mut got: Vec<_> = m.range_mut(s..).map(|(s, r)| (s, *r)).collect();
                            got.truncate(3);
                            let want: Vec<_> = model.0.range(s..).take(3).map(|(&s, &r)| (s, r)).collect();
                            prop_assert_eq!(got, want);
                            prop_assert_eq!(m.get(s), Some(r));
                        }
                    }
                    _ => {}
                }
                let found = |e: Option<(&PageIndex, &Run)>| e.map(|(&s, &r)| (s, r));
                prop_assert_eq!(m.get(page), model.0.get(&page).copied());
                prop_assert_eq!(m.last_from_or_before(page), found(model.0.range(..=page).next_back()));
                prop_assert_eq!(m.last_before(page), found(model.0.range(..page).next_back()));
                prop_assert_eq!(m.first_from(page), found(model.0.range(page..).next()));
                prop_assert_eq!(m.len(), model.0.len());
                prop_assert!(m.iter().eq(model.0.iter().map(|(&s, &r)| (s, r))));
            }
        }
    }
}
