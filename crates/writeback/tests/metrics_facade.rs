//! Feature `metrics`: the library's figures through the `metrics` facade,
//! caught by metrics-util's debugging recorder (installed by this test,
//! as a program installs its own: the library never does). After writes,
//! a sync and reads through the library, the counters have the values the
//! engine counted, with the names and labels of the text format, and the
//! pause histogram has one value per pause.
//!
//! One test in this binary: the recorder is the process's.

mod common;

use common::pattern;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use writeback::OpenOptions;

/// A snapshot's values by (kind, name, labels as `k=v,…`). Taking it
/// drains the recorder's histograms.
type Values = BTreeMap<(MetricKind, String, String), DebugValue>;

fn values(snapshotter: &Snapshotter) -> Values {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(ck, _, _, value)| {
            let labels: Vec<String> = ck
                .key()
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            let name = ck.key().name().to_string();
            ((ck.kind(), name, labels.join(",")), value)
        })
        .collect()
}

fn counter(values: &Values, name: &str, labels: &str) -> u64 {
    match values.get(&(MetricKind::Counter, name.to_string(), labels.to_string())) {
        Some(DebugValue::Counter(n)) => *n,
        other => panic!("counter {name}{{{labels}}}: {other:?}"),
    }
}

#[test]
fn counters_gauges_and_pauses_reach_the_programs_recorder() {
    let Some(dir) = common::direct_test_dir("metrics-facade") else {
        return;
    };
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this process");

    let cache = common::small_cache_without_background_writeback();
    let file = cache
        .open(dir.join("f"), OpenOptions { create: true })
        .expect("open");
    // The file's device, known from its first open.
    let device = cache.device_names().pop().expect("a device");
    let data = pattern(7, 3 << 20);
    file.write_at(&data, 0).expect("write");
    file.sync_data().expect("sync");
    let mut back = vec![0u8; data.len()];
    assert_eq!(file.read_at(&mut back, 0).expect("read"), data.len());
    assert!(back == data, "read back");

    cache.publish_metrics();
    let v = values(&snapshotter);
    let len = data.len() as u64;
    assert_eq!(counter(&v, "wb_dirtied_bytes_total", ""), len);
    let written = counter(
        &v,
        "wb_device_written_bytes_total",
        &format!("device={device}"),
    );
    assert_eq!(written, len, "written back once");
    let by_reason: u64 = [
        "background",
        "vmscan",
        "sync",
        "periodic",
        "balance_dirty",
        "dontcache",
    ]
    .iter()
    .map(|r| counter(&v, "wb_written_bytes_total", &format!("reason={r}")))
    .sum();
    assert_eq!(by_reason, len);
    assert!(counter(&v, "wb_written_bytes_total", "reason=sync") > 0);
    let domain_written = counter(
        &v,
        "wb_domain_written_bytes_total",
        &format!("device={device},domain=root"),
    );
    assert_eq!(domain_written, len);
    // A gauge, and the budget.
    let key = |name: &str, labels: &str| (MetricKind::Gauge, name.to_string(), labels.to_string());
    assert!(matches!(
        v.get(&key("wb_memory_budget_bytes", "")),
        Some(DebugValue::Gauge(g)) if g.0 == (64u64 << 20) as f64
    ));
    assert!(v.contains_key(&key("wb_wbt_depth", &format!("device={device}"))));
    // Every pause the engine counted is one value of the histogram, as
    // long as the engine measured it.
    let sync_pauses = counter(&v, "wb_pauses_total", "reason=sync");
    assert!(sync_pauses >= 1, "sync_data waited");
    let hist = (
        MetricKind::Histogram,
        "wb_pause_duration_seconds".to_string(),
        "reason=sync".to_string(),
    );
    match v.get(&hist) {
        Some(DebugValue::Histogram(seconds)) => {
            assert_eq!(seconds.len() as u64, sync_pauses, "{seconds:?}");
            assert!(
                seconds.iter().all(|s| s.0 > 0.0 && s.0 < 60.0),
                "{seconds:?}"
            );
        }
        other => panic!("no sync pause histogram: {other:?}"),
    }
    // Nothing in seconds published as a counter.
    assert!(!v
        .keys()
        .any(|(k, n, _)| *k == MetricKind::Counter && n.contains("seconds")));

    // The timer thread publishes on its own within a second or so.
    file.write_at(&data[..1 << 20], len).expect("write more");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = values(&snapshotter);
        let key = (
            MetricKind::Counter,
            "wb_dirtied_bytes_total".to_string(),
            String::new(),
        );
        if matches!(v.get(&key), Some(DebugValue::Counter(n)) if *n == len + (1 << 20)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not published by the timer thread"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(file);
    drop(cache);
    let _ = std::fs::remove_dir_all(&dir);
}
