//! The page cache: files of 4 KiB pages kept as runs, like Linux's large
//! folios.
//!
//! - A run is a stretch of contiguous cached pages of one file in one
//!   state (clean, dirty, under writeback, dirty again while under
//!   writeback, or being read) whose data sits in contiguous frames. It
//!   is one map entry, so dirtying, writing back, completing or reclaiming
//!   a 1 MiB request touches a few entries, not 256 pages.
//! - Operations on a page range first split runs at the range's edges,
//!   change the runs inside, then merge neighbours that ended up alike
//!   (same flags, frames following on, no I/O in flight: a run under
//!   writeback or being read is one request, as a bio is).
//! - Only cached pages are stored, so memory follows the budget, not file
//!   sizes. Per-file counters and an index of dirty runs let the flusher
//!   and the accounting skip clean runs.
//!
//! Frames (slots of the cache's memory, the runtime's business) are handed
//! out in ranges (frame_space.rs), so a page's frame is its run's first
//! frame plus its offset.

use crate::ids::{DeviceId, IoId, PageIndex, WbId};
use crate::time::Instant;
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};

pub const PG_DIRTY: u8 = 1;
pub const PG_WRITEBACK: u8 = 2;
/// Being read from the device; not yet valid.
pub const PG_READING: u8 = 4;
/// Used since the reclaim hand last passed (CLOCK's second chance).
pub const PG_REFERENCED: u8 = 8;
/// Covered by an entry of the reclaim queue.
pub const PG_IN_LRU: u8 = 16;
/// Written uncached (DONTCACHE): leaves the cache once written back and
/// clean (Linux's PG_dropbehind). An ordinary access clears it.
pub const PG_DROPBEHIND: u8 = 32;

/// Largest file, in pages (16 TiB): ranges beyond it are rejected.
pub const MAX_FILE_PAGES: u64 = 1 << 32;

/// Pages `start..start + len` of a file, all in one state, with their data
/// in frames `frame..frame + len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub len: u64,
    pub flags: u8,
    pub frame: u32,
}

impl Run {
    /// Whether the run may be reclaimed: clean and valid.
    pub fn reclaimable(&self) -> bool {
        self.flags & (PG_DIRTY | PG_WRITEBACK | PG_READING) == 0
    }

    /// Dirty and written uncached.
    pub fn dontcache_dirty(&self) -> bool {
        self.flags & (PG_DIRTY | PG_DROPBEHIND) == PG_DIRTY | PG_DROPBEHIND
    }

    /// Written uncached and dirty or under writeback.
    pub fn dontcache_unclean(&self) -> bool {
        self.flags & PG_DROPBEHIND != 0 && self.flags & (PG_DIRTY | PG_WRITEBACK) != 0
    }

    pub fn writable(&self) -> bool {
        self.flags & (PG_DIRTY | PG_WRITEBACK) == PG_DIRTY
    }

    /// Whether `next`, starting where this run ends, can join it. Runs
    /// with I/O in flight stay as their requests made them: their
    /// completions then change whole runs, with no split.
    fn joins(&self, next: &Run) -> bool {
        self.flags == next.flags
            && self.flags & (PG_WRITEBACK | PG_READING) == 0
            && self.frame as u64 + self.len == next.frame as u64
    }
}

/// Pages of a file by state, kept with the runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageCounts {
    pub cached: u64,
    pub dirty: u64,
    pub writeback: u64,
    /// Clean and valid: what reclaim may take.
    pub reclaimable: u64,
    /// Dirty and marked drop-behind (Linux's WB_DONTCACHE_DIRTY).
    pub dontcache_dirty: u64,
    /// Marked drop-behind and dirty or under writeback: not yet gone.
    pub dontcache_unclean: u64,
    /// Marked drop-behind, in any state.
    pub dropbehind: u64,
}

impl PageCounts {
    fn add(&mut self, run: &Run) {
        self.cached += run.len;
        self.dirty += run.len * (run.flags & PG_DIRTY != 0) as u64;
        self.writeback += run.len * (run.flags & PG_WRITEBACK != 0) as u64;
        self.reclaimable += run.len * run.reclaimable() as u64;
        self.dontcache_dirty += run.len * run.dontcache_dirty() as u64;
        self.dontcache_unclean += run.len * run.dontcache_unclean() as u64;
        self.dropbehind += run.len * (run.flags & PG_DROPBEHIND != 0) as u64;
    }

