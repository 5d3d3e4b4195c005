//! One cached file: its runs, their look-ups, and the file's own state
//! (size, dirty time, errors, handles, backing length).

use super::run::{PageCounts, PageFlags, Run, MAX_FILE_PAGES, PG_DIRTY};
use super::run_map::RunMap;
use crate::ids::{DeviceId, IoId, PageIndex, WbId};
use crate::time::Instant;
use std::cell::Cell;
use std::collections::BTreeSet;

/// Pages `from..to` are cached (in any state), and page `to` is not if
/// `hole`.
#[derive(Clone, Copy, Debug, Default)]
struct Filled {
    from: PageIndex,
    to: PageIndex,
    hole: bool,
}

#[derive(Clone, Debug)]
pub struct CachedFile {
    pub device: DeviceId,
    pub wb: WbId,
    /// Size in bytes, including extensions not yet written back.
    pub size: u64,
    /// Cached pages as runs, by first page; runs never overlap.
    pub(super) runs: RunMap,
    /// First pages of the runs that are dirty, for the flusher's scans.
    pub(super) dirty_runs: BTreeSet<PageIndex>,
    pub(super) counts: PageCounts,
    /// Reused by `merge`, so updates allocate nothing.
    pub(super) scratch: Vec<(PageIndex, Run)>,
    /// The run `run_at` found last, forgotten on every change to `runs`:
    /// a sequential reader asks for the same run many times in a row.
    pub(super) last_found: Cell<Option<(PageIndex, Run)>>,
    /// What `first_hole` found last: only removing pages makes a hole
    /// (`remove` shrinks the stretch) and only inserting fills one
    /// (`insert` forgets the hole). A sequential reader asks, at every
    /// read, whether the window ahead of it has a hole; this answers
    /// without walking the runs.
    filled: Cell<Filled>,
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
    /// Its last name is gone (`Engine::unlink`): it cannot be opened, and
    /// leaves through its device's backlog.
    pub unlinked: bool,
    /// A cut of its backing file is queued on its device's backlog (a
    /// large truncation, backlog/): writes that extend the file, and
    /// truncations that do, wait for it.
    pub cut_pending: bool,
    /// Changes landed since the last flush, with their mark (durability/).
    pub unsynced: Option<u64>,
    /// When the file was last used (evict/).
    pub last_use: u64,
    /// Pages below this are on the backing file (space/): its length
    /// when added, grown by completed write-backs, cut by truncation.
    pub disk_pages: PageIndex,
    /// The backing file's length in bytes as the engine made it
    /// (backing_len/): a write-back past it makes it longer.
    pub disk_size: u64,
    /// A length change of the backing file in flight (its id): no write
    /// of the file starts meanwhile (backing_len/).
    pub resizing: Option<u64>,
}

impl CachedFile {
    /// No open handle and nothing dirty, under writeback or being read:
    /// what is left is clean cached data (evict/).
    pub fn idle(&self) -> bool {
        !self.evicted
            && self.open_handles == 0
            && self.inflight_writes.is_empty()
            && self.counts().cached == self.counts().reclaimable
    }

    /// Idle, and not unlinked (an unlinked file leaves through its
    /// device's backlog, backlog/) nor waiting for a cut of its backing
    /// file.
    pub fn evictable(&self) -> bool {
        self.idle() && !self.unlinked && !self.cut_pending
    }

