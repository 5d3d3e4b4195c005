//! A file's runs by first page, in a sorted list cut into short chunks,
//! with a finger on the chunk looked at last.
//!
//! A file holds thousands of runs (a run needs contiguous frames), and
//! most look-ups follow one another closely: a sequential reader marks
//! its next page, the flusher takes its next chunk, a completion changes
//! the run a request made. A `BTreeMap` searches from the root every time
//! (its range searches were a fifth of a simulation's time); here a
//! look-up first tries the chunk the last one ended in, and only then
//! bisects the chunks. Inside a chunk it bisects at most `CHUNK` entries,
//! and inserting or removing moves at most that many.
//!
//! The commonest change to a file's runs is a run giving its first pages
//! to the run ending where it starts (change.rs, `join_front`): both
//! entries change in place, the moved start included, after one look-up.
//!
//! The answers are those of a map by first page: the same runs, in the
//! same order (the tests compare it with a `BTreeMap`).

use super::Run;
use crate::ids::PageIndex;
use std::cell::Cell;
use std::ops::{Bound, RangeBounds};

/// Most entries a chunk holds; a fuller one is cut in two.
#[cfg(not(test))]
const CHUNK: usize = 64;
/// Small in tests, so that they cross chunks often.
#[cfg(test)]
const CHUNK: usize = 4;

/// Runs by first page; they never overlap (the caller's invariant).
#[derive(Clone, Debug, Default)]
pub(super) struct RunMap {
    /// The runs in page order, in chunks of 1 to `CHUNK` entries.
    chunks: Vec<Vec<(PageIndex, Run)>>,
    len: usize,
    /// Where the last look-up ended, as (chunk, index): the next one most
    /// often ends there too, or just after.
    finger: Cell<(usize, usize)>,
}

impl RunMap {
    pub fn len(&self) -> usize {
        self.len
    }

    /// The chunk where a run starting at `page` is or would go: the last
    /// whose first run starts at or before it (the first chunk if none
    /// does), given `n > 0` chunks and the finger's chunk `f`.
    #[inline]
    fn chunk_of(&self, page: PageIndex, n: usize, f: usize) -> usize {
        if n == 1 {
            // Most files: one chunk.
            return 0;
        }
        let starts_by = |c: usize| self.chunks[c][0].0 <= page;
        if f < n && (f == 0 || starts_by(f)) && (f + 1 == n || !starts_by(f + 1)) {
            return f;
        }
        self.chunks.partition_point(|ch| ch[0].0 <= page).max(1) - 1
    }

    /// (chunk, index) of the first run starting at or after `page`, or
    /// after it when `after`; the index may be the chunk's length.
    fn position(&self, page: PageIndex, after: bool) -> (usize, usize) {
        let n = self.chunks.len();
        if n == 0 {
            return (0, 0);
        }
        let (fc, fi) = self.finger.get();
        let c = self.chunk_of(page, n, fc);
        let ch = self.chunks[c].as_slice();
        // The first index whose run starts at or after `key`: `fi` or the
        // one after it when the finger is in this chunk and one of them
        // is (`starts_before(i)`: the run at `i` starts before `key`).
        let key = page.saturating_add(after as u64);
        let starts_before = |i: usize| ch.get(i).is_some_and(|e| e.0 < key);
        let i = if fc != c || fi > ch.len() || (fi > 0 && !starts_before(fi - 1)) {
            ch.partition_point(|e| e.0 < key)
        } else if !starts_before(fi) {
            fi
        } else if !starts_before(fi + 1) {
            fi + 1
        } else {
            ch.partition_point(|e| e.0 < key)
        };
        self.finger.set((c, i));
        (c, i)
    }

    /// (chunk, index) of the run starting at `start`.
    fn find(&self, start: PageIndex) -> Option<(usize, usize)> {
        let (c, i) = self.position(start, false);
        let e = self.chunks.get(c)?.get(i)?;
        (e.0 == start).then_some((c, i))
    }

