//! A device: its knobs, its writeback throttle, its request tags and the
//! reads waiting for one, and the writeback contexts that write to it.

use crate::action::IoRequest;
use crate::config::DeviceConfig;
use crate::engine::Engine;
use crate::ids::{DeviceId, WbId};
use crate::stats::DeviceStats;
use crate::time::Instant;
use crate::wbt::{auto_target_ns, Wbt};
use std::collections::VecDeque;

/// Most devices one engine serves (the table is dense).
pub const MAX_DEVICES: usize = 256;

#[derive(Debug)]
pub(crate) struct Device {
    pub config: DeviceConfig,
    pub wbt: Wbt,
    pub idle_read_latency_ns: u64,
    pub tags_used: u32,
    /// nr_requests was lowered below the tags in use: no tag is handed out
    /// until they drain below it (Linux freezes the queue instead).
    pub tags_draining: bool,
    /// Reads waiting for a tag, in arrival order.
    pub tag_waiters: VecDeque<IoRequest>,
    /// Last time a writer to this device slept in the dirty throttle.
    pub last_bdp_sleep: Option<Instant>,
    pub wbs: Vec<WbId>,
    /// Which context the flusher pump starts with next (round robin).
    pub next_wb: usize,
    pub stats: DeviceStats,
}

impl Engine {
    pub(crate) fn wbt_target(config: &DeviceConfig, idle_read_latency_ns: u64) -> u64 {
        match config.wbt_lat_usec {
            -1 => auto_target_ns(idle_read_latency_ns),
            usec => usec.max(0) as u64 * crate::time::NS_PER_US,
        }
    }

    /// The depth wbt scales from: the device's own queue, or the block
    /// layer's tags when there are fewer (no more can be in flight).
    pub(crate) fn wbt_queue_depth(config: &DeviceConfig) -> u32 {
        config.queue_depth.min(config.nr_requests)
    }

    pub(crate) fn recent_dirty_sleep(&self, device: DeviceId, now: Instant) -> bool {
        self.devices[device.index()]
            .last_bdp_sleep
            .is_some_and(|t| now.since_ns(t) < crate::wbt::RECENT_WAIT_NS)
    }

    /// Reports reads the device served for others since the last report
    /// (from the device's statistics): `reads` reads taking `latency_ns` in
    /// all. Lets wbt protect readers outside the engine.
    pub fn note_foreign_reads(
        &mut self,
        now: Instant,
        device: DeviceId,
        reads: u64,
        latency_ns: u64,
    ) {
        if reads == 0 {
            return;
        }
        let wbt = &mut self.devices[device.index()].wbt;
        if wbt.enabled() {
            wbt.on_foreign_reads(now, reads, latency_ns / reads);
        }
    }
}
