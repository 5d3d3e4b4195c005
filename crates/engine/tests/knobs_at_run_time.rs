//! Knobs changed while I/O is in flight: the engine keeps its invariants
//! (wbt's in-flight count equals the tracked writes in flight, tags within
//! their limit) and never panics, whatever order changes and completions
//! come in.

mod harness;

use harness::Harness;
use wb_engine::*;

const MIB: u64 = 1 << 20;

/// An engine whose flusher keeps writes in flight on a slow device: a
/// 1 MiB background threshold and 0.2 ms per page.
fn busy_engine(wbt_lat_usec: &str) -> (Harness, DeviceId, TaskId, HandleId) {
    let mut config = Config::default();
    config.set("memory", "64MiB").unwrap();
    config.set("dirty_background_bytes", "1MiB").unwrap();
    let mut device = DeviceConfig::default();
    device.set("wbt_lat_usec", wbt_lat_usec).unwrap();
    let mut e = Engine::new(config, Instant(0));
    let dev = e.add_device("d", device, 100_000);
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = e.open(file).unwrap();
    let task = e.add_task();
    (Harness::new(e, 200_000), dev, task, h)
}

/// Runs time forward in 3 ms steps, calling `change` before each step and
/// checking the invariants after it, until `until`.
fn run_changing(hs: &mut Harness, until: Instant, mut change: impl FnMut(&mut Engine, u32)) {
    let mut round = 0;
    while hs.now < until {
        change(&mut hs.engine, round);
        hs.engine.check_invariants();
        let next = hs.now + 3_000_000;
        hs.idle_until(next);
        hs.engine.check_invariants();
        round += 1;
    }
}

fn writes_in_flight(hs: &Harness) -> usize {
    hs.inflight
        .values()
        .filter(|&&dir| dir == IoDir::Write)
        .count()
}

/// Changes wbt_lat_usec from `from` to `to` while the flusher's writes are
/// in flight, lets them complete, syncs, and checks the invariants.
fn change_wbt_under_writes(from: &str, to: &str) {
    let (mut hs, dev, task, h) = busy_engine(from);
    hs.run(task, |e, now| e.write(now, task, h, 0, 8 * MIB))
        .unwrap();
    assert!(writes_in_flight(&hs) > 0, "the flusher is writing");
    hs.engine.set_device_knob(dev, "wbt_lat_usec", to).unwrap();
    hs.idle_until(hs.now + 1_000_000_000);
    hs.engine.check_invariants();
    hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
    assert_eq!(hs.engine.stats().dirty_pages, 0);
    hs.engine.check_invariants();
}

#[test]
fn wbt_turned_off_while_its_window_is_armed() {
    // The window armed while wbt was on fires after it is turned off.
    change_wbt_under_writes("2000", "0");
}

#[test]
fn wbt_turned_on_while_untracked_writes_are_in_flight() {
    // Writes issued while wbt was off complete after it is turned on.
    change_wbt_under_writes("0", "2000");
}

#[test]
fn wbt_target_flipped_every_few_milliseconds_under_load() {
    let (mut hs, dev, task, h) = busy_engine("-1");
    hs.run(task, |e, now| e.write(now, task, h, 0, 16 * MIB))
        .unwrap();
    let values = ["0", "-1", "2000", "0", "75000", "-1"];
    let until = hs.now + 2_000_000_000;
    run_changing(&mut hs, until, |e, round| {
        let value = values[round as usize % values.len()];
        e.set_device_knob(dev, "wbt_lat_usec", value).unwrap();
    });
    hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
    assert_eq!(hs.engine.stats().dirty_pages, 0);
    assert!(
        hs.engine.stats().devices[0].wbt_windows > 0,
        "wbt was on for whole windows in between"
    );
}

#[test]
fn queue_depth_changed_at_run_time_reaches_wbt() {
    let (mut hs, dev, _, _) = busy_engine("2000");
    assert_eq!(hs.engine.stats().devices[0].wbt_max_depth, 16);
    hs.engine.set_device_knob(dev, "queue_depth", "4").unwrap();
    assert_eq!(
        hs.engine.stats().devices[0].wbt_max_depth,
        4,
        "wbt's depth follows the device's queue"
    );
    hs.engine.set_device_knob(dev, "nr_requests", "2").unwrap();
    assert_eq!(
        hs.engine.stats().devices[0].wbt_max_depth,
        2,
        "and the block layer's tags, when fewer"
    );
    hs.engine
        .set_device_knob(dev, "nr_requests", "128")
        .unwrap();
    hs.engine.set_device_knob(dev, "queue_depth", "64").unwrap();
    assert_eq!(hs.engine.stats().devices[0].wbt_max_depth, 16);
}

