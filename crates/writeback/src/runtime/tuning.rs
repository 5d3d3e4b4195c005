//! The engine's knobs for this runtime's own work, readable without the
//! cache's lock: `deferred_copy_min` (a write checks it before it takes
//! the lock) and `prefault_read_min` (a finished read checks it before it
//! takes the lock a second time). They live in the engine's config with
//! the other knobs (`wb_engine::Config`); this is a copy, refreshed under
//! the lock whenever a knob changes (`Cache::set_knob`).

use std::sync::atomic::{AtomicU64, Ordering};
use wb_engine::Config;

pub(crate) struct Tuning {
    deferred_copy_min_bytes: AtomicU64,
    prefault_read_min_bytes: AtomicU64,
}

impl Tuning {
    pub fn new(config: &Config) -> Tuning {
        let tuning = Tuning {
            deferred_copy_min_bytes: AtomicU64::new(0),
            prefault_read_min_bytes: AtomicU64::new(0),
        };
        tuning.update(config);
        tuning
    }

    /// Takes the values of `config` (the engine's, under the lock).
    pub fn update(&self, config: &Config) {
        self.deferred_copy_min_bytes
            .store(config.deferred_copy_min_bytes, Ordering::Relaxed);
        self.prefault_read_min_bytes
            .store(config.prefault_read_min_bytes, Ordering::Relaxed);
    }

    /// Whether a write of `len` bytes copies them outside the lock.
    pub fn defers_copy(&self, len: usize) -> bool {
        let min = self.deferred_copy_min_bytes.load(Ordering::Relaxed);
        min != 0 && len as u64 >= min
    }

    /// Whether a read of `len` bytes has its frames backed with memory
    /// before the copy into them.
    pub fn prefaults_read(&self, len: u64) -> bool {
        let min = self.prefault_read_min_bytes.load(Ordering::Relaxed);
        min != 0 && len >= min
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_follow_the_config_and_zero_means_never() {
        let mut config = Config::default();
        let tuning = Tuning::new(&config);
        assert!(!tuning.defers_copy(64 * 1024 - 1));
        assert!(tuning.defers_copy(64 * 1024));
        assert!(tuning.prefaults_read(64 * 1024));
        config.set("deferred_copy_min", "0").unwrap();
        config.set("prefault_read_min", "1MiB").unwrap();
        tuning.update(&config);
        assert!(!tuning.defers_copy(usize::MAX));
        assert!(!tuning.prefaults_read(1024 * 1024 - 1));
        assert!(tuning.prefaults_read(1024 * 1024));
    }
}