    pub fn new(device: DeviceId, wb: WbId, size: u64) -> CachedFile {
        CachedFile {
            device,
            wb,
            size,
            runs: RunMap::default(),
            dirty_runs: BTreeSet::new(),
            counts: PageCounts::default(),
            scratch: Vec::new(),
            last_found: Cell::new(None),
            filled: Cell::new(Filled::default()),
            dirtied_when: None,
            writeback_index: 0,
            inflight_writes: BTreeSet::new(),
            err_seq: 0,
            last_err: None,
            read_error: None,
            open_handles: 0,
            evicted: false,
            unlinked: false,
            cut_pending: false,
            unsynced: None,
            last_use: 0,
            disk_pages: size.div_ceil(crate::ids::PAGE_SIZE),
            disk_size: size,
            resizing: None,
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
        let (start, run) = self.runs.last_from_or_before(page)?;
        let found = (page < start + run.len).then_some((start, run));
        if found.is_some() {
            self.last_found.set(found);
        }
        found
    }

    /// The run holding `page`, or else the first run after it.
    pub fn run_from(&self, page: PageIndex) -> Option<(PageIndex, Run)> {
        self.run_at(page).or_else(|| self.runs.first_from(page))
    }

    /// The next cached run with pages in `pos..end`, as (the first of its
    /// pages at or after `pos`, the run's start, the run); None when the
    /// range has no more cached pages.
    pub fn run_within(
        &self,
        pos: PageIndex,
        end: PageIndex,
    ) -> Option<(PageIndex, PageIndex, Run)> {
        let (start, run) = self.run_from(pos)?;
        let pos = pos.max(start);
        (pos < end).then_some((pos, start, run))
    }

    pub fn flags(&self, page: PageIndex) -> Option<PageFlags> {
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
        let at = self.run_at(first);
        // The common case, `first..end` inside one run (a read's pages,
        // a request's): that run, with no search of the map.
        let whole = at.filter(|&(s, r)| first < end && end <= s + r.len);
        let from = at.map_or(first, |(s, _)| s);
        let rest = match whole {
            Some(_) => None,
            None => Some(self.runs.range(from..end.max(from))),
        };
        whole.into_iter().chain(rest.into_iter().flatten())
    }

    /// Every run, in page order.
    pub fn all_runs(&self) -> impl Iterator<Item = (PageIndex, Run)> + '_ {
        self.runs.iter()
    }

    /// The first uncached page in `first..last`, if any.
    pub fn first_hole(&self, first: PageIndex, last: PageIndex) -> Option<PageIndex> {
        let known = self.filled.get();
        // Pages `known.from..known.to` are cached: look on from their end.
        let extends = known.from <= first && first <= known.to;
        if extends && (known.hole || known.to >= last) {
            return (known.to < last).then_some(known.to);
        }
        let from = if extends { known.to } else { first };
        let p = self.cached_until(from, last);
        if extends || p > first {
            self.filled.set(Filled {
                from: if extends { known.from } else { first },
                to: p,
                hole: p < last,
            });
        }
        (p < last).then_some(p)
    }

    /// Where the cached stretch from `from` ends: its first hole, or the
    /// end of the run that reaches `last` (or `from` itself when it is at
    /// or past `last`).
    fn cached_until(&self, from: PageIndex, last: PageIndex) -> PageIndex {
        let mut p = from;
        if p < last {
            for (start, run) in self.runs_over(p, last) {
                if start > p {
                    break;
                }
                p = start + run.len;
            }
        }
        p
    }

    /// Pages `first..end` leave the cache: the stretch known cached keeps
    /// the part after them (whose hole stays), or else the part before
    /// (which now ends at a hole).
    pub(super) fn forget_filled(&self, first: PageIndex, end: PageIndex) {
        let known = self.filled.get();
        if end <= known.from || first >= known.to {
            return;
        }
        self.filled.set(if end < known.to {
            Filled { from: end, ..known }
        } else if first > known.from {
            Filled {
                to: first,
                hole: true,
                ..known
            }
        } else {
            Filled::default()
        });
    }

    /// Pages `first..end` come into the cache: a hole known at one of
    /// them is gone.
    pub(super) fn fill_hole(&self, first: PageIndex, end: PageIndex) {
        let mut known = self.filled.get();
        if known.hole && first <= known.to && known.to < end {
            known.hole = false;
            self.filled.set(known);
        }
    }

