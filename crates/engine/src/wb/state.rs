//! A writeback context's state (Linux's struct bdi_writeback): its
//! bandwidth estimate, rate limit, share of completions, dirty
//! files and flusher (wb/ makes them).

use crate::action::StallReason;
use crate::bandwidth::estimate::WriteBandwidth;
use crate::dirty_limits::{dirty_freerun_ceiling, Dtc};
use crate::dontcache::stats::DontcacheStats;
use crate::dontcache::written_rate::WrittenRate;
use crate::flusher::work::Flusher;
use crate::ids::{DeviceId, DomainId, FileId};
use crate::page_cache::{CachedFile, Dirtied, WbPages};
use crate::position_ratio::wb_position_ratio;
use crate::proportions::FpropLocal;
use crate::ratelimit::{DirtyRatelimit, RatelimitInput};
use crate::stats::counters::{DomainStats, StallStats};
use crate::time::Instant;
use std::collections::BTreeSet;
use std::ops::Bound;

/// Most writeback domains (tenants) one engine serves (the table is dense).
pub const MAX_DOMAINS: usize = 1024;

/// One writeback context: a (device, domain) pair (Linux's bdi_writeback).
#[derive(Debug)]
pub(crate) struct Wb {
    pub device: DeviceId,
    pub domain: DomainId,
    pub dirtied: u64,
    pub written: u64,
    pub bw: WriteBandwidth,
    pub rl: DirtyRatelimit,
    pub completions: FpropLocal,
    /// Dirty files in first-dirtied order (Linux's b_dirty).
    pub dirty_files: BTreeSet<(Instant, FileId)>,
    pub flusher: Flusher,
    /// The file the flusher is writing, as its position in `dirty_files`.
    pub cursor: Option<(Instant, FileId)>,
    pub dirty_exceeded: bool,
    pub dontcache: DontcacheStats,
    /// When this context's uncached writers may dirty again (their pace,
    /// dontcache/): the end of the time their pages dirtied so far take
    /// at the paced rate.
    pub dontcache_paced_until: Instant,
    /// The context's write completion rate over the last full slot, for
    /// that pace (dontcache/).
    pub written_rate: WrittenRate,
    /// Stalls of this context's writers and readers, by reason.
    pub stalls: [StallStats; StallReason::ALL.len()],
}

impl Wb {
    /// Moves the flusher's cursor to the next dirty file (among `files`)
    /// with something to write and no length change in flight, dirtied
    /// before `older_than` if given (files in first-dirtied order,
    /// wrapping once).
    pub(crate) fn next_file(
        &mut self,
        files: &[CachedFile],
        older_than: Option<Instant>,
    ) -> Option<FileId> {
        let after = match self.cursor {
            Some(c) => Bound::Excluded(c),
            None => Bound::Unbounded,
        };
        let candidates = (self.dirty_files.range((after, Bound::Unbounded)))
            .chain(self.dirty_files.range(..))
            .take(self.dirty_files.len());
        let mut found = None;
        for &(when, file) in candidates {
            if older_than.is_some_and(|limit| when > limit) {
                continue;
            }
            let f = &files[file.index()];
            if f.next_writable(0).is_some() && f.resizing.is_none() {
                found = Some((when, file));
                break;
            }
        }
        self.cursor = found;
        found.map(|(_, f)| f)
    }

    /// This context's counters, on `device` for `domain`, with its page
    /// counts (the page cache's).
    pub(crate) fn stats(&self, device: &str, domain: &str, pages: &WbPages) -> DomainStats {
        DomainStats {
            device: device.to_string(),
            domain: domain.to_string(),
            dirty_pages: pages.dirty,
            writeback_pages: pages.writeback,
            dontcache_dirty_pages: pages.dontcache_dirty,
            dirtied_pages: self.dirtied,
            written_pages: self.written,
            dontcache: self.dontcache,
            stalls: self.stalls,
        }
    }

    /// A new context for (`device`, `domain`), its clocks starting at `now`.
    pub fn new(device: DeviceId, domain: DomainId, now: Instant) -> Wb {
        Wb {
            device,
            domain,
            dirtied: 0,
            written: 0,
            bw: WriteBandwidth::new(now),
            rl: DirtyRatelimit::default(),
            completions: FpropLocal::default(),
            dirty_files: BTreeSet::new(),
            flusher: Flusher::default(),
            cursor: None,
            dirty_exceeded: false,
            dontcache: Default::default(),
            dontcache_paced_until: now,
            written_rate: WrittenRate::new(now),
            stalls: Default::default(),
        }
    }

    /// Pages of `file` were just dirtied at `now` (`d`, page_cache/):
    /// a file dirtied for the first time joins the dirty files, and a
    /// context that had no I/O restarts its bandwidth estimate.
    pub(crate) fn dirtied(&mut self, now: Instant, file: FileId, d: Dirtied) {
        if d.file_was_clean {
            self.dirty_files.insert((now, file));
        }
        if !d.had_io {
            self.bw.restart(now, self.written, self.dirtied);
        }
        self.dirtied += d.newly;
    }

    /// Every 200 ms (`elapsed` since the last update) while the context
    /// has I/O: its bandwidth estimate (bandwidth/), and its dirty rate
    /// limit if its writers are in the throttled zone of `dtc`
    /// (Linux's __wb_update_bandwidth and wb_update_dirty_ratelimit).
    pub fn update_bandwidth(&mut self, now: Instant, elapsed: u64, dtc: &Dtc, strict: bool) {
        let (control_dirty, setpoint, freerun) = if strict {
            let wb_setpoint = if dtc.wb_dirty < 8 {
                dtc.wb_dirty + 1
            } else {
                (dtc.wb_thresh + dtc.wb_bg_thresh) / 2
            };
            (
                dtc.wb_dirty,
                wb_setpoint,
                dirty_freerun_ceiling(dtc.wb_thresh, dtc.wb_bg_thresh),
            )
        } else {
            (dtc.dirty, dtc.setpoint(), dtc.freerun())
        };
        if control_dirty > freerun {
            let pos_ratio = wb_position_ratio(dtc, self.bw.avg_write_bw, strict);
            self.rl.update(RatelimitInput {
                dirtied: self.dirtied - self.bw.dirtied_stamp,
                elapsed_ns: elapsed,
                pos_ratio,
                write_bw: self.bw.avg_write_bw,
                dirty: control_dirty,
                setpoint,
            });
        }
        self.bw.update(now, self.written);
        self.bw.dirtied_stamp = self.dirtied;
        self.bw.time_stamp = now;
    }
}
