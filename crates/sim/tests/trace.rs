//! `SimOptions::trace` (`wb sim --trace`): the trace of a run, read back
//! as a person would read it in Perfetto.

use serde_json::Value;
use std::path::Path;
use wb_scenario::{apply_set, load};
use wb_sim::report::RunReport;
use wb_sim::runner::{run, SimOptions};
use wb_trace::Trace;

/// Runs axboe-2016 with `sets`, recording a trace; the report and the
/// trace's events, parsed back from its JSON.
fn traced_axboe(sets: &[&str]) -> (RunReport, Vec<Value>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/axboe-2016.toml");
    let mut s = load(&path, &wb_sim::device::validate).expect("shipped scenario parses");
    for set in sets {
        apply_set(&mut s, set).expect("valid override");
    }
    let mut trace = Trace::new(wb_trace::DEFAULT_CAPACITY);
    let options = SimOptions {
        trace: Some(&mut trace),
        ..SimOptions::default()
    };
    let report = run(&s, options).expect("runs");
    assert_eq!(trace.dropped(), 0, "the whole run is kept");
    let mut json = Vec::new();
    trace.write_json(&mut json).expect("written");
    let parsed: Value = serde_json::from_slice(&json).expect("valid JSON");
    let events = parsed["traceEvents"].as_array().expect("events").clone();
    (report, events)
}

/// The track number of the job `name`.
fn tid(events: &[Value], name: &str) -> u64 {
    events
        .iter()
        .find(|e| e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == name)
        .and_then(|e| e["tid"].as_u64())
        .expect("a track per job")
}

/// Slices of track `tid` named `name`.
fn slices<'a>(events: &'a [Value], tid: u64, name: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["ph"] == "X" && e["tid"] == tid && e["name"] == name)
        .collect()
}

/// The most writes in flight on the disk while the reader is reading
/// (between the start of its first read and the end of its last).
fn write_depth_while_reading(events: &[Value]) -> u64 {
    let reads = slices(events, tid(events, "reader"), "read_io");
    assert!(!reads.is_empty(), "the reader waits for its reads");
    let ts = |e: &Value| e["ts"].as_f64().expect("ts");
    let start = reads.iter().map(|e| ts(e)).fold(f64::MAX, f64::min);
    let end = reads
        .iter()
        .map(|e| ts(e) + e["dur"].as_f64().expect("dur"))
        .fold(0.0, f64::max);
    events
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "disk.writes_in_flight")
        .filter(|e| (start..=end).contains(&ts(e)))
        .map(|e| e["args"]["value"].as_u64().expect("value"))
        .max()
        .expect("writes while the reader reads")
}

#[test]
fn axboe_2016_trace_shows_throttled_writers_and_wbt_holding_the_write_depth() {
    let (report, events) = traced_axboe(&[]);
    let writers = tid(&events, "writers");
    let throttled = slices(&events, writers, "dirty_throttle");
    assert!(
        throttled.len() > 100,
        "{} dirty_throttle slices",
        throttled.len()
    );
    assert!(throttled
        .iter()
        .all(|e| e["dur"].as_f64().unwrap() > 0.0 && e["args"]["planned_us"].is_u64()));
    // wbt on: the disk never holds more writes than wbt's largest limit.
    let disk = &report.engine.devices[0];
    assert!(disk.wbt_enabled);
    let on = write_depth_while_reading(&events);
    assert!(on <= disk.wbt_max_depth_max as u64, "{on} writes in flight");
    // The page counters are sampled.
    assert!(events
        .iter()
        .any(|e| e["ph"] == "C" && e["name"] == "dirty_pages"));

    // wbt off: the writes fill the device's queue (nr_requests).
    let (report, events) = traced_axboe(&["wbt_lat_usec=0"]);
    assert!(!report.engine.devices[0].wbt_enabled);
    let off = write_depth_while_reading(&events);
    assert_eq!(off, 128, "nr_requests of the scenario's disk");
    assert!(on * 4 <= off, "wbt on {on}, off {off}");
}

#[test]
fn a_trace_changes_nothing_in_the_run() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/axboe-2016.toml");
    let s = load(&path, &wb_sim::device::validate).expect("parses");
    let plain = run(&s, SimOptions::default()).expect("runs");
    let (traced, _) = traced_axboe(&[]);
    let json = |r: &RunReport| {
        let mut v = serde_json::to_value(r).expect("report");
        v.as_object_mut().expect("object").remove("wall_time_s");
        v
    };
    assert_eq!(json(&plain), json(&traced));
}
