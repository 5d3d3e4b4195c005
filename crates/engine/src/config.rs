//! Knobs, with Linux's names and meanings. Every knob is set from text
//! (scenario files, `--set`, and later sysfs-style files all go through
//! [`Config::set`] / [`DeviceConfig::set`]) and validated there, so a bad
//! value is rejected before it changes anything.

use crate::units::{parse_bytes, UnitError};
use std::fmt;

/// Linux's default `dirty_ratio`, percent of the cache budget.
pub const DEFAULT_DIRTY_RATIO: u32 = 20;
/// Linux's default `dirty_background_ratio`.
pub const DEFAULT_DIRTY_BACKGROUND_RATIO: u32 = 10;
/// Linux's default `dirty_expire_centisecs` (30 s).
pub const DEFAULT_DIRTY_EXPIRE_CENTISECS: u32 = 3000;
/// Linux's default `dirty_writeback_centisecs` (5 s).
pub const DEFAULT_DIRTY_WRITEBACK_CENTISECS: u32 = 500;
/// Default cache budget.
pub const DEFAULT_MEMORY_BYTES: u64 = 1 << 30;
/// The smallest cache budget we accept: below this the thresholds round to nothing.
pub const MIN_MEMORY_BYTES: u64 = 4 << 20;
/// The largest cache budget we accept (the page table uses u32 page counts per file).
pub const MAX_MEMORY_BYTES: u64 = 1 << 44;
/// Default `memory_min`: the budget a cache following memory pressure
/// keeps however hard it is pressed (memory_budget.rs). 64 MiB keeps the
/// cache working as a cache: a dirty threshold of ~13 MiB (dirty_ratio 20)
/// still lets writeback build large requests, and a few readahead windows
/// fit; below it the cache would give back little and crawl.
pub const DEFAULT_MEMORY_MIN_BYTES: u64 = 64 << 20;

/// How writers are throttled when too much memory is dirty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirtyThrottle {
    /// Linux since 3.2: IO-less, proportional pauses, per-device shares.
    IoLess,
    /// Linux before the per-device fix (2007): one global limit; a throttled
    /// writer waits until its own device writes a chunk or the global dirty
    /// count falls below the limit. Kept to show the pathology.
    Global2007,
}

impl DirtyThrottle {
    pub fn name(self) -> &'static str {
        match self {
            DirtyThrottle::IoLess => "io-less",
            DirtyThrottle::Global2007 => "global-2007",
        }
    }
}

/// Who writes back the pages of uncached (DONTCACHE) writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DontcacheFlush {
    /// Layton 2026: the write kicks its context's flusher (a coalescing
    /// bit), which writes that many pages from the oldest dirty files.
    Kick,
    /// Linux 6.14–6.19: the writer submits writeback of the range it
    /// wrote before returning, and waits for the submission.
    Inline,
}

impl DontcacheFlush {
    pub fn name(self) -> &'static str {
        match self {
            DontcacheFlush::Kick => "kick",
            DontcacheFlush::Inline => "inline",
        }
    }
}

/// How the flusher counts the uncached pages a kick asks it to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DontcacheCounter {
    /// Each writeback context counts its own (Kara's review, per-wb
    /// WB_DONTCACHE_DIRTY).
    PerDomain,
    /// One cache-wide count, split among a device's contexts by write
    /// bandwidth (the patch before the review). Kept to show that it
    /// underestimates a domain writing beside a buffered one.
    GlobalSplit,
}

impl DontcacheCounter {
    pub fn name(self) -> &'static str {
        match self {
            DontcacheCounter::PerDomain => "per-domain",
            DontcacheCounter::GlobalSplit => "global-split",
        }
    }
}

/// How reclaim chooses the clean pages to free (lru.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lru {
    /// Linux's two lists: a page enters the inactive list and is promoted
    /// to the active one by a second access, or at once when it comes
    /// back soon after its eviction (refault distance, workingset.rs).
    /// Reclaim takes inactive pages; the active list is trimmed to keep
    /// the inactive one from getting too small. A stream touches each page
    /// once and so cannot push out pages used repeatedly.
    ActiveInactive,
    /// One CLOCK list: a page used since the hand last passed gets a second
    /// chance. Kept to show that a stream flushes the hot set.
    Clock,
}

impl Lru {
    pub fn name(self) -> &'static str {
        match self {
            Lru::ActiveInactive => "active-inactive",
            Lru::Clock => "clock",
        }
    }
}

