//! The budget following memory pressure through the engine: samples of
//! the memory where the cache runs move the budget; a lowered one drops
//! clean pages oldest first and writes dirty ones back (reason vmscan);
//! after the pressure it grows back, gradually, to the ceiling. Virtual
//! time throughout.

mod harness;

use harness::Harness;
use wb_engine::*;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TICK_NS: u64 = 100_000_000;

/// A 64 MiB cache on a device taking 0.05 ms a page; two files, a task.
fn engine() -> (Harness, TaskId, HandleId, HandleId) {
    let mut config = Config::default();
    config.set("memory", "64MiB").unwrap();
    config.set("memory_min", "8MiB").unwrap();
    let mut e = Engine::new(config, Instant(0));
    let dev = e.add_device("d", DeviceConfig::default(), 100_000);
    let old = e.add_file(Instant(0), dev, DomainId(0), 24 * MIB).unwrap();
    let new = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let (old, new) = (e.open(old).unwrap(), e.open(new).unwrap());
    let task = e.add_task();
    (Harness::new(e, 50_000), task, old, new)
}

/// Reads `old` whole (24 MiB), 4 MiB at a time.
fn read_old(hs: &mut Harness, task: TaskId, old: HandleId) {
    for i in 0..6 {
        hs.run(task, |e, now| e.read(now, task, old, i * 4 * MIB, 4 * MIB))
            .unwrap();
    }
}

/// A 1 GiB cgroup in which others use `others` beside the cache.
fn sample(hs: &Harness, others: u64) -> MemorySample {
    let used = hs.engine.stats().cached_pages * PAGE_SIZE;
    MemorySample {
        mem_total_bytes: 24 * GIB,
        mem_available_bytes: 20 * GIB,
        cgroups: vec![CgroupMemory {
            path: "/wb".into(),
            limit_file: LimitFile::V1Limit,
            limit_bytes: GIB,
            usage_bytes: used + others,
            file_bytes: 0,
        }],
        psi: None,
    }
}

/// Samples every 100 ms of virtual time until `until`, the engine's
/// invariants checked after each.
fn sample_until(hs: &mut Harness, until: Instant, others: u64) {
    while hs.now < until {
        let s = sample(hs, others);
        let now = hs.now;
        hs.engine.note_memory_sample(now, &s);
        hs.engine.check_invariants();
        let next = hs.now + TICK_NS;
        hs.idle_until(next);
        hs.engine.check_invariants();
    }
}

#[test]
fn low_memory_drops_the_oldest_clean_pages_and_writes_dirty_ones_back() {
    let (mut hs, task, old, new) = engine();
    // 24 MiB read, then 24 MiB written and kept dirty (below the
    // background threshold).
    hs.engine
        .set_knob("dirty_background_bytes", "48MiB")
        .unwrap();
    hs.engine.set_knob("dirty_bytes", "56MiB").unwrap();
    read_old(&mut hs, task, old);
    hs.run(task, |e, now| e.write(now, task, new, 0, 24 * MIB))
        .unwrap();
    let before = hs.engine.stats();
    assert_eq!(before.cached_pages * PAGE_SIZE, 48 * MIB);
    assert_eq!(before.dirty_pages * PAGE_SIZE, 24 * MIB);
    assert_eq!(before.written_by(WbReason::Vmscan), 0);
    assert!(!before.memory.follows_pressure);

    // The room is what the cache holds plus what is available beyond the
    // 128 MiB reserve: others leaving 16 MiB less than that to the cache.
    let others = GIB - 48 * MIB - (RESERVE_MIN_BYTES - 16 * MIB);
    let s = sample(&hs, others);
    let now = hs.now;
    let budget = hs.engine.note_memory_sample(now, &s);
    assert_eq!(budget, Some(32 * MIB / PAGE_SIZE));
    let stats = hs.engine.stats();
    assert_eq!(stats.memory_pages * PAGE_SIZE, 32 * MIB);
    assert_eq!(stats.memory.reason, BudgetReason::LowMemory);
    assert_eq!((stats.memory.shrinks, stats.memory.grows), (1, 0));
    assert_eq!(stats.memory.shrunk_pages * PAGE_SIZE, 32 * MIB);
    assert!(stats.memory.follows_pressure);
    // The clean pages went at once: the 16 MiB read first.
    assert_eq!(stats.cached_pages * PAGE_SIZE, 32 * MIB);
    assert_eq!(
        hs.engine.file_cached_pages(FileId(0)).unwrap().0 * PAGE_SIZE,
        8 * MIB,
        "the oldest 16 MiB of the read file went"
    );
    hs.engine.check_invariants();
    assert_eq!(
        hs.engine
            .file_cached_pages(FileId(0))
            .map(|(cached, _)| cached),
        Some(8 * MIB / PAGE_SIZE)
    );

    // Others take 24 MiB more: the room is 8 MiB, the floor. More must
    // go than is clean: dirty pages are written back for reclaim and go
    // as they come clean.
    let others = others + 24 * MIB;
    let until = hs.now + 2 * 1_000_000_000;
    sample_until(&mut hs, until, others);
    let stats = hs.engine.stats();
    assert!(
        stats.written_by(WbReason::Vmscan) > 0,
        "written for reclaim"
    );
    assert!(
        stats.cached_pages <= stats.memory_pages,
        "{} cached over a budget of {}",
        stats.cached_pages,
        stats.memory_pages
    );
    assert_eq!(stats.memory_pages * PAGE_SIZE, 8 * MIB);
}

