//! Per-device knobs.

use super::knob_error::{invalid, parse_bool, parse_int, parse_mode, KnobError};
use super::modes::{ExtendingWrites, StableWrites};

/// Per-device knobs.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceConfig {
    /// blk-wbt latency target: -1 auto, 0 off, N microseconds.
    pub wbt_lat_usec: i64,
    pub stable_writes: StableWrites,
    /// Percent of the dirty limit this device is guaranteed.
    pub min_ratio: u32,
    /// Percent of the dirty limit this device may use at most.
    pub max_ratio: u32,
    /// Throttle on this device's own share even below the global freerun.
    pub strict_limit: bool,
    /// Commands the device itself queues (NCQ depth); wbt scales from it.
    pub queue_depth: u32,
    /// Requests the block layer lets be outstanding (tags); a submitter past it waits.
    pub nr_requests: u32,
    pub read_ahead_kb: u32,
    /// Largest single request.
    pub max_sectors_kb: u32,
    /// The device serves one request at a time, in the order they came,
    /// each to its end: a read waits for the whole write ahead of it,
    /// however shallow the queue (a loop device without direct I/O runs
    /// every request in one worker). wbt then caps writes smaller while
    /// reads compete (`Wbt::write_pages_cap`).
    pub serial: bool,
    /// At depth 1, slow commits pace background writes (`wbt_pace.rs`;
    /// ours). Off: wbt stops at depth 1, as Linux's does.
    pub wbt_pace: bool,
    /// While reads compete, writes go in phases of this many ms with a
    /// quiet quarter of it between (`wbt_slice.rs`; ours); 0: off.
    pub wbt_slice_ms: u32,
    /// The quiet phase between write phases, in ms; 0: a quarter of
    /// `wbt_slice_ms`.
    pub wbt_slice_quiet_ms: u32,
    /// Write-backs that make a file longer: side by side (`parallel`, the
    /// default) or one at a time per file, in order (`one-per-file`; the
    /// library and the mount set it). Not `serial`, which is about every
    /// request of the device.
    pub extending_writes: ExtendingWrites,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig {
            wbt_lat_usec: -1,
            stable_writes: StableWrites::Auto,
            min_ratio: 0,
            max_ratio: 100,
            strict_limit: false,
            queue_depth: 32,
            nr_requests: 128,
            read_ahead_kb: 128,
            max_sectors_kb: 512,
            serial: false,
            wbt_pace: true,
            wbt_slice_ms: 0,
            wbt_slice_quiet_ms: 0,
            extending_writes: ExtendingWrites::Parallel,
        }
    }
}

impl DeviceConfig {
    /// Pages a request carries at most: at least one (max_sectors_kb is a
    /// multiple of 4, at least 4).
    pub fn max_request_pages(&self) -> u64 {
        self.max_sectors_kb as u64 / 4
    }

    pub const KNOBS: &'static [&'static str] = &[
        "wbt_lat_usec",
        "stable_writes",
        "min_ratio",
        "max_ratio",
        "strict_limit",
        "queue_depth",
        "nr_requests",
        "read_ahead_kb",
        "max_sectors_kb",
        "serial",
        "wbt_pace",
        "wbt_slice_ms",
        "wbt_slice_quiet_ms",
        "extending_writes",
    ];

    /// Sets one knob from text. On error nothing changes.
    pub fn set(&mut self, knob: &str, value: &str) -> Result<(), KnobError> {
        let mut next = self.clone();
        match knob {
            "wbt_lat_usec" => next.wbt_lat_usec = parse_int(knob, value, -1, 10_000_000)?,
            "stable_writes" => {
                next.stable_writes = match value.trim() {
                    "none" => StableWrites::None,
                    "wait" => StableWrites::Wait,
                    "snapshot" => StableWrites::Snapshot,
                    "auto" => StableWrites::Auto,
                    _ => {
                        return Err(invalid(
                            knob,
                            value,
                            "expected none, wait, snapshot or auto",
                        ))
                    }
                }
            }
            "min_ratio" => next.min_ratio = parse_int(knob, value, 0, 100)?,
            "max_ratio" => next.max_ratio = parse_int(knob, value, 0, 100)?,
            "strict_limit" => next.strict_limit = parse_bool(knob, value)?,
            "queue_depth" => next.queue_depth = parse_int(knob, value, 1, 4096)?,
            "nr_requests" => next.nr_requests = parse_int(knob, value, 1, 65_536)?,
            "read_ahead_kb" => next.read_ahead_kb = parse_int(knob, value, 0, 65_536)?,
            "max_sectors_kb" => {
                let kb: u32 = parse_int(knob, value, 4, 65_536)?;
                if !kb.is_multiple_of(4) {
                    return Err(invalid(
                        knob,
                        value,
                        "must be a multiple of 4 (whole pages)",
                    ));
                }
                next.max_sectors_kb = kb;
            }
            "serial" => next.serial = parse_bool(knob, value)?,
            "wbt_pace" => next.wbt_pace = parse_bool(knob, value)?,
            "wbt_slice_ms" => {
                next.wbt_slice_ms = parse_int(knob, value, 0, crate::wbt_slice::MAX_SLICE_MS)?
            }
            "wbt_slice_quiet_ms" => {
                next.wbt_slice_quiet_ms = parse_int(knob, value, 0, crate::wbt_slice::MAX_SLICE_MS)?
            }
            "extending_writes" => {
                next.extending_writes =
                    parse_mode(knob, value, &ExtendingWrites::ALL, ExtendingWrites::name)?
            }
            _ => {
                return Err(KnobError::Unknown {
                    knob: knob.to_string(),
                    known: Self::KNOBS,
                })
            }
        }
        if next.min_ratio > next.max_ratio {
            return Err(invalid(
                knob,
                value,
                format!(
                    "min_ratio ({}) may not exceed max_ratio ({})",
                    next.min_ratio, next.max_ratio
                ),
            ));
        }
        *self = next;
        Ok(())
    }

    /// Reads one knob back as text, in the form `set` accepts.
    pub fn get(&self, knob: &str) -> Option<String> {
        Some(match knob {
            "wbt_lat_usec" => self.wbt_lat_usec.to_string(),
            "stable_writes" => self.stable_writes.name().to_string(),
            "min_ratio" => self.min_ratio.to_string(),
            "max_ratio" => self.max_ratio.to_string(),
            "strict_limit" => u8::from(self.strict_limit).to_string(),
            "queue_depth" => self.queue_depth.to_string(),
            "nr_requests" => self.nr_requests.to_string(),
            "read_ahead_kb" => self.read_ahead_kb.to_string(),
            "max_sectors_kb" => self.max_sectors_kb.to_string(),
            "serial" => u8::from(self.serial).to_string(),
            "wbt_pace" => u8::from(self.wbt_pace).to_string(),
            "wbt_slice_ms" => self.wbt_slice_ms.to_string(),
            "wbt_slice_quiet_ms" => self.wbt_slice_quiet_ms.to_string(),
            "extending_writes" => self.extending_writes.name().to_string(),
            _ => return None,
        })
    }
}
