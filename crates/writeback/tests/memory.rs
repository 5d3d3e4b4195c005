//! Lowering the `memory` knob while the cache runs gives the memory back to
//! the system, not only to the budget: the process's resident set shrinks.
//! (Its own test binary: nothing else in the process moves its RSS.)

mod common;

use std::time::{Duration, Instant};
use writeback::{Cache, OpenOptions};

const MIB: u64 = 1 << 20;

#[test]
fn a_lowered_budget_gives_its_memory_back_to_the_system() {
    let Some(dir) = common::direct_test_dir("memory-release") else {
        return;
    };
    let cache = Cache::builder()
        .knob("memory", "256MiB")
        .unwrap()
        .calibrate(false)
        .build()
        .unwrap();
    let path = dir.join("big");
    let file = cache.open(&path, OpenOptions { create: true }).unwrap();
    // 192 MiB cached (written and synced: clean pages the cache keeps).
    let chunk = common::pattern(7, MIB as usize);
    for i in 0..192 {
        file.write_at(&chunk, i * MIB).unwrap();
    }
    file.sync_data().unwrap();
    assert!(
        cache.stats().cached_pages * 4096 >= 180 * MIB,
        "the file is cached"
    );
    let full = common::rss_bytes();
    assert!(
        full >= 190 * MIB,
        "RSS {} MiB with the file cached",
        full / MIB
    );

    cache.set_knob("memory", "32MiB").unwrap();
    // Given back by the timer thread, 256 MiB every 250 ms: 160 MiB in
    // one round; allow 20 s on a busy machine.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut now_rss = common::rss_bytes();
    while full - now_rss.min(full) < 140 * MIB && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        now_rss = common::rss_bytes();
    }
    assert!(
        full - now_rss.min(full) >= 140 * MIB,
        "RSS {} MiB before, {} MiB after lowering the budget to 32 MiB",
        full / MIB,
        now_rss / MIB
    );
    assert!(cache.stats().cached_pages * 4096 <= 32 * MIB);

    // What stays cached still reads back right; what left reads from disk.
    let mut got = vec![0u8; MIB as usize];
    for i in [0, 100, 191] {
        file.read_at(&mut got, i * MIB).unwrap();
        assert!(got == chunk, "MiB {i} reads back");
    }
    // Raised again, the cache can use its memory again.
    cache.set_knob("memory", "256MiB").unwrap();
    for i in 0..192 {
        file.read_at(&mut got, i * MIB).unwrap();
        assert!(got == chunk, "MiB {i} reads back");
    }
    drop(file);
    drop(cache);
    let _ = std::fs::remove_dir_all(&dir);
}
