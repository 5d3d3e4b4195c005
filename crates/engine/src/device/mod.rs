//! A device: its knobs, its writeback throttle, its request tags and the
//! reads waiting for one, and the writeback contexts that write to it
//! (state.rs). Here, the engine's side: wbt's target and depth from the
//! knobs, and what the runtime reports of the device.

pub(crate) mod state;

use crate::config::DeviceConfig;
use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::DeviceId;
use crate::time::Instant;
use crate::wbt::auto_target_ns;

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

    /// Reports whether `device` needs pages kept stable while they are
    /// written (it checksums data in flight: Linux's queue/stable_writes).
    /// With `stable_writes = auto` this picks snapshot (true) or none.
    pub fn set_stable_writes_required(
        &mut self,
        device: DeviceId,
        required: bool,
    ) -> Result<(), EngineError> {
        let dev = self
            .devices
            .get_mut(device.index())
            .ok_or(EngineError::BadDevice(device))?;
        dev.stable_required = required;
        Ok(())
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
    ) -> Result<(), EngineError> {
        let dev = self
            .devices
            .get_mut(device.index())
            .ok_or(EngineError::BadDevice(device))?;
        if reads > 0 && dev.wbt.enabled() {
            dev.wbt.on_foreign_reads(now, reads, latency_ns / reads);
        }
        Ok(())
    }
}
