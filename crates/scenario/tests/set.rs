//! `--set` overrides.

mod common;

use wb_engine::DirtyThrottle;
use wb_scenario::{apply_set, example, Scenario};

fn scenario() -> Scenario {
    common::parse_text(example()).expect("example parses")
}

/// Applies `spec`, which must fail with `phrase`, and checks nothing changed.
#[track_caller]
fn assert_rejected(spec: &str, phrase: &str) {
    let mut s = scenario();
    let e = apply_set(&mut s, spec).expect_err(spec);
    let text = e.to_string();
    assert!(text.starts_with(&format!("--set {spec}: ")), "{text}");
    assert!(text.contains(phrase), "{text:?} lacks {phrase:?}");
    assert_eq!(s, scenario(), "a failed --set changed the scenario");
}

#[test]
fn cache_knob() {
    let mut s = scenario();
    apply_set(&mut s, "dirty_ratio=40").expect("valid");
    apply_set(&mut s, " dirty_throttle = global-2007").expect("valid");
    assert_eq!(s.cache.dirty_ratio, 40);
    assert_eq!(s.cache.dirty_throttle, DirtyThrottle::Global2007);
}

#[test]
fn device_knob_on_all_or_one() {
    let mut s = scenario();
    apply_set(&mut s, "queue_depth=1").expect("valid");
    assert!(s.devices.iter().all(|d| d.config.queue_depth == 1));
    apply_set(&mut s, "ssd.queue_depth=64").expect("valid");
    assert_eq!(
        (
            s.devices[0].config.queue_depth,
            s.devices[1].config.queue_depth
        ),
        (1, 64)
    );
}

#[test]
fn errors() {
    assert_rejected("dirty_ratio", "missing '='");
    assert_rejected(
        "floppy.queue_depth=1",
        "unknown device 'floppy' (devices: disk, ssd)",
    );
    assert_rejected(
        "dirty_rato=1",
        "unknown knob 'dirty_rato' (cache knobs: memory,",
    );
    assert_rejected(
        "disk.queue_dept=1",
        "unknown knob 'queue_dept' (known: wbt_lat_usec,",
    );
    assert_rejected("disk.dirty_ratio=1", "'dirty_ratio' is a cache knob");
    assert_rejected(
        "dirty_ratio=150",
        "invalid value '150' for dirty_ratio: must be between 1 and 100",
    );
    assert_rejected(
        "queue_depth=0",
        "device 'disk': invalid value '0' for queue_depth",
    );
    assert_rejected("min_ratio=60", "min_ratio add up to 120%");
}

#[test]
fn set_error_is_an_error() {
    let mut s = scenario();
    let e: Box<dyn std::error::Error> = Box::new(apply_set(&mut s, "x").expect_err("no '='"));
    assert!(e.to_string().starts_with("--set x: "));
}

#[test]
fn job_mode() {
    let mut s = scenario();
    apply_set(&mut s, "bulk.mode=dontcache").expect("valid");
    assert_eq!(s.jobs[0].mode, wb_scenario::WriteMode::Dontcache);
    apply_set(&mut s, "dontcache_flush=inline").expect("valid");
    assert_eq!(s.cache.dontcache_flush, wb_engine::DontcacheFlush::Inline);
    assert_rejected(
        "bulk.mode=uncached",
        "unknown mode 'uncached' (known: buffered, dontcache, direct)",
    );
    assert_rejected("scanner.mode=dontcache", "job 'scanner' reads");
    assert_rejected("nobody.mode=dontcache", "no device or job named 'nobody'");
    assert_rejected(
        "dontcache_flush=sometimes",
        "invalid value 'sometimes' for dontcache_flush: expected 'kick' or 'inline'",
    );
    assert_rejected(
        "dontcache_counter=global",
        "expected 'per-domain' or 'global-split'",
    );
}