/// How a producer of deferred work (an unlink's release of a file) is
/// held back when the device's backlog is long (backlog.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BacklogThrottle {
    /// Chinner 2021: above the high watermark the producer sets the
    /// throttle bit and sleeps until the worker brings the backlog under
    /// the low one; the two are `backlog_wait_ms` of work apart.
    Watermarks,
    /// XFS 2021: past a count bound (256 items) the producer waits for the
    /// whole backlog to be worked off (flush_work). Kept to show the
    /// pathology: a stall as long as the backlog.
    FlushAll,
}

impl BacklogThrottle {
    pub fn name(self) -> &'static str {
        match self {
            BacklogThrottle::Watermarks => "watermarks",
            BacklogThrottle::FlushAll => "flush-all",
        }
    }
}

/// Default `backlog_wait_ms`: how long a producer held back by the
/// backlog waits, about (Chinner 2021's ~100 ms).
pub const DEFAULT_BACKLOG_WAIT_MS: u32 = 100;
/// Largest `backlog_wait_ms` accepted (one minute).
pub const MAX_BACKLOG_WAIT_MS: u32 = 60_000;

/// What to do when a page under writeback is modified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StableWrites {
    /// Modify in place; the device does not checksum data in flight.
    None,
    /// Wait for the writeback to finish before modifying (Linux's stable pages).
    Wait,
    /// Copy the page for the I/O so the writer never waits (bounce snapshot).
    Snapshot,
    /// What the device declares: snapshot where it needs stable pages
    /// (Linux's queue/stable_writes = 1), none elsewhere.
    Auto,
}

impl StableWrites {
    pub fn name(self) -> &'static str {
        match self {
            StableWrites::None => "none",
            StableWrites::Wait => "wait",
            StableWrites::Snapshot => "snapshot",
            StableWrites::Auto => "auto",
        }
    }
}

/// A knob value that was rejected; nothing was changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KnobError {
    /// No knob by that name.
    Unknown {
        knob: String,
        known: &'static [&'static str],
    },
    /// The value does not parse or is out of range.
    Invalid {
        knob: String,
        value: String,
        reason: String,
    },
}

impl fmt::Display for KnobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KnobError::Unknown { knob, known } => {
                write!(f, "unknown knob '{knob}' (known: {})", known.join(", "))
            }
            KnobError::Invalid {
                knob,
                value,
                reason,
            } => {
                write!(f, "invalid value '{value}' for {knob}: {reason}")
            }
        }
    }
}

impl std::error::Error for KnobError {}

fn invalid(knob: &str, value: &str, reason: impl Into<String>) -> KnobError {
    KnobError::Invalid {
        knob: knob.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

fn parse_int<T>(knob: &str, value: &str, min: T, max: T) -> Result<T, KnobError>
where
    T: std::str::FromStr + PartialOrd + fmt::Display + Copy,
{
    let parsed: T = value
        .trim()
        .parse()
        .map_err(|_| invalid(knob, value, "not an integer"))?;
    if parsed < min || parsed > max {
        return Err(invalid(
            knob,
            value,
            format!("must be between {min} and {max}"),
        ));
    }
    Ok(parsed)
}

fn parse_size(knob: &str, value: &str, min: u64, max: u64) -> Result<u64, KnobError> {
    let bytes = parse_bytes(value).map_err(|UnitError(e)| invalid(knob, value, e))?;
    if bytes != 0 && (bytes < min || bytes > max) {
        return Err(invalid(
            knob,
            value,
            format!("must be 0 or between {min} and {max} bytes"),
        ));
    }
    Ok(bytes)
}

fn parse_bool(knob: &str, value: &str) -> Result<bool, KnobError> {
    match value.trim() {
        "1" | "true" | "on" | "yes" => Ok(true),
        "0" | "false" | "off" | "no" => Ok(false),
        _ => Err(invalid(knob, value, "expected 0/1, true/false or on/off")),
    }
}

/// Cache-wide knobs.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The cache budget: clean + dirty + writeback pages never exceed it.
    /// A cache that follows memory pressure (memory_budget.rs) takes it as
    /// its ceiling: the budget shrinks below it under pressure and grows
    /// back up to it.
    pub memory_bytes: u64,
    /// The floor of a cache that follows memory pressure: it never gives
    /// back memory below this (Linux's memory.min); above `memory` it
    /// means `memory`. 0: the smallest budget, MIN_MEMORY_BYTES.
    pub memory_min_bytes: u64,
    pub dirty_ratio: u32,
    pub dirty_background_ratio: u32,
    /// When non-zero, overrides `dirty_ratio`.
    pub dirty_bytes: u64,
    /// When non-zero, overrides `dirty_background_ratio`.
    pub dirty_background_bytes: u64,
    pub dirty_expire_centisecs: u32,
    /// Period of kupdate-style writeback; 0 disables it.
    pub dirty_writeback_centisecs: u32,
    pub dirty_throttle: DirtyThrottle,
    pub dontcache_flush: DontcacheFlush,
    pub dontcache_counter: DontcacheCounter,
    pub backlog_throttle: BacklogThrottle,
    /// The gap between the backlog's watermarks, in milliseconds of work.
    pub backlog_wait_ms: u32,
    pub lru: Lru,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            memory_bytes: DEFAULT_MEMORY_BYTES,
            memory_min_bytes: DEFAULT_MEMORY_MIN_BYTES,
            dirty_ratio: DEFAULT_DIRTY_RATIO,
            dirty_background_ratio: DEFAULT_DIRTY_BACKGROUND_RATIO,
            dirty_bytes: 0,
            dirty_background_bytes: 0,
            dirty_expire_centisecs: DEFAULT_DIRTY_EXPIRE_CENTISECS,
            dirty_writeback_centisecs: DEFAULT_DIRTY_WRITEBACK_CENTISECS,
            dirty_throttle: DirtyThrottle::IoLess,
            dontcache_flush: DontcacheFlush::Kick,
            dontcache_counter: DontcacheCounter::PerDomain,
            backlog_throttle: BacklogThrottle::Watermarks,
            backlog_wait_ms: DEFAULT_BACKLOG_WAIT_MS,
            lru: Lru::ActiveInactive,
        }
    }
}

