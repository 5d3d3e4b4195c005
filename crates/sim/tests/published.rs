//! The published experiments, reproduced on the simulator with the
//! scenario files we ship. Virtual time: the outcomes are exact for a seed,
//! so these assert the thresholds directly.

use std::path::Path;
use wb_scenario::{apply_set, load, Scenario};
use wb_sim::report::{JobReport, RunReport};
use wb_sim::runner::{run, SimOptions};

fn scenario(name: &str, sets: &[&str]) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name);
    let mut s = load(&path, &wb_sim::device::validate).expect("shipped scenario parses");
    for set in sets {
        apply_set(&mut s, set).expect("valid override");
    }
    s
}

fn sim(name: &str, sets: &[&str]) -> RunReport {
    run(&scenario(name, sets), SimOptions::default()).expect("runs")
}

fn job<'a>(r: &'a RunReport, name: &str) -> &'a JobReport {
    r.jobs.iter().find(|j| j.name == name).expect("job exists")
}

#[test]
fn axboe_2016_wbt_protects_the_reader() {
    let on = sim("axboe-2016.toml", &[]);
    let off = sim("axboe-2016.toml", &["wbt_lat_usec=0"]);
    let (r_on, r_off) = (job(&on, "reader"), job(&off, "reader"));
    let (w_on, w_off) = (job(&on, "writers"), job(&off, "writers"));
    // Without throttling the reader waits behind a full queue of writes:
    // hundreds of milliseconds, as published (255 ms p99).
    assert!(
        r_off.lat_us.p99 >= 100_000.0,
        "p99 without wbt {} us",
        r_off.lat_us.p99
    );
    assert!(
        r_on.lat_us.p99 * 50.0 <= r_off.lat_us.p99,
        "p99 {} vs {}",
        r_on.lat_us.p99,
        r_off.lat_us.p99
    );
    assert!(
        r_on.bw_mib_s >= 10.0 * r_off.bw_mib_s,
        "bw {} vs {}",
        r_on.bw_mib_s,
        r_off.bw_mib_s
    );
    assert!(
        w_on.elapsed_s <= 1.4 * w_off.elapsed_s,
        "writers {} vs {}",
        w_on.elapsed_s,
        w_off.elapsed_s
    );
    // The writers wrote everything and synced it.
    assert_eq!(w_on.bytes, 50 * 100_000_000);
    assert!((on.engine.dirtied_mib - on.engine.written_mib).abs() < 1e-9);
}

#[test]
fn sekiyama_2007_per_device_limits_keep_the_idle_device_responsive() {
    let fixed = sim("sekiyama-2007.toml", &[]);
    let b = job(&fixed, "B-records");
    assert_eq!(b.ops, 60);
    assert!(b.lat_us.p99 <= 1_000.0, "B p99 {} us", b.lat_us.p99);
    assert!(b.lat_us.max <= 10_000.0, "B max {} us", b.lat_us.max);
    // A's device stays busy and A is throttled.
    let usb = fixed
        .engine
        .devices
        .iter()
        .find(|d| d.name == "usb")
        .unwrap();
    assert!(
        usb.utilization.unwrap_or(0.0) > 0.9,
        "usb utilization {:?}",
        usb.utilization
    );
    assert!(usb.throttle_pauses > 0);

    let old = sim("sekiyama-2007.toml", &["dirty_throttle=global-2007"]);
    let b_old = job(&old, "B-records");
    assert!(
        b_old.lat_us.max >= 1_000_000.0,
        "B max with the 2007 limit {} us",
        b_old.lat_us.max
    );
}

fn aggregate_mib_s(r: &RunReport) -> f64 {
    let bytes: u64 = r.jobs.iter().map(|j| j.bytes).sum();
    let end = r.jobs.iter().map(|j| j.elapsed_s).fold(0.0, f64::max);
    bytes as f64 / (1024.0 * 1024.0) / end
}

