//! Shared by the library's integration tests.

use std::path::{Path, PathBuf};
use writeback::{Cache, File};

/// A fresh directory for a test under the target's temporary directory, or
/// None (after skipping, with the reason) where O_DIRECT does not work.
#[allow(dead_code)]
pub fn direct_test_dir(name: &str) -> Option<PathBuf> {
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    if !writeback::io::supports_direct(&dir) {
        wb_testkit::skip(&format!("{} does not support O_DIRECT", dir.display()));
        return None;
    }
    Some(dir)
}

/// Syncs `file`, checks that the cache reads back `model` from its start,
/// closes it and `cache`, and checks that the backing file at `path`
/// holds `model` too. `what` names the case in failures.
// Each test binary compiles this module; not all of them use every helper.
#[allow(dead_code)]
pub fn sync_and_check_model(what: &str, cache: Cache, file: File, path: &Path, model: &[u8]) {
    file.sync_data().unwrap();
    let mut got = vec![0u8; model.len()];
    assert_eq!(file.read_at(&mut got, 0).unwrap(), model.len());
    assert!(got == model, "{what}: cache content equals the model");
    drop(file);
    drop(cache);
    assert!(
        std::fs::read(path).unwrap() == model,
        "{what}: disk content equals the model"
    );
}

/// Pseudo-random bytes from `seed`: data no layer below can compress or
/// mistake for another file's.
#[allow(dead_code)]
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    use rand_xoshiro::rand_core::{RngCore, SeedableRng};
    let mut bytes = vec![0; len];
    rand_xoshiro::SplitMix64::seed_from_u64(seed).fill_bytes(&mut bytes);
    bytes
}

/// The process's resident set in bytes (/proc/self/statm, in pages).
#[allow(dead_code)]
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|f| f.parse().ok())
        .expect("resident pages");
    pages * 4096
}

/// A cache of 64 MiB that starts no background write-back below its
/// budget (dirty_background_bytes = memory): a sync's waits are the
/// caller's, not the flusher's. No calibration.
#[allow(dead_code)]
pub fn small_cache_without_background_writeback() -> Cache {
    Cache::builder()
        .knob("memory", "64MiB")
        .and_then(|b| b.knob("dirty_background_bytes", "64MiB"))
        .expect("knobs")
        .calibrate(false)
        .build()
        .expect("cache")
}
