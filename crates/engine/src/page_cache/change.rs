//! Changes to a file's runs. Each splits runs at the edges of its page
//! range, changes the runs inside, and joins neighbours that ended up
//! alike, keeping the counters and the dirty index in step.

use super::{CachedFile, PageFlags, Run, PG_DIRTY};
use crate::ids::PageIndex;

impl CachedFile {
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
        let run = self.runs.remove(start).expect("run exists");
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
        self.runs.get_mut(start).expect("run exists").len = head;
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
        runs.extend(self.runs.range(from..=end));
        let mut lead = 0;
        for k in 1..runs.len() {
            let (lead_start, lead_run) = runs[lead];
            let (start, run) = runs[k];
            if lead_start + lead_run.len == start && lead_run.joins(&run) {
                // The pages keep their state: only the map and index change.
                self.runs.remove(start);
                if run.flags & PG_DIRTY != 0 {
                    self.dirty_runs.remove(&start);
                }
                runs[lead].1.len += run.len;
                self.runs.get_mut(lead_start).expect("run exists").len += run.len;
            } else {
                lead = k;
            }
        }
        self.scratch = runs;
    }

    /// Adds a run over uncached pages, joining alike neighbours. Alike
    /// runs are never left apart, so only the runs just before and just
    /// after can join it.
    pub fn insert(&mut self, start: PageIndex, run: Run) {
        assert!(run.len > 0);
        let end = start + run.len;
        self.fill_hole(start, end);
        let prev = self.runs.last_before(start);
        let next = self.runs.first_from(start);
        assert!(
            prev.is_none_or(|(s, r)| s + r.len <= start) && next.is_none_or(|(s, _)| s >= end),
            "pages {start}.. inserted twice"
        );
        let lead = match prev {
            Some((s, r)) if s + r.len == start && r.joins(&run) => {
                // The new pages join the run before: counted, no new entry.
                self.counts.add(&run);
                self.last_found.set(None);
                self.runs.get_mut(s).expect("run exists").len += run.len;
                s
            }
            _ => {
                self.put(start, run);
                start
            }
        };
        if let Some((s, r)) = next {
            if s == end && run.joins(&r) {
                self.absorb(lead, s);
            }
        }
    }

    /// Applies `change` to the flags of every cached page in `first..end`
    /// (splitting runs at the edges, joining alike runs after).
    pub fn update(
        &mut self,
        first: PageIndex,
        end: PageIndex,
        mut change: impl FnMut(PageFlags) -> PageFlags,
    ) {
        self.update_runs(first, end, |_, _, flags| change(flags));
    }

    /// As `update`, telling `change` each run's first page and length too.
    pub fn update_runs(
        &mut self,
        first: PageIndex,
        end: PageIndex,
        mut change: impl FnMut(PageIndex, u64, PageFlags) -> PageFlags,
    ) {
        // A file with no run (an unlinked file's pages dropped, a file
        // never read) changes nothing: no cut, no search.
        if first >= end || self.runs.len() == 0 {
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
        for (start, run) in self.runs.range_mut(first..end) {
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
        flags: PageFlags,
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
        if head == 0 && tail > 0 && self.join_front(start, run, middle) {
            return;
        }
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
        } else if let Some(next) = self.runs.get(end) {
            if middle.joins(&next) {
                self.absorb(first, end);
            }
        }
        // Joining checks flags and frames only, not the middle's length.
        // With a tail, `join_front` found the run before unlike already.
        if head == 0 && tail == 0 {
            let prev = self.runs.last_before(first);
            if let Some((prev_start, prev)) = prev {
                if prev_start + prev.len == first && prev.joins(&middle) {
                    let kept = self.last_found.get();
                    self.absorb(prev_start, first);
                    self.last_found.set(kept);
                }
            }
        }
    }

    /// The pages of `middle`, the front of `run` at `start`, join the run
    /// ending at `start` if it is alike: it grows and `run` keeps only
    /// its tail, one entry moved. The common change of a sequential
    /// reader marking its next page accessed, or a writer's next chunk
    /// (the same end state as cutting the run and joining the middle).
    /// False, and nothing changed, if the run before is not alike.
    fn join_front(&mut self, start: PageIndex, run: Run, middle: Run) -> bool {
        let Some(_) = self
            .runs
            .give_front(start, middle.len, |prev| prev.joins(&middle))
        else {
            return false;
        };
        let end = start + middle.len;
        let tail = Run {
            len: run.len - middle.len,
            frame: middle.frame + middle.len as u32,
            ..run
        };
        // Only the pages moved change state.
        self.counts.sub(&Run {
            len: middle.len,
            ..run
        });
        self.counts.add(&middle);
        if run.flags & PG_DIRTY != 0 {
            self.dirty_runs.remove(&start);
            self.dirty_runs.insert(end);
        }
        // The flusher's next chunk starts here.
        self.last_found.set(Some((end, tail)));
        true
    }

    /// Puts `run` in place of the run at `start`, which keeps its start.
    fn replace(&mut self, start: PageIndex, run: Run) {
        assert!(run.len > 0);
        self.last_found.set(None);
        let slot = self.runs.get_mut(start).expect("run exists");
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
        self.runs.get_mut(lead).expect("run exists").len += taken.len;
    }

    /// Moves pages `first..end`, which lie in one run, to frames
    /// `frame..`: the run is cut at the range's edges (no counter changes;
    /// the pages keep their state).
    pub fn move_frames(&mut self, first: PageIndex, end: PageIndex, frame: u32) {
        self.split(first);
        self.split(end);
        self.last_found.set(None);
        let run = self.runs.get_mut(first).expect("run exists");
        assert_eq!(run.len, end - first, "pages to move lie in one run");
        run.frame = frame;
    }

    /// Removes the cached pages in `first..end`, handing each run removed
    /// to `gone`.
    pub fn remove(
        &mut self,
        first: PageIndex,
        end: PageIndex,
        mut gone: impl FnMut(PageIndex, Run),
    ) {
        if first >= end || self.runs.len() == 0 {
            // Nothing to take: a file's pages are dropped at its unlink
            // and again when it leaves, most often none the second time.
            return;
        }
        self.split(first);
        self.split(end);
        self.last_found.set(None);
        self.forget_filled(first, end);
        let (counts, dirty_runs) = (&mut self.counts, &mut self.dirty_runs);
        self.runs.extract(first, end, |start, run| {
            counts.sub(&run);
            if run.flags & PG_DIRTY != 0 {
                dirty_runs.remove(&start);
            }
            gone(start, run);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use crate::ids::{DeviceId, WbId};

    fn file() -> CachedFile {
        CachedFile::new(DeviceId(0), WbId(0), 0)
    }

    fn run(len: u64, flags: PageFlags, frame: u32) -> Run {
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
        let mut gone = Vec::new();
        f.remove(12, 15, |s, r| gone.push((s, r)));
        assert_eq!(gone, vec![(12, run(3, PG_DIRTY, 2))]);
        assert_eq!(f.counts().cached, 7);
        assert_eq!(f.hole_len(12, 100), 3);
        assert_eq!(f.run_from(12).map(|(s, _)| s), Some(15));
        f.check();
    }
}