#[test]
fn layton_2026_kick_beats_inline_and_keeps_the_footprint_small() {
    let kick = sim("layton-2026-seq.toml", &[]);
    let inline = sim("layton-2026-seq.toml", &["dontcache_flush=inline"]);
    let buffered = sim("layton-2026-seq.toml", &["writer.mode=buffered"]);
    let (k, i, b) = (
        job(&kick, "writer"),
        job(&inline, "writer"),
        job(&buffered, "writer"),
    );
    // Published p99.9 85.5 → 23.2 ms (0.27×).
    assert!(
        k.lat_us.p99_9 <= 0.35 * i.lat_us.p99_9,
        "p99.9 kick {} vs inline {}",
        k.lat_us.p99_9,
        i.lat_us.p99_9
    );
    assert!(k.bw_mib_s >= i.bw_mib_s, "{} vs {}", k.bw_mib_s, i.bw_mib_s);
    assert!(
        k.bw_mib_s >= 0.95 * b.bw_mib_s,
        "{} vs {}",
        k.bw_mib_s,
        b.bw_mib_s
    );
    assert!(
        kick.engine.dirty_peak_mib <= 0.15 * buffered.engine.dirty_peak_mib,
        "dirty peak {} vs {}",
        kick.engine.dirty_peak_mib,
        buffered.engine.dirty_peak_mib
    );
    assert!(kick.engine.cached_end_mib <= 0.01 * kick.engine.written_mib);
    assert_eq!(kick.engine.domains[0].dropped_behind_mib, 16384.0);
    // Buffered keeps what it wrote, up to the cache.
    assert!(buffered.engine.cached_end_mib >= 0.9 * buffered.engine.memory_mib);
}

#[test]
fn layton_2026_four_uncached_writers_match_buffered() {
    let kick = sim("layton-2026-multi.toml", &[]);
    let sets: Vec<String> = (1..=4).map(|i| format!("w{i}.mode=buffered")).collect();
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    let buffered = sim("layton-2026-multi.toml", &sets);
    assert!(
        aggregate_mib_s(&kick) >= 0.95 * aggregate_mib_s(&buffered),
        "{} vs {}",
        aggregate_mib_s(&kick),
        aggregate_mib_s(&buffered)
    );
    assert!(kick.engine.cached_end_mib <= 0.01 * kick.engine.written_mib);
}

#[test]
fn kara_2026_per_domain_counter_covers_the_domain() {
    let per_domain = sim("kara-2026.toml", &[]);
    let split = sim("kara-2026.toml", &["dontcache_counter=global-split"]);
    let a = |r: &RunReport| {
        r.engine
            .domains
            .iter()
            .find(|d| d.domain == "a")
            .expect("domain a")
            .clone()
    };
    let share = a(&per_domain).dontcache_kick_share.expect("a kicked");
    assert!(share >= 0.9, "per-domain share {share}");
    let split_share = a(&split).dontcache_kick_share.expect("a kicked");
    // Split by bandwidth beside a buffered writer: well under all of it.
    assert!(split_share <= 0.7, "global-split share {split_share}");
    // A's uncached pages leave; B's buffered ones stay.
    assert_eq!(a(&per_domain).dropped_behind_mib, 8192.0);
}

fn reader_and_writers(r: &RunReport) -> (&JobReport, &JobReport) {
    (job(r, "reader"), job(r, "writers"))
}

#[test]
fn fast_devices_throttling_costs_the_writers_little() {
    for name in ["axboe-2016-ssd.toml", "axboe-2016-nvme.toml"] {
        let on = sim(name, &[]);
        let off = sim(name, &["wbt_lat_usec=0"]);
        let ((r_on, w_on), (r_off, w_off)) = (reader_and_writers(&on), reader_and_writers(&off));
        assert!(
            w_on.elapsed_s <= 1.5 * w_off.elapsed_s,
            "{name}: writers {} vs {}",
            w_on.elapsed_s,
            w_off.elapsed_s
        );
        // No percentile of the reader is worse than without throttling,
        // but for one device read at p99 (issue 35 keeps it open): the
        // throttled reader, 36x faster, consumes a 128 KiB window in
        // 45 us and waits for every next one (its reads take 144 us,
        // sharing the NVMe's link with the one write wbt lets through),
        // the unthrottled one waits for 3 % of its reads, 100 us each
        // (123 us against 108 us).
        assert!(r_on.lat_us.p50 <= r_off.lat_us.p50, "{name}: p50");
        assert!(
            r_on.lat_us.p99 <= r_off.lat_us.p99 + 50.0,
            "{name}: p99 {} vs {}",
            r_on.lat_us.p99,
            r_off.lat_us.p99
        );
        assert!(r_on.lat_us.p99_9 <= r_off.lat_us.p99_9, "{name}: p99.9");
        // The reader gets far more done with throttling than without.
        assert!(r_on.iops >= 5.0 * r_off.iops, "{name}: iops");
    }
}