#[test]
fn after_the_pressure_the_budget_grows_back_gradually_to_the_ceiling() {
    let (mut hs, task, old, _) = engine();
    read_old(&mut hs, task, old);
    // Others take all but the reserve: the cache drops to its floor.
    let s = sample(&hs, GIB);
    assert_eq!(
        hs.engine.note_memory_sample(hs.now, &s),
        Some(8 * MIB / PAGE_SIZE)
    );
    assert!(hs.engine.stats().cached_pages * PAGE_SIZE <= 8 * MIB);
    // They leave. For GROW_HOLD_NS nothing moves; then the budget climbs
    // by 10% of the ceiling a second (6.4 MiB/s, 0.64 MiB a sample).
    let start = hs.now;
    let mut history = Vec::new();
    while hs.now < start + 15 * 1_000_000_000 {
        let s = sample(&hs, 0);
        hs.engine.note_memory_sample(hs.now, &s);
        history.push((hs.now.since_ns(start), hs.engine.stats().memory_pages));
        let next = hs.now + TICK_NS;
        hs.idle_until(next);
    }
    let floor = 8 * MIB / PAGE_SIZE;
    for &(t, pages) in &history {
        if t < GROW_HOLD_NS {
            assert_eq!(pages, floor, "held at {t} ns");
        }
    }
    let step = 64 * MIB / PAGE_SIZE / 100;
    for pair in history.windows(2) {
        let (before, after) = (pair[0].1, pair[1].1);
        assert!(after >= before, "only grows");
        assert!(after - before <= step + 1, "{before} -> {after}: too fast");
    }
    let stats = hs.engine.stats();
    assert_eq!(
        stats.memory_pages * PAGE_SIZE,
        64 * MIB,
        "back at the ceiling"
    );
    assert_eq!(stats.memory.reason, BudgetReason::Grow);
    assert!(stats.memory.grows >= 80, "{} grows", stats.memory.grows);
    assert_eq!(stats.memory.grown_pages, (64 - 8) * MIB / PAGE_SIZE);
}

#[test]
fn the_memory_knob_by_hand_sets_the_budget_and_the_ceiling() {
    let (mut hs, _, _, _) = engine();
    let s = sample(&hs, GIB);
    hs.engine.note_memory_sample(hs.now, &s);
    assert_eq!(hs.engine.stats().memory_pages * PAGE_SIZE, 8 * MIB);
    // Another knob leaves the lowered budget alone.
    hs.engine.set_knob("dirty_ratio", "30").unwrap();
    assert_eq!(hs.engine.stats().memory_pages * PAGE_SIZE, 8 * MIB);
    // A raised floor lifts it.
    hs.engine.set_knob("memory_min", "16MiB").unwrap();
    let stats = hs.engine.stats();
    assert_eq!(stats.memory_pages * PAGE_SIZE, 16 * MIB);
    assert_eq!(stats.memory.floor_pages * PAGE_SIZE, 16 * MIB);
    assert_eq!(stats.memory.reason, BudgetReason::Knob);
    // `memory` written: the budget now, and the ceiling from then on.
    hs.engine.set_knob("memory", "32MiB").unwrap();
    let stats = hs.engine.stats();
    assert_eq!(stats.memory_pages * PAGE_SIZE, 32 * MIB);
    assert_eq!(stats.memory.ceiling_pages * PAGE_SIZE, 32 * MIB);
    // Growth stops there.
    let until = hs.now + 20 * 1_000_000_000;
    sample_until(&mut hs, until, 0);
    assert_eq!(hs.engine.stats().memory_pages * PAGE_SIZE, 32 * MIB);
}
