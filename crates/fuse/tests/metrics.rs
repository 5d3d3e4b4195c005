//! `.writeback/metrics`: the mount's figures in the Prometheus text
//! format, checked by Prometheus's own `promtool check metrics` after a
//! workload through the mount (writes, fsync, reads, a rename, an
//! unlink), and agreeing with `.writeback/stats`.
//!
//! Needs root, /dev/fuse and promtool (Debian's `prometheus` package,
//! scripts/setup.sh); without them the test says why and passes, except
//! under `WB_REQUIRE_ALL_TESTS`, where it fails.

#[macro_use]
mod common;
use common::*;
use std::fs;
use std::io::{Read, Write};
use std::process::{Command, Stdio};

/// Where Debian's package puts promtool.
const PROMTOOL: &str = "promtool";

/// The value of the sample line `series` (name and labels as written).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

/// `promtool check metrics` on `text` (from stdin): its exit status and
/// what it printed.
fn promtool_check(text: &str) -> (bool, String) {
    let mut child = Command::new(PROMTOOL)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start promtool");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("feed promtool");
    let out = child.wait_with_output().expect("promtool ran");
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), said)
}

#[test]
fn promtool_accepts_the_metrics_after_a_workload() {
    require!(false);
    if tool_missing(PROMTOOL, "--version") {
        return;
    }
    let _serial = serial();
    let root = TempRoot::new("metrics");
    let mount = Mount::start_with(&root.dir("backing"), &root.dir("mnt"), |o| {
        // Small dirty limits: the writer gets throttled, so the pause
        // histograms have something in them.
        o.knobs.push("dirty_bytes=4MiB".into());
        o.knobs.push("dirty_background_bytes=1MiB".into());
    });
    let mut data = vec![0u8; 16 << 20];
    pattern(5, &mut data);
    let a = mount.mnt.join("a");
    let mut file = fs::File::create(&a).expect("create");
    file.write_all(&data).expect("write");
    file.sync_all().expect("fsync");
    drop(file);
    let mut back = Vec::new();
    fs::File::open(&a)
        .expect("open")
        .read_to_end(&mut back)
        .expect("read");
    assert!(back == data, "read back what was written");
    let b = mount.mnt.join("b");
    fs::rename(&a, &b).expect("rename");
    fs::write(mount.mnt.join("c"), b"small").expect("write c");
    fs::remove_file(mount.mnt.join("c")).expect("unlink");

    let text = fs::read_to_string(mount.mnt.join(".writeback/metrics")).expect("read metrics");
    // WB_KEEP_METRICS=FILE keeps a copy to look at (the temporary
    // directory goes with the test).
    let saved = std::env::var_os("WB_KEEP_METRICS").map_or(root.0.join("metrics.prom"), Into::into);
    fs::write(&saved, &text).expect("keep the file");
    let (ok, said) = promtool_check(&text);
    assert!(
        ok,
        "promtool check metrics failed:\n{said}\n(file: {})",
        saved.display()
    );
    assert!(said.trim().is_empty(), "promtool complained:\n{said}");

    // The workload shows, with the labels of the stats' lines.
    let stats = mount.stats();
    for op in ["write", "fsync", "read", "rename", "unlink", "create"] {
        let series = format!("wb_fuse_requests_total{{opcode=\"{op}\"}}");
        let n = sample(&text, &series).unwrap_or_else(|| panic!("no {series}"));
        assert!(n >= 1.0, "{series} {n}");
        let count = format!("wb_fuse_request_duration_seconds_count{{opcode=\"{op}\"}}");
        assert_eq!(sample(&text, &count), Some(n), "{count}");
        let inf = format!("wb_fuse_request_duration_seconds_bucket{{opcode=\"{op}\",le=\"+Inf\"}}");
        assert_eq!(sample(&text, &inf), Some(n), "{inf}");
    }
    // Requests the reads of the two files do not add to: the same count.
    for op in ["rename", "unlink", "fsync"] {
        let series = format!("wb_fuse_requests_total{{opcode=\"{op}\"}}");
        let line = format!("fuse_request_{op}_count");
        assert_eq!(sample(&text, &series), Some(stats[&line] as f64), "{op}");
    }
    let dirtied = sample(&text, "wb_dirtied_bytes_total").expect("dirtied");
    assert!(dirtied >= data.len() as f64, "dirtied {dirtied}");
    let device = device_of(&mount.mnt);
    let written = format!("wb_device_written_bytes_total{{device=\"{device}\"}}");
    let written = sample(&text, &written).expect("device written");
    assert!(written >= data.len() as f64, "written {written}");
    assert!(sample(&text, &format!("wb_wbt_depth{{device=\"{device}\"}}")).is_some());
    let sync = "wb_pauses_total{reason=\"sync\"}";
    assert!(sample(&text, sync).is_some_and(|n| n >= 1.0), "{sync}");
    stop_ok(mount);
}
