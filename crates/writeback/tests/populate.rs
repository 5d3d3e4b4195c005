//! The cache backs the frames it will use next with memory ahead of use
//! (runtime/populate.rs), a bounded amount beyond what it uses: the
//! process's resident set grows by about that amount at start, and
//! follows the cache as it fills. (Its own test binary: nothing else in
//! the process moves its RSS.)

mod common;

use std::time::{Duration, Instant};
use writeback::{Cache, OpenOptions};

const MIB: u64 = 1 << 20;
/// runtime/populate.rs, POPULATE_AHEAD_PAGES.
const AHEAD: u64 = 32 * MIB;

/// Waits (at most 20 s, for a busy machine) until the
/// resident set is at least `at_least`; returns it.
fn rss_reaches(at_least: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut rss = common::rss_bytes();
    while rss < at_least && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        rss = common::rss_bytes();
    }
    rss
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
    let rss = rss_reaches(base + AHEAD - 4 * MIB);
    assert!(
        rss >= base + AHEAD - 4 * MIB,
        "RSS {} MiB, {} MiB before the cache: nothing populated ahead",
        rss / MIB,
        base / MIB
    );
    // Bounded: not the whole budget. (Let it run a while first.)
    std::thread::sleep(Duration::from_millis(300));
    let rss = common::rss_bytes();
    assert!(
        rss <= base + AHEAD + 24 * MIB,
        "RSS {} MiB, {} MiB before: more than {} MiB ahead of an empty cache",
        rss / MIB,
        base / MIB,
        AHEAD / MIB
    );

    // 128 MiB cached: the frames populated follow, still bounded.
    let file = cache
        .open(dir.join("f"), OpenOptions { create: true })
        .unwrap();
    let chunk = common::pattern(3, MIB as usize);
    for i in 0..128 {
        file.write_at(&chunk, i * MIB).unwrap();
    }
    let used = 128 * MIB;
    let rss = rss_reaches(base + used + AHEAD - 4 * MIB);
    assert!(
        rss >= base + used + AHEAD - 4 * MIB,
        "RSS {} MiB with {} MiB cached, {} MiB before",
        rss / MIB,
        used / MIB,
        base / MIB
    );
    std::thread::sleep(Duration::from_millis(300));
    let rss = common::rss_bytes();
    assert!(
        rss <= base + used + AHEAD + 32 * MIB,
        "RSS {} MiB with {} MiB cached, {} MiB before",
        rss / MIB,
        used / MIB,
        base / MIB
    );
    let mut got = vec![0u8; MIB as usize];
    for i in [0, 64, 127] {
        file.read_at(&mut got, i * MIB).unwrap();
        assert!(got == chunk, "MiB {i} reads back");
    }
}
