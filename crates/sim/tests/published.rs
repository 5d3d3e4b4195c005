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
