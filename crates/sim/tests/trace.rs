//! `SimOptions::trace` (`wb sim --trace`): the trace of a run, read back
//! as a person would read it in Perfetto.

use serde_json::Value;
use std::path::Path;
use wb_scenario::{apply_set, load};
use wb_sim::report::RunReport;
use wb_sim::runner::{run, SimOptions};
use wb_trace::Trace;

/// Runs axboe-2016 with `sets`, recording a trace in a ring of the
/// default size; the report and the trace as JSON.
fn axboe_trace_json(sets: &[&str]) -> (RunReport, Trace, Vec<u8>) {
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
    let mut json = Vec::new();
    trace.write_json(&mut json).expect("written");
    (report, trace, json)
}

/// Runs axboe-2016 with `sets`, recording a trace; the report and the
/// trace's events, parsed back from its JSON.
fn traced_axboe(sets: &[&str]) -> (RunReport, Vec<Value>) {
    let (report, trace, json) = axboe_trace_json(sets);
    assert_eq!(trace.dropped(), 0, "the whole run is kept");
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

/// Checks `events` against the trace-event format as Perfetto and
/// chrome://tracing read it: each event has its required fields with the
/// right types; complete ("X") events have a duration and never overlap on
/// one track (one track is one sequence of slices); on each track and each
/// counter, timestamps never go back.
fn assert_trace_event_format(events: &[Value]) {
    use std::collections::HashMap;
    let mut last_end: HashMap<u64, f64> = HashMap::new();
    let mut last_counter: HashMap<String, f64> = HashMap::new();
    let mut tracks: HashMap<u64, String> = HashMap::new();
    for e in events {
        let ph = e["ph"].as_str().expect("ph is a string");
        assert!(e["name"].is_string(), "name: {e}");
        assert_eq!(e["pid"], 1, "pid: {e}");
        assert!(e["args"].is_object(), "args: {e}");
        match ph {
            "M" => {
                let tid = e["tid"].as_u64().expect("tid");
                if e["name"] == "thread_name" {
                    let name = e["args"]["name"].as_str().expect("a track's name");
                    assert!(
                        tracks.insert(tid, name.to_string()).is_none(),
                        "track {tid} named twice"
                    );
                }
            }
            "X" => {
                let tid = e["tid"].as_u64().expect("tid");
                assert!(tracks.contains_key(&tid), "slice on an unnamed track: {e}");
                let ts = e["ts"].as_f64().expect("ts");
                let dur = e["dur"].as_f64().expect("dur");
                assert!(ts >= 0.0 && dur >= 0.0, "{e}");
                let end = last_end.entry(tid).or_insert(0.0);
                // Microseconds with three decimals: a slice that starts as
                // the last ends may sum a hair past it.
                assert!(
                    ts >= *end - 1e-6,
                    "track {} goes back or overlaps at {ts}: {e}",
                    tracks[&tid]
                );
                *end = ts + dur;
            }
            "C" => {
                let ts = e["ts"].as_f64().expect("ts");
                assert!(e["args"]["value"].is_number(), "{e}");
                let name = e["name"].as_str().expect("name").to_string();
                let last = last_counter.entry(name.clone()).or_insert(0.0);
                assert!(ts >= *last, "counter {name} goes back at {ts}");
                *last = ts;
            }
            other => panic!("an event of kind {other:?}: {e}"),
        }
    }
}

/// Track numbers whose name starts with `prefix`.
fn tids_named(events: &[Value], prefix: &str) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .filter(|e| {
            e["args"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(prefix))
        })
        .filter_map(|e| e["tid"].as_u64())
        .collect()
}

/// Counter events named `name`, as (ts, value).
fn counter(events: &[Value], name: &str) -> Vec<(f64, i64)> {
    events
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == name)
        .map(|e| {
            (
                e["ts"].as_f64().expect("ts"),
                e["args"]["value"].as_i64().expect("value"),
            )
        })
        .collect()
}

