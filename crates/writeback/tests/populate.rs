//! The cache backs the frames it will use next with memory ahead of use
//! (runtime/populate.rs), a bounded amount beyond what it uses: its
//! populating thread reaches exactly `AHEAD` beyond the frames in use and
//! stops there, and the process's resident set grows by that much at
//! start and follows the cache as it fills. (Its own test binary: nothing
//! else in the process moves its RSS.)

mod common;

use std::time::{Duration, Instant};
use writeback::{Cache, OpenOptions};

const MIB: u64 = 1 << 20;
/// runtime/populate.rs, POPULATE_AHEAD_PAGES.
const AHEAD: u64 = 32 * MIB;

/// Waits (at most 20 s, for a busy machine) until the cache's populating
/// thread has backed `AHEAD` beyond the frames in use (it stops there);
/// returns what it backed.
fn populated_ahead(cache: &Cache) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (backed, used) = (cache.populated_bytes(), cache.frames_used_bytes());
        if backed >= used + AHEAD || Instant::now() >= deadline {
            return backed;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn frames_are_populated_a_bounded_amount_ahead_of_use() {
    let Some(dir) = common::direct_test_dir("populate") else {
        return;
    };
    let base = common::rss_bytes();
    let cache = Cache::builder()
        .knob("memory", "512MiB")
        .unwrap()
        .calibrate(false)
        .build()
        .unwrap();
    // An empty cache: AHEAD backed, exactly.
    let backed = populated_ahead(&cache);
    assert_eq!(backed, AHEAD, "backed ahead of an empty cache");
    let rss = common::rss_bytes();
    assert!(
        rss >= base + AHEAD - 4 * MIB && rss <= base + AHEAD + 24 * MIB,
        "RSS {} MiB, {} MiB before the cache, {} MiB backed",
        rss / MIB,
        base / MIB,
        backed / MIB
    );

    // 128 MiB cached: the frames backed follow, AHEAD beyond them.
    let file = cache
        .open(dir.join("f"), OpenOptions { create: true })
        .unwrap();
    let chunk = common::pattern(3, MIB as usize);
    for i in 0..128 {
        file.write_at(&chunk, i * MIB).unwrap();
    }
    let backed = populated_ahead(&cache);
    let used = cache.frames_used_bytes();
    assert!(
        used >= 128 * MIB,
        "128 MiB cached in {} MiB of frames",
        used / MIB
    );
    assert_eq!(
        backed,
        (used + AHEAD).min(512 * MIB),
        "backed with {} MiB of frames in use",
        used / MIB
    );
    let rss = common::rss_bytes();
    assert!(
        rss >= base + 128 * MIB + AHEAD - 4 * MIB && rss <= base + 128 * MIB + AHEAD + 32 * MIB,
        "RSS {} MiB with {} MiB backed, {} MiB before",
        rss / MIB,
        backed / MIB,
        base / MIB
    );
    let mut got = vec![0u8; MIB as usize];
    for i in [0, 64, 127] {
        file.read_at(&mut got, i * MIB).unwrap();
        assert!(got == chunk, "MiB {i} reads back");
    }
}