    fn sub(&mut self, run: &Run) {
        self.cached -= run.len;
        self.dirty -= run.len * (run.flags & PG_DIRTY != 0) as u64;
        self.writeback -= run.len * (run.flags & PG_WRITEBACK != 0) as u64;
        self.reclaimable -= run.len * run.reclaimable() as u64;
        self.dontcache_dirty -= run.len * run.dontcache_dirty() as u64;
        self.dontcache_unclean -= run.len * run.dontcache_unclean() as u64;
        self.dropbehind -= run.len * (run.flags & PG_DROPBEHIND != 0) as u64;
    }
}

#[derive(Clone, Debug)]
pub struct CachedFile {
    pub device: DeviceId,
    pub wb: WbId,
    /// Size in bytes, including extensions not yet written back.
    pub size: u64,
    /// Cached pages as runs, by first page; runs never overlap.
    runs: BTreeMap<PageIndex, Run>,
    /// First pages of the runs that are dirty, for the flusher's scans.
    dirty_runs: BTreeSet<PageIndex>,
    counts: PageCounts,
    /// Reused by `merge`, so updates allocate nothing.
    scratch: Vec<(PageIndex, Run)>,
    /// The run `run_at` found last, forgotten on every change to `runs`:
    /// a sequential reader asks for the same run many times in a row.
    last_found: Cell<Option<(PageIndex, Run)>>,
    /// When the file went from clean to dirty (Linux's inode dirtied_when).
    pub dirtied_when: Option<Instant>,
    /// Where the flusher continues in this file.
    pub writeback_index: PageIndex,
    /// Writes in flight for this file, by id (ids grow monotonically).
    pub inflight_writes: BTreeSet<IoId>,
    /// Error sequence: bumped on every failed write-back (errseq_t).
    pub err_seq: u64,
    pub last_err: Option<crate::action::IoErrorKind>,
    /// A failed read, reported to the next reader that misses.
    pub read_error: Option<crate::action::IoErrorKind>,
    /// Handles open on the file.
    pub open_handles: u32,
    /// Retired by `evict_file`: never used again.
    pub evicted: bool,
    /// Changes landed since the last flush, with their mark (durability.rs).
    pub unsynced: Option<u64>,
    /// When the file was last used (evict.rs).
    pub last_use: u64,
}

impl CachedFile {
    pub fn new(device: DeviceId, wb: WbId, size: u64) -> CachedFile {
        CachedFile {
            device,
            wb,
            size,
            runs: BTreeMap::new(),
            dirty_runs: BTreeSet::new(),
            counts: PageCounts::default(),
            scratch: Vec::new(),
            last_found: Cell::new(None),
            dirtied_when: None,
            writeback_index: 0,
            inflight_writes: BTreeSet::new(),
            err_seq: 0,
            last_err: None,
            read_error: None,
            open_handles: 0,
            evicted: false,
            unsynced: None,
            last_use: 0,
        }
    }

    pub fn counts(&self) -> PageCounts {
        self.counts
    }

    pub fn nr_runs(&self) -> usize {
        self.runs.len()
    }

    /// The run holding `page`, as (first page, run).
    pub fn run_at(&self, page: PageIndex) -> Option<(PageIndex, Run)> {
        if let Some((start, run)) = self.last_found.get() {
            if start <= page && page < start + run.len {
                return Some((start, run));
            }
        }
        let (&start, &run) = self.runs.range(..=page).next_back()?;
        let found = (page < start + run.len).then_some((start, run));
        if found.is_some() {
            self.last_found.set(found);
        }
        found
    }

    /// The run holding `page`, or else the first run after it.
    pub fn run_from(&self, page: PageIndex) -> Option<(PageIndex, Run)> {
        self.run_at(page)
            .or_else(|| self.runs.range(page..).next().map(|(&s, &r)| (s, r)))
    }

    pub fn flags(&self, page: PageIndex) -> Option<u8> {
        self.run_at(page).map(|(_, r)| r.flags)
    }

    pub fn frame(&self, page: PageIndex) -> Option<u32> {
        self.run_at(page)
            .map(|(start, r)| r.frame + (page - start) as u32)
    }

