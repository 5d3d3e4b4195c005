//! Writeback contexts: one per (device, domain) pair, Linux's
//! bdi_writeback. Each has its own dirty and writeback counts, write
//! bandwidth, dirty rate limit, share of completions, list of dirty files
//! in first-dirtied order, and flusher.

use crate::bandwidth::WriteBandwidth;
use crate::engine::Engine;
use crate::flusher::Flusher;
use crate::ids::{DeviceId, DomainId, FileId, WbId};
use crate::proportions::FpropLocal;
use crate::ratelimit::DirtyRatelimit;
use crate::time::Instant;
use std::collections::BTreeSet;

/// Most writeback domains (tenants) one engine serves (the table is dense).
pub const MAX_DOMAINS: usize = 1024;

/// One writeback context: a (device, domain) pair (Linux's bdi_writeback).
#[derive(Debug)]
pub(crate) struct Wb {
    pub device: DeviceId,
    pub domain: DomainId,
    pub dirty: u64,
    pub writeback: u64,
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
    /// Dirty pages written uncached (Linux's WB_DONTCACHE_DIRTY).
    pub nr_dontcache_dirty: u64,
    /// Pages written uncached that are dirty or under writeback.
    pub nr_dontcache_unclean: u64,
    pub dontcache: crate::dontcache::DontcacheStats,
    /// When this context's uncached writers may dirty again (their pace,
    /// dontcache.rs): the end of the time their pages dirtied so far take
    /// at the paced rate.
    pub dontcache_paced_until: Instant,
    /// The context's write completion rate over the last full slot, for
    /// that pace (dontcache.rs).
    pub written_rate: crate::dontcache::WrittenRate,
    /// Stalls of this context's writers and readers, by reason.
    pub stalls: [crate::stats::counters::StallStats; crate::action::StallReason::ALL.len()],
}

impl Wb {
    pub fn has_io(&self) -> bool {
        self.dirty > 0 || self.writeback > 0
    }
}

impl Engine {
    pub(crate) fn wb_for(&mut self, device: DeviceId, domain: DomainId, now: Instant) -> WbId {
        if let Some(&wb) = self.wb_index.get(&(device, domain)) {
            return wb;
        }
        let id = WbId(self.wbs.len() as u32);
        self.wbs.push(Wb {
            device,
            domain,
            dirty: 0,
            writeback: 0,
            dirtied: 0,
            written: 0,
            bw: WriteBandwidth::new(now),
            rl: DirtyRatelimit::default(),
            completions: FpropLocal::default(),
            dirty_files: BTreeSet::new(),
            flusher: Flusher::default(),
            cursor: None,
            dirty_exceeded: false,
            nr_dontcache_dirty: 0,
            nr_dontcache_unclean: 0,
            dontcache: Default::default(),
            dontcache_paced_until: now,
            written_rate: crate::dontcache::WrittenRate::new(now),
            stalls: Default::default(),
        });
        self.wb_index.insert((device, domain), id);
        self.devices[device.index()].wbs.push(id);
        id
    }
}