    /// The entry before (chunk, index), if any.
    fn before(&self, c: usize, i: usize) -> Option<(usize, usize)> {
        if i > 0 {
            Some((c, i - 1))
        } else {
            let c = c.checked_sub(1)?;
            Some((c, self.chunks[c].len() - 1))
        }
    }

    /// The entry at or after (chunk, index), if any.
    fn at_or_after(&self, c: usize, i: usize) -> Option<(PageIndex, Run)> {
        let ch = self.chunks.get(c)?;
        ch.get(i)
            .or_else(|| self.chunks.get(c + 1).map(|n| &n[0]))
            .copied()
    }

    pub fn get(&self, start: PageIndex) -> Option<Run> {
        let (c, i) = self.find(start)?;
        Some(self.chunks[c][i].1)
    }

    pub fn get_mut(&mut self, start: PageIndex) -> Option<&mut Run> {
        let (c, i) = self.find(start)?;
        Some(&mut self.chunks[c][i].1)
    }

    /// Adds a run; the run that had this start, if any.
    pub fn insert(&mut self, start: PageIndex, run: Run) -> Option<Run> {
        if self.chunks.is_empty() {
            // No room reserved ahead: most files hold a run or two, and a
            // cache may hold many files.
            self.chunks.push(vec![(start, run)]);
            self.len = 1;
            return None;
        }
        let (c, i) = self.position(start, false);
        let ch = &mut self.chunks[c];
        if ch.get(i).is_some_and(|e| e.0 == start) {
            return Some(std::mem::replace(&mut ch[i].1, run));
        }
        ch.insert(i, (start, run));
        self.len += 1;
        if ch.len() > CHUNK {
            let back = ch.split_off(CHUNK / 2);
            self.chunks.insert(c + 1, back);
        }
        None
    }

    /// Removes the entry at (chunk, index), and its chunk if now empty.
    fn remove_at(&mut self, c: usize, i: usize) -> (PageIndex, Run) {
        let e = self.chunks[c].remove(i);
        if self.chunks[c].is_empty() {
            self.chunks.remove(c);
        }
        self.len -= 1;
        e
    }

    pub fn remove(&mut self, start: PageIndex) -> Option<Run> {
        let (c, i) = self.find(start)?;
        Some(self.remove_at(c, i).1)
    }

    /// The last run starting at or before `page`.
    pub fn last_from_or_before(&self, page: PageIndex) -> Option<(PageIndex, Run)> {
        if self.len == 0 {
            return None;
        }
        let (c, i) = self.position(page, true);
        let (c, i) = self.before(c, i)?;
        Some(self.chunks[c][i])
    }

    /// The last run starting before `page`.
    pub fn last_before(&self, page: PageIndex) -> Option<(PageIndex, Run)> {
        if self.len == 0 {
            return None;
        }
        let (c, i) = self.position(page, false);
        let (c, i) = self.before(c, i)?;
        Some(self.chunks[c][i])
    }

    /// The first run starting at or after `page`.
    pub fn first_from(&self, page: PageIndex) -> Option<(PageIndex, Run)> {
        if self.len == 0 {
            return None;
        }
        let (c, i) = self.position(page, false);
        self.at_or_after(c, i)
    }

    /// (chunk, index) bounds of the entries whose first pages lie in
    /// `range`: from the first to just past the last.
    fn span(&self, range: &impl RangeBounds<PageIndex>) -> ((usize, usize), (usize, usize)) {
        if self.len == 0 {
            return ((0, 0), (0, 0));
        }
        let lo = match range.start_bound() {
            Bound::Included(&p) => self.position(p, false),
            Bound::Excluded(&p) => self.position(p, true),
            Bound::Unbounded => (0, 0),
        };
        let hi = match range.end_bound() {
            Bound::Included(&p) => self.position(p, true),
            Bound::Excluded(&p) => self.position(p, false),
            Bound::Unbounded => match self.chunks.len() {
                0 => (0, 0),
                n => (n - 1, self.chunks[n - 1].len()),
            },
        };
        if hi < lo {
            (lo, lo)
        } else {
            (lo, hi)
        }
    }

