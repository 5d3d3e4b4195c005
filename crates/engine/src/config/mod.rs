//! Knobs, with Linux's names and meanings. Every knob is set from text
//! (scenario files, `--set`, and later sysfs-style files all go through
//! [`Config::set`] / [`DeviceConfig::set`]) and validated there, so a bad
//! value is rejected before it changes anything.
//!
//! Files here: the cache-wide knobs (this file), the per-device ones
//! (device.rs), the knobs that choose a mode (modes.rs), and parsing and
//! its errors (knob_error.rs).

mod device;
mod knob_error;
mod modes;

pub use device::DeviceConfig;
pub use knob_error::KnobError;
pub use modes::{
    BacklogThrottle, DirtyThrottle, DontcacheCounter, DontcacheFlush, ExtendingWrites, Lru,
    StableWrites, DEFAULT_BACKLOG_WAIT_MS, MAX_BACKLOG_WAIT_MS,
};

use crate::units::{parse_bytes, UnitError};
use knob_error::{invalid, parse_int, parse_mode, parse_size};

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
/// keeps however hard it is pressed (memory_budget/). 64 MiB keeps the
/// cache working as a cache: a dirty threshold of ~13 MiB (dirty_ratio 20)
/// still lets writeback build large requests, and a few readahead windows
/// fit; below it the cache would give back little and crawl.
pub const DEFAULT_MEMORY_MIN_BYTES: u64 = 64 << 20;

/// Default `deferred_copy_min`: a 64 KiB copy takes some 5 us, several
/// times the cost of the second trip through the cache's lock that copying
/// outside it takes.
pub const DEFAULT_DEFERRED_COPY_MIN_BYTES: u64 = 64 << 10;
/// Default `prefault_read_min`: readahead and sequential reads; a small
/// read rarely meets a fresh huge page, and the look-up costs a second
/// trip through the lock.
pub const DEFAULT_PREFAULT_READ_MIN_BYTES: u64 = 64 << 10;
/// Default `release_batch`: MADV_DONTNEED frees populated huge pages at
/// ~400 GiB/s on this project's virtual machine (0.6–0.8 ms for 256 MiB,
/// measured), so a batch holds the cache's lock under a millisecond, and
/// 8 GiB go back in 32 batches.
pub const DEFAULT_RELEASE_BATCH_BYTES: u64 = 256 << 20;
/// The smallest `release_batch`: one huge page.
pub const MIN_RELEASE_BATCH_BYTES: u64 = 2 << 20;
/// Default `backing_files_percent`: half the open-file limit for the
/// cache's backing files, the other half the program's own.
pub const DEFAULT_BACKING_FILES_PERCENT: u32 = 50;