    /// The runs that overlap `first..end`, whole (not clipped).
    pub fn runs_over(
        &self,
        first: PageIndex,
        end: PageIndex,
    ) -> impl Iterator<Item = (PageIndex, Run)> + '_ {
        let from = self.run_at(first).map_or(first, |(s, _)| s);
        self.runs.range(from..end.max(from)).map(|(&s, &r)| (s, r))
    }

    /// Every run, in page order.
    pub fn all_runs(&self) -> impl Iterator<Item = (PageIndex, Run)> + '_ {
        self.runs.iter().map(|(&s, &r)| (s, r))
    }

    /// Length of the uncached stretch from `page` (which must be
    /// uncached), at most `max`.
    pub fn hole_len(&self, page: PageIndex, max: u64) -> u64 {
        debug_assert!(self.run_at(page).is_none());
        let next = self.runs.range(page..).next().map_or(u64::MAX, |(&s, _)| s);
        (next - page).min(max)
    }

    /// Whether every page in `first..end` is cached with all of `set` and
    /// none of `clear`.
    pub fn all_match(&self, first: PageIndex, end: PageIndex, set: u8, clear: u8) -> bool {
        let mut next = first;
        for (start, run) in self.runs_over(first, end) {
            if start > next || run.flags & (set | clear) != set {
                return false;
            }
            next = start + run.len;
        }
        next >= end
    }

    /// The first page at or after `from` that is dirty and not under
    /// writeback.
    pub fn next_writable(&self, from: PageIndex) -> Option<PageIndex> {
        if self.counts.dirty == 0 {
            return None;
        }
        if let Some((_, run)) = self.run_at(from) {
            if run.writable() {
                return Some(from);
            }
        }
        self.dirty_runs
            .range(from + 1..)
            .find(|&&s| self.runs[&s].writable())
            .copied()
    }

    /// How many pages from `start` are dirty and not under writeback,
    /// across adjacent runs, at most `max`.
    pub fn writable_len(&self, start: PageIndex, max: u64) -> u64 {
        let mut n = 0;
        while n < max {
            match self.run_at(start + n) {
                Some((s, run)) if run.writable() => n = (s + run.len - start).min(max),
                _ => break,
            }
        }
        n
    }

    /// The dirty pages as ranges `(first, end)`, adjacent runs joined.
    pub fn dirty_ranges(&self) -> Vec<(PageIndex, PageIndex)> {
        let mut ranges: Vec<(PageIndex, PageIndex)> = Vec::new();
        for &start in &self.dirty_runs {
            let end = start + self.runs[&start].len;
            match ranges.last_mut() {
                Some(last) if last.1 == start => last.1 = end,
                _ => ranges.push((start, end)),
            }
        }
        ranges
    }

    fn put(&mut self, start: PageIndex, run: Run) {
        assert!(run.len > 0);
        self.counts.add(&run);
        if run.flags & PG_DIRTY != 0 {
            self.dirty_runs.insert(start);
        }
        self.last_found.set(None);
        let old = self.runs.insert(start, run);
        assert!(old.is_none(), "runs overlap at page {start}");
    }

    fn take(&mut self, start: PageIndex) -> Run {
        self.last_found.set(None);
        let run = self.runs.remove(&start).expect("run exists");
        self.counts.sub(&run);
        if run.flags & PG_DIRTY != 0 {
            self.dirty_runs.remove(&start);
        }
        run
    }

    /// Makes `page` the first page of a run if a run spans it. The
    /// pages keep their state, so no counter changes.
    fn split(&mut self, page: PageIndex) {
        let Some((start, run)) = self.run_at(page) else {
            return;
        };
        if start == page {
            return;
        }
        let head = page - start;
        self.last_found.set(None);
        self.runs.get_mut(&start).expect("run exists").len = head;
        let tail = Run {
            len: run.len - head,
            flags: run.flags,
            frame: run.frame + head as u32,
        };
        if run.flags & PG_DIRTY != 0 {
            self.dirty_runs.insert(page);
        }
        self.runs.insert(page, tail);
    }

    /// Joins alike neighbours among the runs overlapping `first..end` and
    /// the runs just outside it, in one ordered pass.
    fn merge(&mut self, first: PageIndex, end: PageIndex) {
        let from = first
            .checked_sub(1)
            .and_then(|p| self.run_at(p))
            .map_or(first, |(s, _)| s);
        self.last_found.set(None);
        let mut runs = std::mem::take(&mut self.scratch);
        runs.clear();
        runs.extend(self.runs.range(from..=end).map(|(&s, &r)| (s, r)));
        let mut lead = 0;
        for k in 1..runs.len() {
            let (lead_start, lead_run) = runs[lead];
            let (start, run) = runs[k];
            if lead_start + lead_run.len == start && lead_run.joins(&run) {
                // The pages keep their state: only the map and index change.
                self.runs.remove(&start);
                if run.flags & PG_DIRTY != 0 {
                    self.dirty_runs.remove(&start);
                }
                runs[lead].1.len += run.len;
                self.runs.get_mut(&lead_start).expect("run exists").len += run.len;
            } else {
                lead = k;
            }
        }
        self.scratch = runs;
    }

    /// Adds a run over uncached pages, joining alike neighbours.
    pub fn insert(&mut self, start: PageIndex, run: Run) {
        assert!(
            self.run_from(start)
                .is_none_or(|(s, _)| s >= start + run.len),
            "pages {start}.. inserted twice"
        );
        self.put(start, run);
        self.merge(start, start + run.len);
    }

    /// Applies `change` to the flags of every cached page in `first..end`
    /// (splitting runs at the edges, joining alike runs after).
    pub fn update(&mut self, first: PageIndex, end: PageIndex, mut change: impl FnMut(u8) -> u8) {
        self.update_runs(first, end, |_, _, flags| change(flags));
    }

    /// As `update`, telling `change` each run's first page and length too.
    pub fn update_runs(
        &mut self,
        first: PageIndex,
        end: PageIndex,
        mut change: impl FnMut(PageIndex, u64, u8) -> u8,
    ) {
        if first >= end {
            return;
        }
        // Most updates (a request's completion, a chunk off a dirty run)
        // fall inside one run: cut it and join only at the edges.
        if let Some((start, run)) = self.run_at(first) {
            if end <= start + run.len {
                let flags = change(first, end - first, run.flags);
                self.update_within(start, run, first, end, flags);
                return;
            }
        }
        self.split(first);
        self.split(end);
        self.last_found.set(None);
        for (&start, run) in self.runs.range_mut(first..end) {
            let flags = change(start, run.len, run.flags);
            if flags == run.flags {
                continue;
            }
            self.counts.sub(run);
            if (flags ^ run.flags) & PG_DIRTY != 0 {
                if flags & PG_DIRTY != 0 {
                    self.dirty_runs.insert(start);
                } else {
                    self.dirty_runs.remove(&start);
                }
            }
            run.flags = flags;
            self.counts.add(run);
        }
        self.merge(first, end);
    }

    /// Gives pages `first..end`, which lie inside the run at `start`,
    /// `flags`: the run is cut in up to three, and only the middle may
    /// join the runs beside it.
    fn update_within(
        &mut self,
        start: PageIndex,
        run: Run,
        first: PageIndex,
        end: PageIndex,
        flags: u8,
    ) {
        if flags == run.flags {
            return;
        }
        let (head, tail) = (first - start, start + run.len - end);
        let middle = Run {
            len: end - first,
            flags,
            frame: run.frame + head as u32,
        };
        if head > 0 {
            self.replace(start, Run { len: head, ..run });
            self.put(first, middle);
        } else {
            self.replace(start, middle);
        }
        if tail > 0 {
            let frame = middle.frame + middle.len as u32;
            let tail = Run {
                len: tail,
                frame,
                ..run
            };
            self.put(end, tail);
            // The flusher's next chunk starts here.
            self.last_found.set(Some((end, tail)));
        } else if let Some(&next) = self.runs.get(&end) {
            if middle.joins(&next) {
                self.absorb(first, end);
            }
        }
        // Joining checks flags and frames only, not the middle's length.
        if head == 0 {
            if let Some((&prev_start, prev)) = self.runs.range(..first).next_back() {
                if prev_start + prev.len == first && prev.joins(&middle) {
                    let kept = self.last_found.get();
                    self.absorb(prev_start, first);
                    self.last_found.set(kept);
                }
            }
        }
    }

    /// Puts `run` in place of the run at `start`, which keeps its start.
    fn replace(&mut self, start: PageIndex, run: Run) {
        assert!(run.len > 0);
        self.last_found.set(None);
        let slot = self.runs.get_mut(&start).expect("run exists");
        let old = std::mem::replace(slot, run);
        self.counts.sub(&old);
        self.counts.add(&run);
        if (old.flags ^ run.flags) & PG_DIRTY != 0 {
            if run.flags & PG_DIRTY != 0 {
                self.dirty_runs.insert(start);
            } else {
                self.dirty_runs.remove(&start);
            }
        }
    }

    /// Joins the run at `next` onto the run at `lead`, which ends there
    /// and is alike.
    fn absorb(&mut self, lead: PageIndex, next: PageIndex) {
        let taken = self.take(next);
        self.counts.add(&taken);
        self.last_found.set(None);
        self.runs.get_mut(&lead).expect("run exists").len += taken.len;
    }

    /// Removes the cached pages in `first..end`; returns the runs removed.
    pub fn remove(&mut self, first: PageIndex, end: PageIndex) -> Vec<(PageIndex, Run)> {
        if first >= end {
            return Vec::new();
        }
        self.split(first);
        self.split(end);
        let starts: Vec<PageIndex> = self.runs.range(first..end).map(|(&s, _)| s).collect();
        starts.into_iter().map(|s| (s, self.take(s))).collect()
    }

    /// Sets PG_REFERENCED on every run overlapping `first..end` that is
    /// valid (whole runs, as a folio is referenced whole).
    pub fn reference(&mut self, first: PageIndex, end: PageIndex) {
        let from = self.run_at(first).map_or(first, |(s, _)| s);
        let mut changed = None;
        self.last_found.set(None);
        for (&start, run) in self.runs.range_mut(from..end.max(from)) {
            if run.flags & (PG_READING | PG_REFERENCED) == 0 {
                run.flags |= PG_REFERENCED;
                changed = Some((changed.map_or(start, |(a, _)| a), start + run.len));
            }
        }
        // Newly referenced runs may now be like their neighbours.
        if let Some((a, b)) = changed {
            self.merge(a, b);
        }
    }

    /// Checks the runs against the counters and the dirty index.
    pub fn check(&self) {
        let mut counts = PageCounts::default();
        let mut last_end = 0;
        let mut prev: Option<Run> = None;
        for (&start, run) in &self.runs {
            assert!(run.len > 0 && start >= last_end, "runs overlap at {start}");
            assert!(start + run.len <= MAX_FILE_PAGES);
            if let Some(p) = prev.filter(|_| start == last_end) {
                assert!(!p.joins(run), "alike runs left apart at page {start}");
            }
            assert_eq!(
                run.flags & PG_DIRTY != 0,
                self.dirty_runs.contains(&start),
                "dirty index at page {start}"
            );
            counts.add(run);
            last_end = start + run.len;
            prev = Some(*run);
        }
        assert_eq!(counts, self.counts, "page counters");
        assert_eq!(self.dirty_runs.len(), {
            self.runs
                .values()
                .filter(|r| r.flags & PG_DIRTY != 0)
                .count()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> CachedFile {
        CachedFile::new(DeviceId(0), WbId(0), 0)
    }

    fn run(len: u64, flags: u8, frame: u32) -> Run {
        Run { len, flags, frame }
    }

    #[test]
    fn neighbours_with_the_same_state_and_frames_join() {
        let mut f = file();
        f.insert(0, run(4, 0, 100));
        f.insert(4, run(4, 0, 104));
        assert_eq!(f.nr_runs(), 1);
        f.insert(8, run(4, 0, 200));
        assert_eq!(f.nr_runs(), 2, "frames not contiguous");
        assert_eq!(f.frame(9), Some(201));
        f.check();
    }

    #[test]
    fn update_splits_then_joins() {
        let mut f = file();
        f.insert(0, run(16, 0, 0));
        f.update(4, 8, |fl| fl | PG_DIRTY);
        assert_eq!(f.nr_runs(), 3);
        assert_eq!(f.counts().dirty, 4);
        assert_eq!(f.next_writable(0), Some(4));
        assert_eq!(f.writable_len(4, 100), 4);
        f.update(4, 8, |fl| fl & !PG_DIRTY);
        assert_eq!(f.nr_runs(), 1, "clean again: one run");
        f.check();
    }

    #[test]
    fn next_writable_skips_writeback() {
        let mut f = file();
        f.insert(0, run(4, PG_DIRTY, 0));
        f.update(1, 2, |fl| fl | PG_WRITEBACK);
        assert_eq!(f.next_writable(1), Some(2));
        assert_eq!(f.writable_len(0, 10), 1);
        assert_eq!(f.writable_len(2, 10), 2);
        f.update(0, 4, |fl| fl & !PG_DIRTY);
        assert_eq!(f.next_writable(0), None);
        f.check();
    }

    #[test]
    fn remove_takes_exactly_the_range() {
        let mut f = file();
        f.insert(10, run(10, PG_DIRTY, 0));
        let gone = f.remove(12, 15);
        assert_eq!(gone, vec![(12, run(3, PG_DIRTY, 2))]);
        assert_eq!(f.counts().cached, 7);
        assert_eq!(f.hole_len(12, 100), 3);
        assert_eq!(f.run_from(12).map(|(s, _)| s), Some(15));
        f.check();
    }

    #[test]
    fn referencing_marks_whole_runs() {
        let mut f = file();
        f.insert(0, run(4, 0, 0));
        f.reference(1, 2);
        assert_eq!(f.run_at(0), Some((0, run(4, PG_REFERENCED, 0))));
        f.insert(4, run(2, 0, 4));
        assert_eq!(
            f.nr_runs(),
            2,
            "a referenced run and an unreferenced one stay apart"
        );
        f.check();
    }
}
