//! Invariants of the engine's state, checked after every simulated step in
//! tests (TigerBeetle style): counters agree with the pages they count, the
//! cache stays within its budget, the dirty count within its hard limit
//! plus the documented slack.

use crate::engine::Engine;
use crate::page_cache::{PG_DIRTY, PG_WRITEBACK};

impl Engine {
    /// Panics with a description if an invariant does not hold. Cost is
    /// linear in the number of cached pages.
    pub fn check_invariants(&self) {
        assert!(
            self.nr_cached <= self.memory_pages,
            "cache {} over budget {}",
            self.nr_cached,
            self.memory_pages
        );
        let limit = self.hard_limit_pages() + self.dirty_slack_pages();
        let dirty_total = self.nr_dirty + self.nr_writeback;
        assert!(
            dirty_total <= limit,
            "dirty {dirty_total} over hard limit + slack {limit}"
        );
        let (mut dirty, mut writeback, mut cached) = (0u64, 0u64, 0u64);
        let mut wb_dirty = vec![0u64; self.wbs.len()];
        let mut wb_writeback = vec![0u64; self.wbs.len()];
        let mut open_handles = vec![0u32; self.files.len()];
        for h in self.handles.iter().flatten() {
            open_handles[h.file.index()] += 1;
        }
        for (idx, f) in self.files.iter().enumerate() {
            assert_eq!(f.open_handles, open_handles[idx], "open handle count");
            assert!(
                !f.evicted || (f.pages.is_empty() && f.open_handles == 0),
                "an evicted file holds nothing"
            );
            cached += f.pages.len() as u64;
            let file_dirty = f.pages.values().filter(|p| p.flags & PG_DIRTY != 0).count() as u64;
            let file_wb = f
                .pages
                .values()
                .filter(|p| p.flags & PG_WRITEBACK != 0)
                .count() as u64;
            assert_eq!(
                file_dirty,
                f.dirty.len() as u64,
                "dirty set matches page flags"
            );
            assert_eq!(
                f.dirtied_when.is_some(),
                !f.dirty.is_empty(),
                "dirtied_when set iff dirty"
            );
            if let Some(when) = f.dirtied_when {
                assert!(self.wbs[f.wb.index()]
                    .dirty_files
                    .contains(&(when, crate::ids::FileId(idx as u32))));
            }
            dirty += file_dirty;
            writeback += file_wb;
            wb_dirty[f.wb.index()] += file_dirty;
            wb_writeback[f.wb.index()] += file_wb;
        }
        assert_eq!(cached, self.nr_cached, "cached count");
        assert_eq!(dirty, self.nr_dirty, "dirty count");
        assert_eq!(writeback, self.nr_writeback, "writeback count");
        for (i, wb) in self.wbs.iter().enumerate() {
            assert_eq!(wb.dirty, wb_dirty[i], "wb {i} dirty count");
            assert_eq!(wb.writeback, wb_writeback[i], "wb {i} writeback count");
        }
        let mut tracked = vec![0u32; self.devices.len()];
        let mut tags = vec![0u32; self.devices.len()];
        for io in self.inflight.values() {
            tags[io.req.device.index()] += 1;
            tracked[io.req.device.index()] += io.tracked as u32;
        }
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
        }
    }
}
