//! The page cache's invariants (TigerBeetle style, checked after every
//! simulated step in tests): the cache within its budget and frames,
//! every count equal to the sum of the files' pages, every frame free or
//! holding one page, every clean page findable by reclaim, every locked
//! page held by a lock. The engine adds what spans owners (control.rs).

use super::{PageCache, PageCounts, RECLAIM_QUEUE_SLACK};
use super::{PG_DIRTY, PG_IN_LRU, PG_LOCKED, PG_RESERVED, PG_WRITEBACK};
use crate::ids::FileId;

impl PageCache {
    /// Panics with a description if an invariant does not hold; also
    /// checks the reclaim queue's coverage (a sort) if `queues`. Returns
    /// the space reserved by each device's pages (`devices` of them), for
    /// the devices' own count. Cost is linear in the number of runs.
    pub fn check(&self, devices: usize, queues: bool) -> Vec<u64> {
        let used = self.nr_cached + self.nr_snapshot;
        assert!(
            used <= self.memory_pages || self.over_budget,
            "cache {used} over budget {} (not lowered)",
            self.memory_pages
        );
        assert!(used <= self.frame_pages, "cache {used} over its frames");
        self.check_page_locks();
        let mut t = PageTotals::new(self.wb_pages.len(), devices);
        for (idx, f) in self.files.iter().enumerate() {
            f.check();
            let counts = f.counts();
            assert!(
                !f.evicted || (counts.cached == 0 && f.open_handles == 0),
                "an evicted file holds nothing"
            );
            self.check_runs(idx, f);
            t.frames_used += f.all_runs().map(|(_, r)| r.len).sum::<u64>();
            t.add(f.wb.index(), f.device.index(), &counts);
        }
        self.check_totals(&t);
        if queues {
            self.check_reclaim_queue();
        }
        t.dev_reserved
    }

    /// A file's runs: clean pages are queued for reclaim, reservations
    /// belong to unclean pages, locked pages have their lock.
    fn check_runs(&self, idx: usize, f: &super::CachedFile) {
        for (start, run) in f.all_runs() {
            assert!(
                !run.reclaimable() || run.flags & PG_IN_LRU != 0,
                "file {idx}: clean pages at {start} that reclaim cannot find"
            );
            assert!(
                run.flags & PG_RESERVED == 0 || run.flags & (PG_DIRTY | PG_WRITEBACK) != 0,
                "file {idx}: pages at {start} hold a space reservation but are clean"
            );
            if run.flags & PG_LOCKED != 0 {
                self.check_locked_run(FileId(idx as u32), start, run.len);
            }
        }
    }

    /// The counters kept by `account` equal the files' sums.
    fn check_totals(&self, t: &PageTotals) {
        assert_eq!(
            t.frames_used + self.nr_snapshot + self.frames.free_frames(),
            self.frame_pages,
            "every frame is free or holds one cached page"
        );
        assert_eq!(t.cached, self.nr_cached, "cached count");
        assert_eq!(t.active, self.nr_active, "active count");
        assert_eq!(t.dirty, self.nr_dirty, "dirty count");
        assert_eq!(t.writeback, self.nr_writeback, "writeback count");
        for (i, wb) in self.wb_pages.iter().enumerate() {
            assert_eq!(wb.dirty, t.wb_dirty[i], "wb {i} dirty count");
            assert_eq!(wb.writeback, t.wb_writeback[i], "wb {i} writeback count");
            assert_eq!(
                wb.dontcache_dirty, t.wb_dontcache[i],
                "wb {i} dontcache dirty count"
            );
            assert_eq!(
                wb.dontcache_unclean, t.wb_unclean[i],
                "wb {i} dontcache unclean count"
            );
        }
        assert_eq!(
            self.nr_dontcache_dirty,
            t.wb_dontcache.iter().sum::<u64>(),
            "dontcache dirty count"
        );
    }

    /// Every page marked queued (PG_IN_LRU) is covered by an entry, and the
    /// queue stays within its bound.
    fn check_reclaim_queue(&self) {
        assert!(
            self.inactive.len() + self.active.len()
                <= self.frame_pages as usize + RECLAIM_QUEUE_SLACK,
            "reclaim queue over its bound"
        );
        let mut covered: Vec<Vec<(u64, u64)>> = vec![Vec::new(); self.files.len()];
        for (file, first, end) in self.inactive.entries().chain(self.active.entries()) {
            covered[file.index()].push((first, end));
        }
        self.workingset.check();
        for (idx, f) in self.files.iter().enumerate() {
            let ranges = &mut covered[idx];
            ranges.sort_unstable();
            // One sweep over runs and entries, both in page order: `cover`
            // is the stretch the entries read so far cover without a gap.
            let (mut next, mut cover) = (0, (0, 0));
            for (start, run) in f.all_runs().filter(|(_, r)| r.flags & PG_IN_LRU != 0) {
                let end = start + run.len;
                while !(cover.0 <= start && cover.1 >= end) && next < ranges.len() {
                    let (a, b) = ranges[next];
                    if a <= cover.1 {
                        cover.1 = cover.1.max(b);
                    } else if a <= start {
                        cover = (a, b);
                    } else {
                        break;
                    }
                    next += 1;
                }
                let (from, reach) = cover;
                assert!(
                    from <= start && reach >= end,
                    "file {idx}: queued pages {start}..{end} not in the reclaim queue"
                );
            }
        }
    }
}

/// Pages summed over the files, by state, by wb and by device.
struct PageTotals {
    dirty: u64,
    writeback: u64,
    cached: u64,
    active: u64,
    frames_used: u64,
    wb_dirty: Vec<u64>,
    wb_writeback: Vec<u64>,
    wb_dontcache: Vec<u64>,
    wb_unclean: Vec<u64>,
    dev_reserved: Vec<u64>,
}

impl PageTotals {
    fn new(wbs: usize, devices: usize) -> PageTotals {
        PageTotals {
            dirty: 0,
            writeback: 0,
            cached: 0,
            active: 0,
            frames_used: 0,
            wb_dirty: vec![0; wbs],
            wb_writeback: vec![0; wbs],
            wb_dontcache: vec![0; wbs],
            wb_unclean: vec![0; wbs],
            dev_reserved: vec![0; devices],
        }
    }

    fn add(&mut self, wb: usize, device: usize, counts: &PageCounts) {
        self.dev_reserved[device] += counts.reserved;
        self.cached += counts.cached;
        self.active += counts.active;
        self.dirty += counts.dirty;
        self.writeback += counts.writeback;
        self.wb_dirty[wb] += counts.dirty;
        self.wb_writeback[wb] += counts.writeback;
        self.wb_dontcache[wb] += counts.dontcache_dirty;
        self.wb_unclean[wb] += counts.dontcache_unclean;
    }
}