/// Cache-wide knobs.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The cache budget: clean + dirty + writeback pages never exceed it.
    /// A cache that follows memory pressure (memory_budget/) takes it as
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
    /// The real runtime's tuning (the simulator has no bytes to copy,
    /// memory to give back or descriptors to keep, and ignores them).
    /// Writes of at least this many bytes copy them outside the cache's
    /// lock (`WriteFlags::deferred_copy`); 0: never.
    pub deferred_copy_min_bytes: u64,
    /// Reads from the device of at least this many bytes have their frames
    /// backed with memory before the copy into them under the lock; 0:
    /// never.
    pub prefault_read_min_bytes: u64,
    /// The most free memory given back to the system at a time (under the
    /// lock) when the budget shrinks.
    pub release_batch_bytes: u64,
    /// The backing files kept open at most, as a percent of the process's
    /// open-file limit (RLIMIT_NOFILE); past it the least recently used
    /// idle ones are let go of (evict/). The rest of the limit is the
    /// program's: the mount sets 40, as it holds a descriptor per inode
    /// the kernel remembers too.
    pub backing_files_percent: u32,
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
            deferred_copy_min_bytes: DEFAULT_DEFERRED_COPY_MIN_BYTES,
            prefault_read_min_bytes: DEFAULT_PREFAULT_READ_MIN_BYTES,
            release_batch_bytes: DEFAULT_RELEASE_BATCH_BYTES,
            backing_files_percent: DEFAULT_BACKING_FILES_PERCENT,
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
        "deferred_copy_min",
        "prefault_read_min",
        "release_batch",
        "backing_files_percent",
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
                self.dirty_throttle =
                    parse_mode(knob, value, &DirtyThrottle::ALL, DirtyThrottle::name)?
            }
            "dontcache_flush" => {
                self.dontcache_flush =
                    parse_mode(knob, value, &DontcacheFlush::ALL, DontcacheFlush::name)?
            }
            "dontcache_counter" => {
                self.dontcache_counter =
                    parse_mode(knob, value, &DontcacheCounter::ALL, DontcacheCounter::name)?
            }
            "backlog_throttle" => {
                self.backlog_throttle =
                    parse_mode(knob, value, &BacklogThrottle::ALL, BacklogThrottle::name)?
            }
            "backlog_wait_ms" => {
                self.backlog_wait_ms = parse_int(knob, value, 1, MAX_BACKLOG_WAIT_MS)?
            }
            "lru" => self.lru = parse_mode(knob, value, &Lru::ALL, Lru::name)?,
            "deferred_copy_min" => {
                self.deferred_copy_min_bytes = parse_size(knob, value, 4096, 1 << 30)?
            }
            "prefault_read_min" => {
                self.prefault_read_min_bytes = parse_size(knob, value, 4096, 1 << 30)?
            }
            "release_batch" => {
                let bytes = parse_bytes(value).map_err(|UnitError(e)| invalid(knob, value, e))?;
                if !(MIN_RELEASE_BATCH_BYTES..=MAX_MEMORY_BYTES).contains(&bytes) {
                    return Err(invalid(knob, value, "must be between 2MiB and 16TiB"));
                }
                self.release_batch_bytes = bytes;
            }
            "backing_files_percent" => self.backing_files_percent = parse_int(knob, value, 1, 100)?,
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
            "deferred_copy_min" => self.deferred_copy_min_bytes.to_string(),
            "prefault_read_min" => self.prefault_read_min_bytes.to_string(),
            "release_batch" => self.release_batch_bytes.to_string(),
            "backing_files_percent" => self.backing_files_percent.to_string(),
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
        assert_eq!(
            config.set("lru", "lfu").map_err(|e| e.to_string()),
            Err("invalid value 'lfu' for lru: expected 'active-inactive' or 'clock'".into())
        );
        assert_eq!(config.set("dirty_throttle", " global-2007 "), Ok(()));
        assert_eq!(config.dirty_throttle, DirtyThrottle::Global2007);
        config.dirty_throttle = DirtyThrottle::IoLess;
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
        assert_eq!(
            device
                .set("extending_writes", "serial")
                .map_err(|e| e.to_string()),
            Err("invalid value 'serial' for extending_writes: \
                 expected 'parallel' or 'one-per-file'"
                .into())
        );
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
        device.set("extending_writes", "one-per-file").unwrap();
        assert_eq!(device.extending_writes, ExtendingWrites::OnePerFile);
        assert_eq!(device.get("extending_writes").unwrap(), "one-per-file");
        let mut config = Config::default();
        config.set("dirty_throttle", "global-2007").unwrap();
        assert_eq!(config.get("dirty_throttle").unwrap(), "global-2007");
        config.set("memory_min", "128MiB").unwrap();
        assert_eq!(config.get("memory_min").unwrap(), "134217728");
        config.set("memory_min", "0").unwrap();
        assert_eq!(config.memory_min_bytes, 0);
    }

    #[test]
    fn runtime_tuning_knobs_are_bounded_and_read_back() {
        let mut config = Config::default();
        for (knob, bad) in [
            ("deferred_copy_min", "1KiB"),
            ("deferred_copy_min", "2GiB"),
            ("prefault_read_min", "-1"),
            ("release_batch", "1MiB"),
            ("release_batch", "0"),
            ("release_batch", "lots"),
            ("backing_files_percent", "0"),
            ("backing_files_percent", "101"),
        ] {
            assert!(config.set(knob, bad).is_err(), "{knob}={bad} accepted");
        }
        assert_eq!(config, Config::default());
        config.set("deferred_copy_min", "0").unwrap();
        config.set("prefault_read_min", "1MiB").unwrap();
        config.set("release_batch", "2MiB").unwrap();
        config.set("backing_files_percent", "40").unwrap();
        assert_eq!(config.backing_files_percent, 40);
        assert_eq!(config.deferred_copy_min_bytes, 0);
        assert_eq!(config.get("prefault_read_min").unwrap(), "1048576");
        assert_eq!(config.release_batch_bytes, 2 << 20);
        let mut again = Config::default();
        for knob in Config::KNOBS {
            again.set(knob, &config.get(knob).unwrap()).unwrap();
        }
        assert_eq!(again, config, "every knob reads back as it was set");
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
