//! Invariants of the engine's state, checked after every simulated step in
//! tests (TigerBeetle style): each owner checks its own (the page cache:
//! page_cache/check.rs); here, what spans owners: handles and files,
//! dirty files and their contexts, reserved space and devices, the dirty
//! count within its hard limit plus the documented slack, requests in
//! flight and the devices' tags and wbt.

use crate::engine::Engine;
use crate::ids::FileId;

/// How often `check_invariants` also checks the reclaim queue's coverage.
const RECLAIM_QUEUE_CHECK_EVERY: u64 = 64;

impl Engine {
    /// Panics with a description if an invariant does not hold. Cost is
    /// linear in the number of cached pages.
    pub fn check_invariants(&self) {
        // The queue's coverage costs a sort; the simulator checks after
        // every event, so it is checked on every 64th call.
        let checks = self.invariant_checks.get();
        self.invariant_checks.set(checks + 1);
        let queues = checks.is_multiple_of(RECLAIM_QUEUE_CHECK_EVERY);
        let reserved = self.cache.check(self.devices.len(), queues);
        for (d, dev) in self.devices.iter().enumerate() {
            assert_eq!(
                dev.space.reserved, reserved[d],
                "device {d}: reserved space is what its pages hold"
            );
        }
        assert_eq!(self.cache.wb_pages.len(), self.wbs.len(), "wb counts");
        self.check_backlogs();
        let limit = self.hard_limit_pages() + self.dirty_slack_pages();
        let dirty_total = self.cache.nr_dirty + self.cache.nr_writeback;
        assert!(
            dirty_total <= limit,
            "dirty {dirty_total} over hard limit + slack {limit}"
        );
        self.check_files();
        assert_eq!(
            self.eviction.live,
            self.cache.files.iter().filter(|f| !f.evicted).count(),
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

    /// Each file's handles are open, and it is on its context's dirty
    /// list exactly while it has dirty pages.
    fn check_files(&self) {
        let mut open_handles = vec![0u32; self.cache.files.len()];
        for h in self.handles.iter() {
            open_handles[h.file.index()] += 1;
        }
        for (idx, f) in self.cache.files.iter().enumerate() {
            assert_eq!(f.open_handles, open_handles[idx], "open handle count");
            assert_eq!(
                f.dirtied_when.is_some(),
                f.counts().dirty > 0,
                "dirtied_when set iff dirty"
            );
            if let Some(when) = f.dirtied_when {
                assert!(self.wbs[f.wb.index()]
                    .dirty_files
                    .contains(&(when, FileId(idx as u32))));
            }
        }
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
        self.io.growing.check(&self.io.inflight);
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
}
