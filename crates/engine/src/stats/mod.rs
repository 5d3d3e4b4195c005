//! Counters the engine keeps for people and tests: every stall by reason,
//! peaks of dirty and writeback memory, writeback by reason, wbt activity.
//!
//! The counters' types are in counters.rs; this file fills them from
//! the engine's state.

pub(crate) mod counters;

use crate::config::StableWrites;
use crate::ids::WbId;
use crate::time::Instant;
use counters::{DeviceGauges, DomainStats, Gauges, Stats};

impl crate::engine::Engine {
    pub(crate) fn note_peaks(&mut self) {
        let s = &mut self.stats;
        s.dirty_peak_pages = s.dirty_peak_pages.max(self.cache.nr_dirty);
        s.writeback_peak_pages = s.writeback_peak_pages.max(self.cache.nr_writeback);
        s.cached_peak_pages = s.cached_peak_pages.max(self.cache.nr_cached);
    }

    /// When the oldest dirty data was dirtied (its file went from clean to
    /// dirty: Linux's dirtied_when), None with nothing dirty. What a crash
    /// of the process would lose is at most this old.
    pub fn oldest_dirtied_at(&self) -> Option<Instant> {
        self.wbs
            .iter()
            .filter_map(|w| w.dirty_files.first().map(|&(when, _)| when))
            .min()
    }

    /// Runs the cached pages are kept in (page_cache/): entries, not
    /// pages. Linear in the files, so not part of `stats`, which
    /// runtimes and the simulator's timeline call often (with 30,000
    /// files it cost the chinner-2021 scenario three quarters of its time).
    pub fn cached_runs(&self) -> u64 {
        self.cache.files.iter().map(|f| f.nr_runs() as u64).sum()
    }

    /// The few counters a timeline samples, without the copies `stats`
    /// makes (names, histograms): cheap enough to take a thousand times a
    /// run.
    pub fn gauges(&self) -> Gauges {
        Gauges {
            cached_pages: self.cache.nr_cached,
            dirty_pages: self.cache.nr_dirty,
            writeback_pages: self.cache.nr_writeback,
            thresh_pages: self.dom.thresh.thresh,
            bg_thresh_pages: self.dom.thresh.bg_thresh,
            devices: self
                .devices
                .iter()
                .map(|d| DeviceGauges {
                    pages_read: d.stats.pages_read,
                    pages_written: d.stats.pages_written,
                    dirty_pages: d.wbs.iter().map(|&w| self.cache.wb(w).dirty).sum(),
                    wbt_max_depth: d.wbt.rq_depth.max_depth,
                })
                .collect(),
            stalled_ns: self.stats.stalls.map(|s| s.total_ns),
        }
    }

    /// The engine's counters now. Costs in devices and writeback
    /// contexts, never in files or pages.
    pub fn stats(&self) -> Stats {
        let mut s = self.stats.clone();
        s.memory = self.memory_budget_stats();
        let events = self.cache.events;
        s.pgactivate = events.pgactivate;
        s.pgdeactivate = events.pgdeactivate;
        s.workingset_activate = events.workingset_activate;
        s.reclaimed_pages = events.reclaimed_pages;
        s.cached_pages = self.cache.nr_cached;
        s.snapshot_held_pages = self.cache.nr_snapshot;
        s.active_pages = self.cache.nr_active;
        s.dirty_pages = self.cache.nr_dirty;
        s.writeback_pages = self.cache.nr_writeback;
        s.thresh_pages = self.dom.thresh.thresh;
        s.bg_thresh_pages = self.dom.thresh.bg_thresh;
        s.works_coalesced = self.wbs.iter().map(|w| w.flusher.works_coalesced).sum();
        s.devices = self
            .devices
            .iter()
            .map(|d| {
                let mut ds = d.stats.clone();
                ds.wbt_max_depth = d.wbt.rq_depth.max_depth;
                ds.wbt_scale_step = d.wbt.rq_depth.scale_step;
                ds.wbt_max_depth_min = d.wbt.max_depth_min;
                ds.wbt_max_depth_max = d.wbt.max_depth_max;
                ds.wbt_scale_ups = d.wbt.scale_ups;
                ds.wbt_scale_downs = d.wbt.scale_downs;
                ds.wbt_pace_step = d.wbt.pace.step;
                ds.wbt_pace_holds = d.wbt.pace.holds;
                ds.wbt_slice_cycles = d.wbt.slice.cycles;
                ds.wbt_slice_holds = d.wbt.slice.holds;
                ds.wbt_slice_read_holds = d.wbt.slice.read_holds;
                ds.wbt_slice_read_hold_ns = d.wbt.slice.read_hold_ns;
                ds.wbt_commit_mean_ns = d.wbt.last_commit_mean_ns;
                ds.stable_writes = match d.config.stable_writes {
                    StableWrites::Auto => format!("{} (auto)", d.stable_mode().name()),
                    mode => mode.name().to_string(),
                };
                ds.backlog = d.backlog.stats(self.config.backlog_wait_ms);
                ds.space_reserved_pages = d.space.reserved;
                ds.space_free_pages = d.space.free_pages.unwrap_or(0);
                for &w in &d.wbs {
                    let pages = self.cache.wb(w);
                    ds.dirty_pages += pages.dirty;
                    ds.writeback_pages += pages.writeback;
                    ds.write_bw_pages_s += self.wbs[w.index()].bw.avg_write_bw;
                }
                ds
            })
            .collect();
        s.domains = (0..self.wbs.len())
            .map(|w| self.domain_stats(WbId(w as u32)))
            .collect();
        s.dontcache_dirty_pages = self.cache.nr_dontcache_dirty;
        s
    }

    fn domain_stats(&self, id: WbId) -> DomainStats {
        let w = &self.wbs[id.index()];
        let pages = self.cache.wb(id);
        DomainStats {
            device: self.devices[w.device.index()].stats.name.clone(),
            domain: self.domains[w.domain.index()].clone(),
            dirty_pages: pages.dirty,
            writeback_pages: pages.writeback,
            dontcache_dirty_pages: pages.dontcache_dirty,
            dirtied_pages: w.dirtied,
            written_pages: w.written,
            dontcache: w.dontcache,
            stalls: w.stalls,
        }
    }
}