    /// Length of the uncached stretch from `page` (which must be
    /// uncached), at most `max`.
    pub fn hole_len(&self, page: PageIndex, max: u64) -> u64 {
        debug_assert!(self.run_at(page).is_none());
        let next = self.runs.first_from(page).map_or(u64::MAX, |(s, _)| s);
        (next - page).min(max)
    }

    /// Whether any cached page in `first..end` has any of `flags`.
    pub fn any_flags(&self, first: PageIndex, end: PageIndex, flags: PageFlags) -> bool {
        self.runs_over(first, end)
            .any(|(_, r)| r.flags & flags != 0)
    }

    /// Whether every page in `first..end` is cached with all of `set` and
    /// none of `clear`.
    pub fn all_match(
        &self,
        first: PageIndex,
        end: PageIndex,
        set: PageFlags,
        clear: PageFlags,
    ) -> bool {
        let mut next = first;
        for (start, run) in self.runs_over(first, end) {
            if start > next || run.flags & (set | clear) != set {
                return false;
            }
            next = start + run.len;
        }
        next >= end
    }

    /// The first page of the first dirty run that starts at or after `from`
    /// (a dirty run holding `from` itself is `flags`' to tell).
    pub fn next_dirty(&self, from: PageIndex) -> Option<PageIndex> {
        self.dirty_runs.range(from..).next().copied()
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
            .find(|&&s| self.runs.get(s).expect("dirty run exists").writable())
            .copied()
    }

    /// The next writable page from where the flusher left the file,
    /// wrapping to the start (Linux's writeback_index cyclic range); but
    /// past the end of the backing file (`disk_pages`), the lowest page
    /// waiting there first. A write past that end makes the backing file
    /// longer: were a dirty page below it still unwritten, a crash of the
    /// process would leave the backing file reading zeros there, which the
    /// file may never have held (ours: Linux's i_disksize may run ahead of
    /// a hole, which a power cut shows). Pages under writeback below are
    /// fine: their write was issued first, and where a crash could land
    /// the later one without it, the device takes a file's growing
    /// writes one at a time, in order (`extending_writes`, dispatch/).
    pub fn next_writable_from_index(&self) -> Option<PageIndex> {
        let start = self
            .next_writable(self.writeback_index)
            .or_else(|| self.next_writable(0))?;
        if start > self.disk_pages {
            return self.next_writable(self.disk_pages);
        }
        Some(start)
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
            let end = start + self.runs.get(start).expect("dirty run exists").len;
            match ranges.last_mut() {
                Some(last) if last.1 == start => last.1 = end,
                _ => ranges.push((start, end)),
            }
        }
        ranges
    }

    /// Checks the runs against the counters and the dirty index.
    pub fn check(&self) {
        let mut counts = PageCounts::default();
        let mut last_end = 0;
        let mut prev: Option<Run> = None;
        for (start, run) in self.runs.iter() {
            assert!(run.len > 0 && start >= last_end, "runs overlap at {start}");
            assert!(start + run.len <= MAX_FILE_PAGES);
            if let Some(p) = prev.filter(|_| start == last_end) {
                assert!(!p.joins(&run), "alike runs left apart at page {start}");
            }
            assert_eq!(
                run.flags & PG_DIRTY != 0,
                self.dirty_runs.contains(&start),
                "dirty index at page {start}"
            );
            counts.add(&run);
            last_end = start + run.len;
            prev = Some(run);
        }
        assert_eq!(counts, self.counts, "page counters");
        let known = self.filled.get();
        let (a, b) = (known.from, known.to);
        assert!(
            a >= b || self.cached_until(a, b) >= b,
            "pages {a}..{b} taken as cached have a hole"
        );
        assert!(
            !known.hole || self.run_at(b).is_none(),
            "page {b} taken as a hole is cached"
        );
        assert_eq!(self.dirty_runs.len(), {
            self.runs
                .iter()
                .filter(|(_, r)| r.flags & PG_DIRTY != 0)
                .count()
        });
    }
}