impl Config {
    pub const KNOBS: &'static [&'static str] = &[
        "memory",
        "memory_min",
        "dirty_ratio",
        "dirty_background_ratio",
        "dirty_bytes",
        "dirty_background_bytes",
        "dirty_expire_centisecs",
        "dirty_writeback_centisecs",
        "dirty_throttle",
        "dontcache_flush",
        "dontcache_counter",
        "backlog_throttle",
        "backlog_wait_ms",
        "lru",
    ];

    /// Sets one knob from text. On error nothing changes.
    pub fn set(&mut self, knob: &str, value: &str) -> Result<(), KnobError> {
        match knob {
            "memory" => {
                let bytes = parse_bytes(value).map_err(|UnitError(e)| invalid(knob, value, e))?;
                if !(MIN_MEMORY_BYTES..=MAX_MEMORY_BYTES).contains(&bytes) {
                    return Err(invalid(knob, value, "must be between 4MiB and 16TiB"));
                }
                self.memory_bytes = bytes;
            }
            "memory_min" => {
                let bytes = parse_bytes(value).map_err(|UnitError(e)| invalid(knob, value, e))?;
                if bytes != 0 && !(MIN_MEMORY_BYTES..=MAX_MEMORY_BYTES).contains(&bytes) {
                    return Err(invalid(knob, value, "must be 0 or between 4MiB and 16TiB"));
                }
                self.memory_min_bytes = bytes;
            }
            "dirty_ratio" => self.dirty_ratio = parse_int(knob, value, 1, 100)?,
            "dirty_background_ratio" => {
                self.dirty_background_ratio = parse_int(knob, value, 0, 100)?
            }
            "dirty_bytes" => {
                self.dirty_bytes = parse_size(knob, value, 2 * 4096, MAX_MEMORY_BYTES)?
            }
            "dirty_background_bytes" => {
                self.dirty_background_bytes = parse_size(knob, value, 4096, MAX_MEMORY_BYTES)?
            }
            "dirty_expire_centisecs" => {
                self.dirty_expire_centisecs = parse_int(knob, value, 1, 8_640_000)?
            }
            "dirty_writeback_centisecs" => {
                self.dirty_writeback_centisecs = parse_int(knob, value, 0, 8_640_000)?
            }
            "dirty_throttle" => {
                self.dirty_throttle = match value.trim() {
                    "io-less" => DirtyThrottle::IoLess,
                    "global-2007" => DirtyThrottle::Global2007,
                    _ => return Err(invalid(knob, value, "expected 'io-less' or 'global-2007'")),
                }
            }
            "dontcache_flush" => {
                self.dontcache_flush = match value.trim() {
                    "kick" => DontcacheFlush::Kick,
                    "inline" => DontcacheFlush::Inline,
                    _ => return Err(invalid(knob, value, "expected 'kick' or 'inline'")),
                }
            }
            "dontcache_counter" => {
                self.dontcache_counter = match value.trim() {
                    "per-domain" => DontcacheCounter::PerDomain,
                    "global-split" => DontcacheCounter::GlobalSplit,
                    _ => {
                        return Err(invalid(
                            knob,
                            value,
                            "expected 'per-domain' or 'global-split'",
                        ))
                    }
                }
            }
            "backlog_throttle" => {
                self.backlog_throttle = match value.trim() {
                    "watermarks" => BacklogThrottle::Watermarks,
                    "flush-all" => BacklogThrottle::FlushAll,
                    _ => return Err(invalid(knob, value, "expected 'watermarks' or 'flush-all'")),
                }
            }
            "backlog_wait_ms" => {
                self.backlog_wait_ms = parse_int(knob, value, 1, MAX_BACKLOG_WAIT_MS)?
            }
            "lru" => {
                self.lru = match value.trim() {
                    "active-inactive" => Lru::ActiveInactive,
                    "clock" => Lru::Clock,
                    _ => {
                        return Err(invalid(
                            knob,
                            value,
                            "expected 'active-inactive' or 'clock'",
                        ))
                    }
                }
            }
            _ => {
                return Err(KnobError::Unknown {
                    knob: knob.to_string(),
                    known: Self::KNOBS,
                })
            }
        }
        Ok(())
    }

    /// Reads one knob back as text, in the form `set` accepts.
    pub fn get(&self, knob: &str) -> Option<String> {
        Some(match knob {
            "memory" => self.memory_bytes.to_string(),
            "memory_min" => self.memory_min_bytes.to_string(),
            "dirty_ratio" => self.dirty_ratio.to_string(),
            "dirty_background_ratio" => self.dirty_background_ratio.to_string(),
            "dirty_bytes" => self.dirty_bytes.to_string(),
            "dirty_background_bytes" => self.dirty_background_bytes.to_string(),
            "dirty_expire_centisecs" => self.dirty_expire_centisecs.to_string(),
            "dirty_writeback_centisecs" => self.dirty_writeback_centisecs.to_string(),
            "dirty_throttle" => self.dirty_throttle.name().to_string(),
            "dontcache_flush" => self.dontcache_flush.name().to_string(),
            "dontcache_counter" => self.dontcache_counter.name().to_string(),
            "backlog_throttle" => self.backlog_throttle.name().to_string(),
            "backlog_wait_ms" => self.backlog_wait_ms.to_string(),
            "lru" => self.lru.name().to_string(),
            _ => return None,
        })
    }
}

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
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_change_nothing() {
        let mut config = Config::default();
        assert!(config.set("dirty_ratio", "150").is_err());
        assert!(config.set("dirty_ratio", "x").is_err());
        assert!(config.set("memory", "1KiB").is_err());
        assert!(config.set("memory_min", "1MiB").is_err());
        assert!(config.set("memory_min", "32TiB").is_err());
        assert!(config.set("memory_min", "lots").is_err());
        assert!(matches!(
            config.set("nope", "1"),
            Err(KnobError::Unknown { .. })
        ));
        assert_eq!(config, Config::default());

        let mut device = DeviceConfig::default();
        assert!(device.set("min_ratio", "101").is_err());
        assert!(device.set("max_sectors_kb", "6").is_err());
        assert!(device.set("serial", "maybe").is_err());
        assert!(device.set("wbt_pace", "2").is_err());
        device.set("max_ratio", "10").unwrap();
        let before = device.clone();
        assert!(device.set("min_ratio", "20").is_err());
        assert_eq!(device, before);
    }

    #[test]
    fn round_trip() {
        let mut device = DeviceConfig::default();
        for knob in DeviceConfig::KNOBS {
            let value = device.get(knob).unwrap();
            device.set(knob, &value).unwrap();
        }
        assert_eq!(device, DeviceConfig::default());
        let mut config = Config::default();
        config.set("dirty_throttle", "global-2007").unwrap();
        assert_eq!(config.get("dirty_throttle").unwrap(), "global-2007");
        config.set("memory_min", "128MiB").unwrap();
        assert_eq!(config.get("memory_min").unwrap(), "134217728");
        config.set("memory_min", "0").unwrap();
        assert_eq!(config.memory_min_bytes, 0);
    }

    #[test]
    fn memory_min_errors_say_what_is_accepted() {
        let e = Config::default().set("memory_min", "1MiB").unwrap_err();
        assert_eq!(
            e,
            KnobError::Invalid {
                knob: "memory_min".into(),
                value: "1MiB".into(),
                reason: "must be 0 or between 4MiB and 16TiB".into(),
            }
        );
    }
}
