//! A writeback context's state (Linux's struct bdi_writeback): its page
//! counts, bandwidth estimate, rate limit, share of completions, dirty
//! files and flusher (wb/ makes them).

use crate::action::StallReason;
use crate::bandwidth::estimate::WriteBandwidth;
use crate::dontcache::stats::DontcacheStats;
use crate::dontcache::written_rate::WrittenRate;
use crate::flusher::work::Flusher;
use crate::ids::{DeviceId, DomainId, FileId};
use crate::proportions::FpropLocal;
use crate::ratelimit::DirtyRatelimit;
use crate::stats::counters::StallStats;
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
    pub fn has_io(&self) -> bool {
        self.dirty > 0 || self.writeback > 0
    }
}
