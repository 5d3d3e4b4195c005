//! Invariants of the engine's state, checked after every simulated step in
//! tests (TigerBeetle style): counters agree with the pages they count, the
//! cache stays within its budget, the dirty count within its hard limit
//! plus the documented slack.

use crate::engine::Engine;
use crate::page_cache::{PG_DIRTY, PG_IN_LRU, PG_LOCKED, PG_RESERVED, PG_WRITEBACK};

/// How often `check_invariants` also checks the reclaim queue's coverage.
const RECLAIM_QUEUE_CHECK_EVERY: u64 = 64;

impl Engine {
    /// Panics with a description if an invariant does not hold. Cost is
    /// linear in the number of cached pages.
    pub fn check_invariants(&self) {
        let used = self.nr_cached + self.nr_snapshot;
        assert!(
            used <= self.memory_pages || self.over_budget,
            "cache {used} over budget {} (not lowered)",
            self.memory_pages
        );
        assert!(used <= self.frame_pages, "cache {used} over its frames");
        self.check_page_locks();
        self.check_backlogs();
        let limit = self.hard_limit_pages() + self.dirty_slack_pages();
        let dirty_total = self.nr_dirty + self.nr_writeback;
        assert!(
            dirty_total <= limit,
            "dirty {dirty_total} over hard limit + slack {limit}"
        );
        let totals = self.check_files();
        self.check_totals(&totals);
        // The queue's coverage costs a sort; the simulator checks after
        // every event, so it is checked on every 64th call.
        let checks = self.invariant_checks.get();
        self.invariant_checks.set(checks + 1);
        if checks.is_multiple_of(RECLAIM_QUEUE_CHECK_EVERY) {
            self.check_reclaim_queue();
        }
        assert_eq!(
            self.eviction.live,
            self.files.iter().filter(|f| !f.evicted).count(),
            "live file count"
        );
        assert!(
            self.syncs
                .ops
                .values()
                .all(|op| !(op.issue_only && op.barrier.is_some())),
            "a finished submission op stayed behind"
        );
        self.check_devices_in_flight();
    }

    /// Checks every file alone and sums its pages by state, wb and device.
    fn check_files(&self) -> PageTotals {
        let mut t = PageTotals::new(self.wbs.len(), self.devices.len());
        let mut open_handles = vec![0u32; self.files.len()];
        for h in self.handles.iter().flatten() {
            open_handles[h.file.index()] += 1;
        }
        for (idx, f) in self.files.iter().enumerate() {
            f.check();
            let counts = f.counts();
            assert_eq!(f.open_handles, open_handles[idx], "open handle count");
            assert!(
                !f.evicted || (counts.cached == 0 && f.open_handles == 0),
                "an evicted file holds nothing"
            );
            assert_eq!(
                f.dirtied_when.is_some(),
                counts.dirty > 0,
                "dirtied_when set iff dirty"
            );
            if let Some(when) = f.dirtied_when {
                assert!(self.wbs[f.wb.index()]
                    .dirty_files
                    .contains(&(when, crate::ids::FileId(idx as u32))));
            }
            self.check_runs(idx, f);
            t.frames_used += f.all_runs().map(|(_, r)| r.len).sum::<u64>();
            t.add(f.wb.index(), f.device.index(), &counts);
        }
        t
    }

    /// A file's runs: clean pages are queued for reclaim, reservations
    /// belong to unclean pages, locked pages have their lock.
    fn check_runs(&self, idx: usize, f: &crate::page_cache::CachedFile) {
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
                self.check_locked_run(crate::ids::FileId(idx as u32), start, run.len);
            }
        }
    }

    /// The counters kept by hand equal the files' sums.
    fn check_totals(&self, t: &PageTotals) {
        for (d, dev) in self.devices.iter().enumerate() {
            assert_eq!(
                dev.space.reserved, t.dev_reserved[d],
                "device {d}: reserved space is what its pages hold"
            );
        }
        assert_eq!(
            t.frames_used + self.nr_snapshot + self.frames.free_frames(),
            self.frame_pages,
            "every frame is free or holds one cached page"
        );
        assert_eq!(t.cached, self.nr_cached, "cached count");
        assert_eq!(t.active, self.nr_active, "active count");
        assert_eq!(t.dirty, self.nr_dirty, "dirty count");
        assert_eq!(t.writeback, self.nr_writeback, "writeback count");
        for (i, wb) in self.wbs.iter().enumerate() {
            assert_eq!(wb.dirty, t.wb_dirty[i], "wb {i} dirty count");
            assert_eq!(wb.writeback, t.wb_writeback[i], "wb {i} writeback count");
            assert_eq!(
                wb.nr_dontcache_dirty, t.wb_dontcache[i],
                "wb {i} dontcache dirty count"
            );
            assert_eq!(
                wb.nr_dontcache_unclean, t.wb_unclean[i],
                "wb {i} dontcache unclean count"
            );
        }
        assert_eq!(
            self.nr_dontcache_dirty,
            t.wb_dontcache.iter().sum::<u64>(),
            "dontcache dirty count"
        );
    }

    /// Tags and wbt's count match the requests in flight; whatever wbt
    /// holds has a time to go.
    fn check_devices_in_flight(&self) {
        let mut tracked = vec![0u32; self.devices.len()];
        let mut tags = vec![0u32; self.devices.len()];
        for io in self.io.inflight.values() {
            tags[io.req.device.index()] += 1;
            tracked[io.req.device.index()] += io.tracked as u32;
        }
        self.check_growing();
        for (d, dev) in self.devices.iter().enumerate() {
            assert_eq!(
                dev.tags_used, tags[d],
                "device {d}: tags = requests in flight"
            );
            assert!(
                dev.tags_used <= dev.config.nr_requests || dev.tags_draining,
                "device {d}: tags within nr_requests"
            );
            assert_eq!(
                dev.wbt.inflight, tracked[d],
                "device {d}: wbt in-flight count = tracked writes in flight"
            );
            assert!(
                dev.wbt.enabled() || dev.wbt.window_end.is_none(),
                "device {d}: wbt's window is armed only while wbt is on"
            );
            for id in &dev.wbt.slice.reads_waiting {
                assert!(
                    dev.tag_waiters
                        .iter()
                        .any(|r| r.id == *id && r.dir == crate::IoDir::Read),
                    "device {d}: a read held by a write phase waits for a tag"
                );
            }
            assert!(
                dev.wbt.slice.reads_waiting.is_empty() || self.poll_timeout().is_some(),
                "device {d}: a read held by a write phase has a time to go"
            );
            assert!(
                !dev.wbt.pace.waiting || self.poll_timeout().is_some(),
                "device {d}: a write held by the pace has a time to retry"
            );
        }
    }

    /// Every page marked queued (PG_IN_LRU) is covered by an entry, and the
    /// queue stays within its bound.
    fn check_reclaim_queue(&self) {
        assert!(
            self.reclaim.len() + self.active_lru.len()
                <= self.frame_pages as usize + crate::reclaim::RECLAIM_QUEUE_SLACK,
            "reclaim queue over its bound"
        );
        let mut covered: Vec<Vec<(u64, u64)>> = vec![Vec::new(); self.files.len()];
        for (file, first, end) in self.reclaim.entries().chain(self.active_lru.entries()) {
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

    fn add(&mut self, wb: usize, device: usize, counts: &crate::page_cache::PageCounts) {
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
