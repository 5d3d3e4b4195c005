//! Writeback contexts: one per (device, domain) pair, Linux's
//! bdi_writeback. Each has its own dirty and writeback counts, write
//! bandwidth, dirty rate limit, share of completions, list of dirty files
//! in first-dirtied order, and flusher.

pub(crate) mod state;

use crate::bandwidth::estimate::WriteBandwidth;
use crate::dontcache::written_rate::WrittenRate;
use crate::engine::Engine;
use crate::flusher::work::Flusher;
use crate::ids::{DeviceId, DomainId, WbId};
use crate::proportions::FpropLocal;
use crate::ratelimit::DirtyRatelimit;
use crate::time::Instant;
use std::collections::BTreeSet;

pub(crate) use crate::wb::state::Wb;

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
            written_rate: WrittenRate::new(now),
            stalls: Default::default(),
        });
        self.wb_index.insert((device, domain), id);
        self.devices[device.index()].wbs.push(id);
        id
    }
}
