//! A file's runs by first page, in a B-tree whose keys can move forward,
//! with the commonest change kept aside until something else looks.
//!
//! The commonest change to a file's runs is a run giving its first pages
//! to the run ending where it starts: a sequential reader marking its next
//! page accessed, a writer dirtying its next chunk of a clean run
//! (change.rs, `join_front`). Keyed by first page, the giving run's key
//! changes. A plain `BTreeMap` can only remove the entry and insert it
//! again; here the key is a `Cell`, moved in place, and a reader marking
//! one page per read does not even search: the map remembers the last
//! pair (`Pending`), so the next page given by the same run to the same
//! run is one addition. The tree learns of it at the next change of
//! another kind (`settle`, one search); look-ups meanwhile see the map as
//! if it had been told (`Pending::bound_*`, `Pending::patch`).
//!
//! Moving a key in place is sound by `BTreeMap`'s contract: a key may
//! change through a `Cell` as long as its order relative to every other
//! key does not. The giving run's start moves from `s` to `s + n` with `n`
//! below the run's length, so it stays above the run before's (which
//! ends at `s`) and below the next run's (which starts at or after the
//! giving run's end). Nothing else changes a key.

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

/// Pages given by the run the tree has at `giver` to the run before it,
/// at `receiver`, and not yet written into the tree. `receiver_run` and
/// `giver_run` are the two runs as the tree has them.
#[derive(Clone, Copy, Debug)]
struct Pending {
    receiver: PageIndex,
    receiver_run: Run,
    giver: PageIndex,
    giver_run: Run,
    given: u64,
}

impl Pending {
    /// The giving run's start as it is now.
    fn giver_now(&self) -> PageIndex {
        self.giver + self.given
    }

    fn receiver_now(&self) -> Run {
        Run {
            len: self.receiver_run.len + self.given,
            ..self.receiver_run
        }
    }

    fn giver_run_now(&self) -> Run {
        Run {
            len: self.giver_run.len - self.given,
            frame: self.giver_run.frame + self.given as u32,
            ..self.giver_run
        }
    }

    /// An entry as the tree has it, as it is now.
    #[inline]
    fn patch(&self, start: PageIndex, run: Run) -> (PageIndex, Run) {
        if start == self.giver {
            (self.giver_now(), self.giver_run_now())
        } else if start == self.receiver {
            (start, self.receiver_now())
        } else {
            (start, run)
        }
    }

    /// A lower bound on starts as they are now, as a bound on the tree's
    /// keys. Only the giving run's key differs, and no key lies between
    /// its two values (the run before ends at the old one; the next run
    /// starts past the new one).
    fn bound_from(&self, bound: Bound<PageIndex>) -> Bound<PageIndex> {
        let (old, now) = (self.giver, self.giver_now());
        match bound {
            Bound::Included(p) if old < p && p <= now => Bound::Included(old),
            Bound::Excluded(p) if old <= p && p < now => Bound::Included(old),
            b => b,
        }
    }

    /// An upper bound on starts as they are now, as a bound on the tree's
    /// keys (see `bound_from`).
    fn bound_to(&self, bound: Bound<PageIndex>) -> Bound<PageIndex> {
        let (old, now) = (self.giver, self.giver_now());
        match bound {
            Bound::Included(p) if old <= p && p < now => Bound::Excluded(old),
            Bound::Excluded(p) if old < p && p <= now => Bound::Excluded(old),
            b => b,
        }
    }
}

/// An entry of the tree as it is now, given what is pending.
#[inline]
fn patch(pending: &Option<Pending>, start: PageIndex, run: Run) -> (PageIndex, Run) {
    match pending {
        Some(p) => p.patch(start, run),
        None => (start, run),
    }
}

/// Runs by first page; they never overlap (the caller's invariant).
#[derive(Clone, Debug, Default)]
// The keys' order never changes while they are in the map (module doc).
#[allow(clippy::mutable_key_type)]
pub(super) struct RunMap {
    map: BTreeMap<Start, Run>,
    /// The last `give_front`, until the next change of another kind.
    pending: Option<Pending>,
}

#[allow(clippy::mutable_key_type)]
impl RunMap {
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Tree keys for page bounds as they are now.
    fn keys(&self, range: impl RangeBounds<PageIndex>) -> (Bound<Start>, Bound<Start>) {
        let (mut from, mut to) = (range.start_bound().cloned(), range.end_bound().cloned());
        if let Some(p) = &self.pending {
            (from, to) = (p.bound_from(from), p.bound_to(to));
        }
        (from.map(Start::at), to.map(Start::at))
    }

    /// An entry of the tree as it is now.
    #[inline]
    fn now(&self, start: &Start, run: Run) -> (PageIndex, Run) {
        self.now_at(start.0.get(), run)
    }

    #[inline]
    fn now_at(&self, start: PageIndex, run: Run) -> (PageIndex, Run) {
        patch(&self.pending, start, run)
    }

    /// The tree's key for a page bound as it is now, where the giving
    /// run's key is not yet moved: its old key when the bound falls on
    /// or inside its two values (`Pending::bound_from`).
    fn key(&self, page: PageIndex, inside: impl Fn(PageIndex, PageIndex) -> bool) -> Start {
        match &self.pending {
            Some(p) if inside(p.giver, p.giver_now()) => Start::at(p.giver),
            _ => Start::at(page),
        }
    }