    /// The runs whose first pages lie in `range`, in page order.
    pub fn range(
        &self,
        range: impl RangeBounds<PageIndex>,
    ) -> impl DoubleEndedIterator<Item = (PageIndex, Run)> + '_ {
        let ((c0, i0), (c1, i1)) = self.span(&range);
        let chunks = self.chunks.get(c0..=c1).unwrap_or(&[]);
        let last = chunks.len().saturating_sub(1);
        chunks.iter().enumerate().flat_map(move |(k, ch)| {
            let from = if k == 0 { i0 } else { 0 };
            let to = if k == last { i1 } else { ch.len() };
            ch[from..to].iter().copied()
        })
    }

    /// As `range`, with the runs to change.
    pub fn range_mut(
        &mut self,
        range: impl RangeBounds<PageIndex>,
    ) -> impl Iterator<Item = (PageIndex, &mut Run)> + '_ {
        let ((c0, i0), (c1, i1)) = self.span(&range);
        let chunks = self.chunks.get_mut(c0..=c1).unwrap_or(&mut []);
        let last = chunks.len().saturating_sub(1);
        chunks.iter_mut().enumerate().flat_map(move |(k, ch)| {
            let from = if k == 0 { i0 } else { 0 };
            let to = if k == last { i1 } else { ch.len() };
            ch[from..to].iter_mut().map(|(s, r)| (*s, r))
        })
    }

    /// Every run, in page order.
    pub fn iter(&self) -> impl Iterator<Item = (PageIndex, Run)> + '_ {
        self.chunks.iter().flatten().copied()
    }

    /// Removes the runs whose first pages lie in `first..end`, handing
    /// each to `taken` in page order.
    pub fn extract(
        &mut self,
        first: PageIndex,
        end: PageIndex,
        mut taken: impl FnMut(PageIndex, Run),
    ) {
        let ((c0, i0), (c1, i1)) = self.span(&(first..end));
        if (c0, i0) >= (c1, i1) {
            return;
        }
        for c in c0..=c1 {
            let ch = &mut self.chunks[c];
            let from = if c == c0 { i0 } else { 0 };
            let to = if c == c1 { i1 } else { ch.len() };
            self.len -= to - from;
            for (start, run) in ch.drain(from..to) {
                taken(start, run);
            }
        }
        for c in (c0..=c1).rev() {
            if self.chunks[c].is_empty() {
                self.chunks.remove(c);
            }
        }
    }

    /// The run at `start` gives its first `n` pages to the run before it,
    /// if that one ends at `start` and `joins(before)` says the pages may
    /// join it: the run before grows by `n`, the run at `start` now
    /// starts at `start + n`, one look-up. Returns the run before's start,
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
        let (c, i) = self.find(start).expect("run exists");
        assert!(n < self.chunks[c][i].1.len, "gives a proper front");
        let (pc, pi) = self.before(c, i)?;
        let (prev_start, prev) = &mut self.chunks[pc][pi];
        let prev_start = *prev_start;
        if prev_start + prev.len != start || !joins(prev) {
            return None;
        }
        prev.len += n;
        let (key, run) = &mut self.chunks[c][i];
        run.len -= n;
        run.frame += n as u32;
        // Between the run before's new end and this run's end: the order
        // is unchanged.
        *key = start + n;
        Some(prev_start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

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
                        let mut got = Vec::new();
                        m.extract(page, page + len, |s, r| got.push((s, r)));
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
                prop_assert!(m.chunks.iter().all(|c| !c.is_empty()), "op {}", op);
                prop_assert_eq!(m.len(), model.0.len());
                prop_assert!(m.iter().eq(model.0.iter().map(|(&s, &r)| (s, r))));
            }
        }
    }
}