#[test]
fn equal_readers_on_a_disk_get_equal_service() {
    let on = sim("axboe-2016-4readers.toml", &[]);
    let off = sim("axboe-2016-4readers.toml", &["wbt_lat_usec=0"]);
    let iops: Vec<f64> = (1..=4)
        .map(|i| job(&on, &format!("reader{i}")).iops)
        .collect();
    let (min, max) = iops
        .iter()
        .fold((f64::MAX, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
    assert!(min >= 0.8 * max, "reader IOPS {iops:?}");
    let (w_on, w_off) = (job(&on, "writers"), job(&off, "writers"));
    assert!(
        w_on.elapsed_s <= 1.6 * w_off.elapsed_s,
        "writers {} vs {}",
        w_on.elapsed_s,
        w_off.elapsed_s
    );
    for i in 1..=4 {
        let name = format!("reader{i}");
        let (a, b) = (&job(&on, &name).lat_us, &job(&off, &name).lat_us);
        assert!(
            a.p50 <= b.p50 && a.p99 <= b.p99 && a.p99_9 <= b.p99_9,
            "{name}"
        );
    }
}

/// Total MiB/s of the dbench clients, and their longest write.
fn dbench_figures(r: &RunReport) -> (f64, f64) {
    let mib_s = r.jobs.iter().map(|j| j.bw_mib_s).sum();
    let max_write_us = r
        .jobs
        .iter()
        .flat_map(|j| &j.op_kinds)
        .filter(|k| k.kind == "write")
        .map(|k| k.max_us)
        .fold(0.0, f64::max);
    (mib_s, max_write_us)
}

#[test]
fn wong_2013_writers_wait_for_stable_pages_only_when_told_to() {
    let wait = sim("wong-2013.toml", &[]);
    let none = sim("wong-2013.toml", &["stable_writes=none"]);
    let snapshot = sim("wong-2013.toml", &["stable_writes=snapshot"]);
    let (wait_mib_s, wait_max) = dbench_figures(&wait);
    // Writers do find pages under writeback, and wait for them.
    assert!(wait_max >= 10_000.0, "max write with wait {wait_max} us");
    assert!(wait
        .engine
        .stalls
        .iter()
        .any(|s| s.reason == "stable_page" && s.count > 0));
    // Published ext2 59.8 -> 4.3 ms (0.07x).
    for (mode, run, bound) in [("none", &none, 0.15), ("snapshot", &snapshot, 0.2)] {
        let (mib_s, max) = dbench_figures(run);
        // No writer waits for a page under writeback.
        assert!(
            !run.engine
                .stalls
                .iter()
                .any(|s| s.reason == "stable_page" && s.count > 0),
            "{mode}: a writer waited for a stable page"
        );
        assert!(
            max <= bound * wait_max,
            "{mode}: max write {max} us vs wait {wait_max} us"
        );
        let ratio = mib_s / wait_mib_s;
        assert!(
            (0.95..=1.05).contains(&ratio),
            "{mode}: throughput {ratio}x wait's"
        );
        assert!(!run
            .engine
            .stalls
            .iter()
            .any(|s| s.reason == "stable_page" && s.count > 0));
    }
    // Snapshot copies pages; none and wait never do.
    assert!(snapshot.engine.devices[0].snapshot_pages > 0);
    assert_eq!(none.engine.devices[0].snapshot_pages, 0);
    assert_eq!(wait.engine.devices[0].snapshot_pages, 0);
}

#[test]
fn auto_snapshots_only_on_a_device_that_needs_stable_pages() {
    let run_with = |required: bool| {
        let mut s = scenario("wong-2013.toml", &["stable_writes=auto"]);
        if required {
            s.devices[0]
                .params
                .insert("stable_writes".to_string(), "1".to_string());
        }
        run(&s, SimOptions::default()).expect("runs")
    };
    let plain = run_with(false);
    assert_eq!(plain.engine.devices[0].stable_writes, "none (auto)");
    assert_eq!(plain.engine.devices[0].snapshot_pages, 0);
    let checksumming = run_with(true);
    assert_eq!(
        checksumming.engine.devices[0].stable_writes,
        "snapshot (auto)"
    );
    assert!(checksumming.engine.devices[0].snapshot_pages > 0);
}

/// Chinner 2021: with watermarks no unlink of the `rm -rf` waits much more
/// than `backlog_wait_ms` (100 ms plus the documented margin of two
/// release steps: 16 MiB each at 1 ms a MiB here) and nearly none waits at
/// all; with flush-all (XFS 2021) an unlink waits for the whole backlog,
/// over a second when a large file is in it. Either way the whole removal
/// (the job ends with a sync, which waits for every release) takes about
/// as long.
#[test]
fn chinner_2021_watermarks_bound_the_wait_for_deferred_releases() {
    let marks = sim("chinner-2021.toml", &[]);
    let flush_all = sim("chinner-2021.toml", &["backlog_throttle=flush-all"]);
    let (m, f) = (job(&marks, "rm-rf"), job(&flush_all, "rm-rf"));
    let unlinks = |j: &JobReport| {
        j.op_kinds
            .iter()
            .find(|k| k.kind == "unlink")
            .expect("unlinks reported")
            .count
    };
    assert_eq!(unlinks(m), 30_020);
    assert_eq!(unlinks(f), 30_020);
    let margin_us = 2.0 * 16.0 * 1000.0;
    assert!(
        m.lat_us.max <= 100_000.0 + margin_us,
        "watermarks: longest unlink {} us",
        m.lat_us.max
    );
    assert!(
        m.lat_us.p99 <= 1_000.0,
        "watermarks: p99 {} us",
        m.lat_us.p99
    );
    assert!(
        f.lat_us.max >= 1_000_000.0,
        "flush-all: longest unlink {} us",
        f.lat_us.max
    );
    let ratio = m.elapsed_s / f.elapsed_s;
    assert!((1.0 / 1.1..=1.1).contains(&ratio), "totals {ratio}x");
    for r in [&marks, &flush_all] {
        let b = &r.engine.devices[0].backlog;
        assert_eq!(b.items_done, 30_020);
        assert!(b.throttles > 0, "the backlog filled: {b:?}");
        assert_eq!(b.errors, 0);
    }
    // Watermarks: the level stays within high plus one step of the one
    // producer (the invariants check it exactly).
    let b = &marks.engine.devices[0].backlog;
    assert!(b.max_level_ms <= b.high_ms + 16.1, "{b:?}");
}

/// The same removal, a tenth of the tree, with the engine's invariants
/// checked after every event: the backlog's bound (high plus one step a
/// producer with watermarks, 256 items plus one a producer with
/// flush-all), its accounting, and every queued file unlinked and closed.
#[test]
fn chinner_2021_backlog_stays_bounded_at_every_event() {
    for mode in ["watermarks", "flush-all"] {
        let mut s = scenario("chinner-2021.toml", &[&format!("backlog_throttle={mode}")]);
        let wb_scenario::JobKind::Remover {
            files, big_files, ..
        } = &mut s.jobs[0].kind
        else {
            panic!("the scenario's job is a remover");
        };
        (*files, *big_files) = (3_000, 2);
        let options = SimOptions {
            check_invariants: true,
            ..SimOptions::default()
        };
        let r = run(&s, options).expect("runs");
        let b = &r.engine.devices[0].backlog;
        assert_eq!(b.items_done, 3_002, "{mode}");
        assert!(b.throttles > 0, "{mode}: the backlog filled: {b:?}");
    }
}

/// Issue 14: a 4 GiB copy through a 1 GiB cache beside a reader of a
/// 512 MiB hot set. With two lists the hot set stays (≥ 90 % cached when
/// the run ends, and the device reads hardly more than the one warm-up
/// pass of it); with one CLOCK list the copy pushes most of it out and the
/// reader reads it again from the device while the copy runs.
#[test]
fn hot_set_survives_a_copy_with_two_lists_not_with_clock() {
    let two = sim("hot-set-vs-copy.toml", &[]);
    let clock = sim("hot-set-vs-copy.toml", &["lru=clock"]);
    let cached = |r: &RunReport| job(r, "database").cached_end_mib.expect("simulated");
    let read_mib = |r: &RunReport| r.engine.devices[0].read_mib;
    assert!(
        cached(&two) >= 0.9 * 512.0,
        "two lists: {} MiB",
        cached(&two)
    );
    assert!(
        read_mib(&two) <= 1.1 * 512.0,
        "two lists: {} MiB read from the device",
        read_mib(&two)
    );
    assert!(
        cached(&clock) <= 0.5 * 512.0,
        "clock: {} MiB",
        cached(&clock)
    );
    assert!(
        read_mib(&clock) >= 2.0 * 512.0,
        "clock: {} MiB read from the device",
        read_mib(&clock)
    );
    // The copy finished in both, with every byte written.
    for r in [&two, &clock] {
        let copy = job(r, "copy");
        assert_eq!((copy.bytes, copy.errors, copy.cut_off), (4 << 30, 0, false));
    }
}
