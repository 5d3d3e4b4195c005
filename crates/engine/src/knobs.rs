//! Knobs changed at run time: validated as a whole before anything
//! changes (a bad value changes nothing), then applied to the state that
//! depends on them — wbt's target and depth, the dirty thresholds, the
//! flusher's period.

use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::DeviceId;
use crate::time::Instant;

impl Engine {
    /// Changes a device knob at run time. Bad values change nothing.
    pub fn set_device_knob(
        &mut self,
        device: DeviceId,
        knob: &str,
        value: &str,
    ) -> Result<(), crate::config::KnobError> {
        let Some(dev) = self.devices.get_mut(device.index()) else {
            return Err(crate::config::KnobError::Invalid {
                knob: knob.to_string(),
                value: value.to_string(),
                reason: format!("no device {}", device.0),
            });
        };
        let mut config = dev.config.clone();
        config.set(knob, value)?;
        let sum_min: u32 = self
            .devices
            .iter()
            .enumerate()
            .map(|(i, d)| {
                if i == device.index() {
                    config.min_ratio
                } else {
                    d.config.min_ratio
                }
            })
            .sum();
        if sum_min > 100 {
            return Err(crate::config::KnobError::Invalid {
                knob: knob.to_string(),
                value: value.to_string(),
                reason: "the devices' min_ratio values would add up to more than 100".to_string(),
            });
        }
        let dev = &mut self.devices[device.index()];
        if knob == "wbt_lat_usec" {
            let target = crate::device::state::wbt_target(&config, dev.idle_read_latency_ns);
            dev.wbt.set_min_lat(target);
            dev.stats.wbt_enabled = target != 0;
            dev.stats.wbt_target_ns = target;
        }
        if knob == "serial" {
            dev.wbt.serial = config.serial;
        }
        if knob == "wbt_pace" {
            dev.wbt.set_pace(config.wbt_pace);
        }
        if knob == "wbt_slice_ms" || knob == "wbt_slice_quiet_ms" {
            dev.wbt
                .slice
                .set(config.wbt_slice_ms, config.wbt_slice_quiet_ms);
        }
        if knob == "queue_depth" || knob == "nr_requests" {
            dev.wbt
                .set_queue_depth(crate::device::state::wbt_queue_depth(&config));
            // Tags already handed out stay valid; none is handed out until
            // they drain below a lowered limit (`issue`, `pump`).
            dev.tags_draining = dev.tags_used > config.nr_requests;
        }
        dev.config = config;
        Ok(())
    }

    /// Changes a cache-wide knob at run time. Bad values change nothing.
    /// The cache budget (`memory`) can be lowered, and raised again up to
    /// what the cache started with (the runtime's frames); over a lowered
    /// budget, clean pages go at once and dirty ones once written back.
    /// Written by hand, `memory` is the budget now and the ceiling a cache
    /// following memory pressure grows back up to (memory_budget/);
    /// `memory_min` its floor (a budget below a raised floor rises to it).
    pub fn set_knob(&mut self, knob: &str, value: &str) -> Result<(), crate::config::KnobError> {
        let mut config = self.config.clone();
        config.set(knob, value)?;
        let memory_pages = config.memory_bytes / crate::ids::PAGE_SIZE;
        if memory_pages > self.cache.frame_pages {
            return Err(crate::config::KnobError::Invalid {
                knob: knob.to_string(),
                value: value.to_string(),
                reason: format!(
                    "the cache started with {} and cannot grow past it while it runs",
                    crate::units::format_bytes(self.cache.frame_pages * crate::ids::PAGE_SIZE)
                ),
            });
        }
        if config.dirty_writeback_centisecs != self.config.dirty_writeback_centisecs {
            self.timers.next_kupdate = None;
        }
        let backlog_changed = config.backlog_throttle != self.config.backlog_throttle
            || config.backlog_wait_ms != self.config.backlog_wait_ms;
        self.config = config;
        self.cache.lru = self.config.lru;
        if backlog_changed {
            self.backlog_recheck();
        }
        let budget = match knob {
            "memory" => {
                self.memory_stats.reason = crate::memory_budget::stats::BudgetReason::Knob;
                memory_pages
            }
            "memory_min" if self.memory_pressure.is_some() => {
                let floor = (self.config.memory_min_bytes / crate::ids::PAGE_SIZE)
                    .min(self.ceiling_pages());
                if floor > self.cache.memory_pages {
                    self.memory_stats.reason = crate::memory_budget::stats::BudgetReason::Knob;
                }
                self.cache.memory_pages.max(floor)
            }
            // The dirty thresholds follow the other knobs.
            _ => self.cache.memory_pages,
        };
        self.set_budget_pages(budget);
        Ok(())
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