#[test]
fn nr_requests_lowered_below_the_tags_in_use() {
    let (mut hs, dev, task, h) = busy_engine("0");
    hs.run(task, |e, now| e.write(now, task, h, 0, 8 * MIB))
        .unwrap();
    let before = writes_in_flight(&hs);
    assert!(before > 1, "several writes in flight: {before}");
    hs.engine.set_device_knob(dev, "nr_requests", "1").unwrap();
    hs.engine.check_invariants();
    let until = hs.now + 2_000_000_000;
    let mut peak_after_drain = 0;
    let mut drained = false;
    while hs.now < until {
        hs.idle_until(hs.now + 1_000_000);
        hs.engine.check_invariants();
        let n = writes_in_flight(&hs);
        drained |= n <= 1;
        if drained {
            peak_after_drain = peak_after_drain.max(n);
        }
    }
    assert!(drained, "the extra tags drain");
    assert_eq!(
        peak_after_drain, 1,
        "no new tag until below the lowered limit"
    );
}

#[test]
fn queue_knobs_and_wbt_changed_together_under_load() {
    let (mut hs, dev, task, h) = busy_engine("2000");
    hs.run(task, |e, now| e.write(now, task, h, 0, 16 * MIB))
        .unwrap();
    let changes: [(&str, &str); 8] = [
        ("nr_requests", "1"),
        ("wbt_lat_usec", "0"),
        ("queue_depth", "1"),
        ("nr_requests", "64"),
        ("wbt_lat_usec", "500"),
        ("queue_depth", "128"),
        ("nr_requests", "3"),
        ("wbt_lat_usec", "-1"),
    ];
    let until = hs.now + 3_000_000_000;
    run_changing(&mut hs, until, |e, round| {
        let (knob, value) = changes[round as usize % changes.len()];
        e.set_device_knob(dev, knob, value).unwrap();
    });
    hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
    assert_eq!(hs.engine.stats().dirty_pages, 0);
}

/// Runs time forward in 1 ms steps until `until`, checking the invariants
/// and that the cache never grows while over its budget.
fn idle_checking_memory(hs: &mut Harness, until: Instant) {
    let mut last = hs.engine.stats().cached_pages;
    while hs.now < until {
        hs.idle_until(hs.now + 1_000_000);
        hs.engine.check_invariants();
        let stats = hs.engine.stats();
        if last > stats.memory_pages {
            assert!(
                stats.cached_pages <= last,
                "over its budget the cache only shrinks: {last} -> {}",
                stats.cached_pages
            );
        }
        last = stats.cached_pages;
    }
}

#[test]
fn memory_lowered_under_dirty_pages_writes_them_back_and_shrinks() {
    let (mut hs, _, task, h) = busy_engine("0");
    hs.run(task, |e, now| e.write(now, task, h, 0, 24 * MIB))
        .unwrap();
    let before = hs.engine.stats();
    assert!(
        before.cached_pages > 2 * 2048 && before.dirty_pages > 0,
        "{} cached, {} dirty",
        before.cached_pages,
        before.dirty_pages
    );
    hs.engine.set_knob("memory", "8MiB").unwrap();
    assert_eq!(hs.engine.stats().memory_pages, 2048);
    hs.engine.check_invariants();
    let until = hs.now + 3_000_000_000;
    idle_checking_memory(&mut hs, until);
    let after = hs.engine.stats();
    assert!(
        after.cached_pages <= 2048,
        "within the lowered budget: {} cached",
        after.cached_pages
    );
    assert_eq!(after.dirty_pages, 0, "what was dirty was written back");
    // The written data is still there to be read back, and new writes fit.
    hs.run(task, |e, now| e.write(now, task, h, 24 * MIB, 16 * MIB))
        .unwrap();
    let until = hs.now + 100_000_000;
    idle_checking_memory(&mut hs, until);
    assert!(hs.engine.stats().cached_pages <= 2048);
    hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
    assert_eq!(hs.engine.stats().dirty_pages, 0);
}

#[test]
fn memory_raised_back_but_never_past_what_the_cache_started_with() {
    let (mut hs, _, task, h) = busy_engine("0");
    hs.engine.set_knob("memory", "16MiB").unwrap();
    let e = hs.engine.set_knob("memory", "65MiB").unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid value '65MiB' for memory: the cache started with 64.0MiB and cannot grow past it while it runs"
    );
    assert_eq!(hs.engine.stats().memory_pages, 4096, "nothing changed");
    hs.engine.set_knob("memory", "64MiB").unwrap();
    assert_eq!(hs.engine.stats().memory_pages, 16384);
    hs.run(task, |e, now| e.write(now, task, h, 0, 40 * MIB))
        .unwrap();
    hs.engine.check_invariants();
    assert!(
        hs.engine.stats().cached_pages > 4096,
        "the raised budget is used"
    );
}