    /// Writes the pending pages given into the tree (one search).
    fn settle(&mut self) {
        let Some(p) = self.pending.take() else {
            return;
        };
        if p.given == 0 {
            return;
        }
        let mut runs = self
            .map
            .range_mut(Start::at(p.receiver)..=Start::at(p.giver));
        let (key, giver) = runs.next_back().expect("the giving run is in the tree");
        *giver = p.giver_run_now();
        // Between the run before's new end and this run's end: the keys'
        // order is unchanged (module doc).
        key.0.set(p.giver_now());
        let (_, receiver) = runs.next_back().expect("the receiving run is in the tree");
        *receiver = p.receiver_now();
    }

    pub fn get(&self, start: PageIndex) -> Option<Run> {
        if let Some(p) = &self.pending {
            if start == p.giver_now() {
                return Some(p.giver_run_now());
            }
            if start == p.giver {
                return None;
            }
        }
        let run = *self.map.get(&Start::at(start))?;
        Some(self.now_at(start, run).1)
    }

    pub fn get_mut(&mut self, start: PageIndex) -> Option<&mut Run> {
        self.settle();
        self.map.get_mut(&Start::at(start))
    }

    /// Adds a run; the run that had this start, if any.
    pub fn insert(&mut self, start: PageIndex, run: Run) -> Option<Run> {
        self.settle();
        self.map.insert(Start::at(start), run)
    }

    pub fn remove(&mut self, start: PageIndex) -> Option<Run> {
        self.settle();
        self.map.remove(&Start::at(start))
    }

    /// The last run starting at or before `page` (one search, typed for
    /// it: the generic `range` handles both bounds at run time).
    pub fn last_from_or_before(&self, page: PageIndex) -> Option<(PageIndex, Run)> {
        let found = match &self.pending {
            // The giving run starts after `page` now: the last before its
            // old key.
            Some(p) if p.giver <= page && page < p.giver_now() => {
                self.map.range(..Start::at(p.giver)).next_back()
            }
            _ => self.map.range(..=Start::at(page)).next_back(),
        };
        found.map(|(s, &r)| self.now(s, r))
    }

    /// The last run starting before `page`.
    pub fn last_before(&self, page: PageIndex) -> Option<(PageIndex, Run)> {
        let key = self.key(page, |old, now| old < page && page <= now);
        let (s, &r) = self.map.range(..key).next_back()?;
        Some(self.now(s, r))
    }

    /// The first run starting at or after `page`.
    pub fn first_from(&self, page: PageIndex) -> Option<(PageIndex, Run)> {
        let key = self.key(page, |old, now| old < page && page <= now);
        let (s, &r) = self.map.range(key..).next()?;
        Some(self.now(s, r))
    }

    /// The runs whose first pages lie in `range`, in page order.
    pub fn range(
        &self,
        range: impl RangeBounds<PageIndex>,
    ) -> impl DoubleEndedIterator<Item = (PageIndex, Run)> + '_ {
        let pending = self.pending;
        self.map
            .range(self.keys(range))
            .map(move |(s, &r)| patch(&pending, s.0.get(), r))
    }

    /// As `range`, with the runs to change.
    pub fn range_mut(
        &mut self,
        range: impl RangeBounds<PageIndex>,
    ) -> impl Iterator<Item = (PageIndex, &mut Run)> + '_ {
        self.settle();
        let keys = self.keys(range);
        self.map.range_mut(keys).map(|(s, r)| (s.0.get(), r))
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
        self.settle();
        let keys = self.keys(first..end);
        self.map
            .extract_if(keys, |_, _| true)
            .map(|(s, r)| (s.0.get(), r))
    }

    /// The run at `start` gives its first `n` pages to the run before it,
    /// if that one ends at `start` and `joins(before)` says the pages may
    /// join it: the run before grows by `n`, the run at `start` now
    /// starts at `start + n`. Returns the run before's start, or None
    /// (nothing changed) when there is no such run or it may not join.
    /// The same pair giving again costs no search (module doc).
    ///
    /// Panics unless a run starts at `start` with more than `n` pages.
    pub fn give_front(
        &mut self,
        start: PageIndex,
        n: u64,
        joins: impl FnOnce(&Run) -> bool,
    ) -> Option<PageIndex> {
        if let Some(p) = &mut self.pending {
            if p.giver_now() == start {
                assert!(n < p.giver_run_now().len, "gives a proper front");
                if !joins(&p.receiver_now()) {
                    return None;
                }
                p.given += n;
                return Some(p.receiver);
            }
        }
        self.settle();
        let mut runs = self.map.range(..=Start::at(start));
        let (key, &giver_run) = runs.next_back().expect("run exists");
        assert!(
            key.0.get() == start && n < giver_run.len,
            "gives a proper front"
        );
        let (prev_key, &receiver_run) = runs.next_back()?;
        let receiver = prev_key.0.get();
        if receiver + receiver_run.len != start || !joins(&receiver_run) {
            return None;
        }
        self.pending = Some(Pending {
            receiver,
            receiver_run,
            giver: start,
            giver_run,
            given: n,
        });
        Some(receiver)
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

    /// What a `RunMap` must answer: a plain map told of every change at
    /// once.
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
        /// map told at once, with or without pages given pending.
        #[test]
        fn answers_as_if_every_change_were_written_at_once(
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