#[test]
fn a_trace_is_in_the_trace_event_format_and_shows_every_request_and_counter() {
    let (report, events) = traced_axboe(&[]);
    assert_trace_event_format(&events);
    // Every request the disk served is a slice on one of its lanes, a
    // write with the reason it was written.
    let lanes = tids_named(&events, "disk q");
    assert!(!lanes.is_empty());
    let on_lanes = |name: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["name"] == name)
            .filter(|e| e["tid"].as_u64().is_some_and(|t| lanes.contains(&t)))
            .collect()
    };
    let disk = &report.engine.devices[0];
    let (writes, reads) = (on_lanes("write"), on_lanes("read"));
    // Requests still on the device when the run ended (the background
    // reader's last) are in the counters, not yet slices.
    let at_end = |name: &str| counter(&events, name).last().map_or(0, |&(_, v)| v as u64);
    assert_eq!(
        writes.len() as u64 + at_end("disk.writes_in_flight"),
        disk.writes
    );
    assert_eq!(
        reads.len() as u64 + at_end("disk.reads_in_flight"),
        disk.reads
    );
    let pages: u64 = writes
        .iter()
        .map(|e| e["args"]["pages"].as_u64().expect("pages"))
        .sum();
    assert_eq!(pages as f64 * 4096.0 / (1 << 20) as f64, disk.written_mib);
    let reasons: std::collections::BTreeSet<&str> = writes
        .iter()
        .map(|e| e["args"]["reason"].as_str().expect("a write's reason"))
        .collect();
    assert!(
        reasons.contains("background") && reasons.contains("sync"),
        "{reasons:?}"
    );
    // Lanes: no more than the device takes at once.
    assert!(lanes.len() <= 128, "{} lanes", lanes.len());
    // A dirty-throttle pause carries what it was computed from.
    let throttled = slices(&events, tid(&events, "writers"), "dirty_throttle");
    for e in &throttled {
        let arg = |k: &str| e["args"][k].as_u64().unwrap_or_else(|| panic!("{k}: {e}"));
        assert!(
            arg("dirty_pages") > 0 && arg("thresh_pages") <= arg("limit_pages"),
            "{e}"
        );
        assert!(
            arg("pos_ratio_permille") <= 2000 && arg("pause_us") > 0,
            "{e}"
        );
    }
    // The counters: thresholds, cached pages, the domain's dirty pages,
    // wbt's depth moving within its bounds, its scale step, bandwidth.
    for name in [
        "dirty_thresh_pages",
        "dirty_bg_thresh_pages",
        "cached_pages",
        "disk/root.dirty_pages",
        "disk.write_bw_pages_s",
        "disk.wbt_scale_step",
    ] {
        assert!(!counter(&events, name).is_empty(), "{name}");
    }
    let depth = counter(&events, "disk.wbt_depth");
    assert!(depth.len() > 10, "wbt's depth changes: {}", depth.len());
    assert!(depth.iter().all(|&(_, d)| (disk.wbt_max_depth_min as i64
        ..=disk.wbt_max_depth_max as i64)
        .contains(&d)));
    // Recorded only when they move: no two events in a row with one value.
    assert!(depth.windows(2).all(|w| w[0].1 != w[1].1));
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
    assert_trace_event_format(&events);
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

/// In the simulator a trace is deterministic: the same seed gives the same
/// file, byte for byte; another run another.
#[test]
fn the_same_seed_gives_the_same_trace() {
    let bytes = |sets: &[&str]| axboe_trace_json(sets).2;
    let first = bytes(&[]);
    assert_eq!(first, bytes(&[]));
    // A different run (wbt off) gives a different trace.
    assert_ne!(first, bytes(&["wbt_lat_usec=0"]));
}

/// The default ring keeps a trace under about 100 MB of JSON however long
/// the run: the widest event of a run full of throttled writers, times
/// the events kept by default.
#[test]
fn the_default_ring_bounds_a_trace_near_100_mb() {
    let (_, _, json) = axboe_trace_json(&[]);
    let widest = json
        .split(|&b| b == b'\n')
        .map(<[u8]>::len)
        .max()
        .expect("lines");
    assert!(
        widest > 250,
        "a throttle slice with its figures: {widest} bytes"
    );
    assert!(
        widest * wb_trace::DEFAULT_CAPACITY <= 100_000_000,
        "{widest} bytes x {} events",
        wb_trace::DEFAULT_CAPACITY
    );
}
