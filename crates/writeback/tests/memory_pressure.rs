//! A cache built with `follow_memory_pressure`: it samples the memory
//! where the process runs and says so in its stats; with memory to spare
//! its budget stays where it was set. (What it does under pressure is
//! shown through the mount, in a cgroup of its own: the cli crate's
//! tests/mount_memory.rs; the policy itself is the engine's.)

mod common;

use std::time::{Duration, Instant};
use writeback::{Cache, OpenOptions};

const MIB: u64 = 1 << 20;

#[test]
fn the_memory_where_the_process_runs_can_be_read() {
    let sample = writeback::sample_memory().expect("read /proc/meminfo");
    assert!(sample.mem_total_bytes > 0);
    assert!(sample.mem_available_bytes <= sample.mem_total_bytes);
    for c in &sample.cgroups {
        assert!(c.limit_bytes > 0 && c.path.starts_with('/'), "{c:?}");
    }
    let start = wb_engine::start_budget(&sample);
    assert!(start.bytes >= wb_engine::MIN_MEMORY_BYTES);
    assert!(start.bytes <= sample.mem_available_bytes.max(64 * MIB));
    assert_eq!(start.bytes % wb_engine::PAGE_SIZE, 0);
}

#[test]
fn a_cache_following_pressure_samples_and_keeps_a_budget_it_has_room_for() {
    let Some(dir) = common::direct_test_dir("memory-pressure") else {
        return;
    };
    let sample = writeback::sample_memory().expect("read /proc/meminfo");
    // A budget well within what is available here, so nothing presses it.
    let budget = (wb_engine::start_budget(&sample).bytes / 4).clamp(8 * MIB, 64 * MIB);
    let budget = budget / MIB * MIB;
    let cache = Cache::builder()
        .knob("memory", &budget.to_string())
        .unwrap()
        .calibrate(false)
        .follow_memory_pressure(true)
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cache.stats().memory.follows_pressure && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let stats = cache.stats();
    assert!(stats.memory.follows_pressure, "no sample within 10 s");
    assert!(stats.memory.view.available_bytes > 0, "{:?}", stats.memory);
    assert!(stats.memory.view.reserve_bytes >= wb_engine::RESERVE_MIN_BYTES);
    assert_eq!(stats.memory.ceiling_pages * wb_engine::PAGE_SIZE, budget);
    // Used, the cache keeps its budget.
    let file = cache
        .open(dir.join("f"), OpenOptions { create: true })
        .unwrap();
    let data = common::pattern(3, (budget / 2) as usize);
    file.write_at(&data, 0).unwrap();
    file.sync_data().unwrap();
    let stats = cache.stats();
    assert_eq!(
        stats.memory_pages * wb_engine::PAGE_SIZE,
        budget,
        "{:?}",
        stats.memory
    );
    assert_eq!(stats.memory.shrinks, 0, "{:?}", stats.memory);
    let mut back = vec![0u8; data.len()];
    file.read_at(&mut back, 0).unwrap();
    assert!(back == data);
    drop(file);
    drop(cache);
    let _ = std::fs::remove_dir_all(&dir);
}
