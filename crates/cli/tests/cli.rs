//! `wb sim` as a person uses it: exit codes, error messages, JSON shape,
//! determinism.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::wb;

/// Writes a scenario file under Cargo's scratch directory for integration
/// tests (inside target/, so nothing is left in /tmp; each test's names
/// are its own, and a new run overwrites them).
fn write_temp(name: &str, text: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("wb-cli-test");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const SMALL: &str = r#"
name = "small"
seed = 3

[cache]
memory = "64MiB"

[[device]]
name = "disk"
model = "hdd"

[[job]]
name = "w"
kind = "writer"
device = "disk"
files = 2
file_size = "8MiB"
sync = true

[[job]]
name = "r"
kind = "reader"
device = "disk"
file_size = "16MiB"
background = true
"#;

/// `wb run SCENARIO --json --no-calibrate --dir DIR`, its JSON.
fn run_json(scenario: &Path, dir: &Path) -> serde_json::Value {
    json(&wb(&[
        "run",
        scenario.to_str().expect("UTF-8 path"),
        "--json",
        "--no-calibrate",
        "--dir",
        dir.to_str().expect("UTF-8 path"),
    ]))
}

/// A fresh directory for `wb run` beside the build, or None (after a
/// skip, which fails under WB_REQUIRE_ALL_TESTS) without O_DIRECT there.
fn run_dir(name: &str) -> Option<PathBuf> {
    let base =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&base).expect("create the run directory");
    if !writeback::io::supports_direct(&base) {
        let _ = std::fs::remove_dir_all(&base);
        wb_testkit::skip(&format!("{} does not support O_DIRECT", base.display()));
        return None;
    }
    Some(base)
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

#[test]
fn json_has_the_promised_shape_and_is_deterministic() {
    let path = write_temp("small.toml", SMALL);
    let p = path.to_str().unwrap();
    let a = json(&wb(&["sim", p, "--json"]));
    for key in [
        "scenario",
        "seed",
        "sim_time_s",
        "wall_time_s",
        "jobs",
        "engine",
    ] {
        assert!(a.get(key).is_some(), "missing {key}");
    }
    let job = &a["jobs"][0];
    for key in [
        "name",
        "kind",
        "ops",
        "bytes",
        "elapsed_s",
        "iops",
        "bw_mib_s",
        "lat_us",
    ] {
        assert!(job.get(key).is_some(), "job missing {key}");
    }
    for key in ["p50", "p90", "p99", "p99_9", "p99_99", "max"] {
        assert!(job["lat_us"][key].is_f64(), "lat_us missing {key}");
    }
    assert_eq!(a["seed"], 3);
    let mut b = json(&wb(&["sim", p, "--json"]));
    let mut a = a;
    a["wall_time_s"] = 0.into();
    b["wall_time_s"] = 0.into();
    assert_eq!(a.to_string(), b.to_string(), "same seed, same report");
    let c = json(&wb(&["sim", p, "--json", "--seed", "4"]));
    assert_eq!(c["seed"], 4);
}

#[test]
fn bad_scenario_names_file_line_and_problem_with_exit_2() {
    let path = write_temp("bad.toml", &SMALL.replace("files = 2", "files = 0"));
    let out = wb(&["sim", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml:16:9:"), "{err}");
    assert!(err.contains("files"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_knob_values_exit_2() {
    let path = write_temp("small2.toml", SMALL);
    let p = path.to_str().unwrap();
    for set in [
        "dirty_ratio=150",
        "wbt_lat_usec=fast",
        "nodisk.wbt_lat_usec=0",
        "no_such_knob=1",
        "dirty_ratio",
    ] {
        let out = wb(&["sim", p, "--set", set]);
        assert_eq!(out.status.code(), Some(2), "--set {set}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--set"), "{err}");
    }
    let path = write_temp(
        "badknob.toml",
        &SMALL.replace("memory = \"64MiB\"", "memory = \"lots\""),
    );
    let out = wb(&["sim", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("badknob.toml:6:"));
}

#[test]
fn missing_file_and_garbage_exit_2_without_panic() {
    let out = wb(&["sim", "/nonexistent/x.toml"]);
    assert_eq!(out.status.code(), Some(2));
    let path = write_temp("garbage.toml", "\u{0}\u{1}[[[[ not toml");
    let out = wb(&["sim", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

#[test]
fn human_report_shows_jobs_and_engine() {
    let path = write_temp("small3.toml", SMALL);
    let out = wb(&["sim", path.to_str().unwrap()]);
    assert!(out.status.success());
    // The progress bar is drawn on a terminal only: a pipe or a log gets
    // no escape codes.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.is_empty(), "{stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "x real time",
        "w (writer on disk)",
        "read lat",
        "engine:",
        "stalls:",
        "device disk (hdd)",
    ] {
        assert!(text.contains(needle), "missing '{needle}' in:\n{text}");
    }
}

#[test]
fn bench_cpu_json_reports_child_cpu_time() {
    let Some((base, dir, data_dir)) = common::bench_dirs("cpu") else {
        return;
    };
    let args = [
        "cpu", "--size", "64MiB", "--repeat", "1", "--memory", "64MiB",
    ];
    let out = common::wb_bench_json(&args, &dir, &data_dir);
    let v = json(&out);
    assert_eq!(v["size_bytes"], 64 << 20);
    assert_eq!(v["block_size"], 1 << 20);
    assert_eq!(v["memory_bytes"], 64 << 20);
    let runs = v["runs"].as_array().expect("runs is an array");
    assert_eq!(runs.len(), 1, "{v}");
    let run = &runs[0];
    for field in [
        "cpu_s",
        "user_s",
        "sys_s",
        "wall_s",
        "cpu_s_per_gib",
        "mib_s",
    ] {
        let x = run[field].as_f64().unwrap_or(f64::NAN);
        assert!(x.is_finite() && x >= 0.0, "{field} = {x} in {v}");
    }
    let cpu = run["cpu_s"].as_f64().unwrap_or(0.0);
    assert!(cpu > 0.0, "no CPU time counted: {v}");
    let sum = run["user_s"].as_f64().unwrap_or(0.0) + run["sys_s"].as_f64().unwrap_or(0.0);
    assert!((cpu - sum).abs() < 1e-9, "cpu_s is not user_s + sys_s: {v}");
    assert!(run["wall_s"].as_f64().unwrap_or(0.0) > 0.0, "{v}");
    assert_eq!(v["median_cpu_s_per_gib"], run["cpu_s_per_gib"]);
    assert_eq!(v["median_mib_s"], run["mib_s"]);
    // The file is removed after the run.
    let left = common::files_in(&dir);
    assert!(left.is_empty(), "files left in {}: {left:?}", dir.display());

    // Bad sizes and counts: exit 2 with a message, before anything is created.
    for args in [
        &["bench", "cpu", "--size", "4KiB", "--block-size", "1MiB"][..],
        &["bench", "cpu", "--size", "0"],
        &["bench", "cpu", "--block-size", "0"],
        &["bench", "cpu", "--repeat", "0"],
    ] {
        let out = wb(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.trim().is_empty() && !stderr.contains("panicked"),
            "{args:?}: {stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&base);
}

/// A `wb run` of three short jobs: one stops when its workload ends, one at
/// its runtime, and a background one once both have finished.
const SHORT_RUN: &str = r#"
name = "short-run"
seed = 5

[cache]
memory = "64MiB"

[[device]]
name = "disk"
model = "hdd"

[[job]]
name = "w"
kind = "occasional-writer"
device = "disk"
block_size = "4KiB"
interval = "20ms"
count = 5

[[job]]
name = "f"
kind = "fsync-loop"
device = "disk"
block_size = "4KiB"
interval = "5ms"
count = 100000
runtime = "100ms"

[[job]]
name = "r"
kind = "reader"
device = "disk"
file_size = "1MiB"
block_size = "4KiB"
rate_iops = 200
background = true
"#;

#[test]
fn run_stops_jobs_by_the_simulators_rules_and_reports_them() {
    let Some(base) = run_dir("wb-cli-run") else {
        return;
    };
    let path = write_temp("short-run.toml", SHORT_RUN);
    let v = run_json(&path, &base);
    let _ = std::fs::remove_dir_all(&base);
    assert_eq!(v["scenario"], "short-run");
    assert!(v["io_backend"].is_string(), "{v}");
    let jobs = v["jobs"].as_array().expect("jobs is an array");
    let names: Vec<_> = jobs.iter().map(|j| j["name"].as_str()).collect();
    assert_eq!(names, [Some("w"), Some("f"), Some("r")], "{v}");
    let num = |job: &serde_json::Value, key: &str| job[key].as_f64().unwrap_or(f64::NAN);
    let (w, f, r) = (&jobs[0], &jobs[1], &jobs[2]);
    for job in jobs {
        assert_eq!(job["device"], "disk", "{v}");
        assert_eq!(job["errors"], 0, "{v}");
        for key in ["elapsed_s", "iops", "bw_mib_s"] {
            let x = num(job, key);
            assert!(x.is_finite() && x >= 0.0, "{key} = {x} in {v}");
        }
    }
    // The occasional writer ends with its workload: 5 writes of 4 KiB.
    assert_eq!(w["kind"], "occasional-writer");
    assert_eq!(
        (w["ops"].as_u64(), w["bytes"].as_u64()),
        (Some(5), Some(5 * 4096))
    );
    assert_eq!(w["syncs"], 0, "{v}");
    assert!(num(w, "elapsed_s") >= 0.08, "{v}");
    // The fsync loop stops at its runtime, long before its count: each
    // write is followed by an fsync, counted apart.
    let f_elapsed = num(f, "elapsed_s");
    assert!((0.1..10.0).contains(&f_elapsed), "{v}");
    let (f_ops, f_syncs) = (
        f["ops"].as_u64().unwrap_or(0),
        f["syncs"].as_u64().unwrap_or(0),
    );
    assert!(f_syncs >= 1 && f_ops < 100_000, "{v}");
    assert!(f_ops == f_syncs || f_ops == f_syncs + 1, "{v}");
    assert_eq!(f["bytes"].as_u64(), Some(f_ops * 4096), "{v}");
    // The background reader stops once both have finished.
    let last_foreground = num(w, "elapsed_s").max(f_elapsed);
    assert!(num(r, "elapsed_s") < last_foreground + 1.0, "{v}");
    assert!(r["ops"].as_u64().unwrap_or(0) >= 1, "{v}");
    for job in jobs {
        assert_eq!(job["cut_off"], false, "{v}");
    }
    // With a duration shorter than the fsync loop's runtime, the run ends
    // there, as in `wb sim`, and says which jobs it cut off.
    let cut = write_temp(
        "short-run-cut.toml",
        &SHORT_RUN.replace("seed = 5", "seed = 5\nduration = \"50ms\""),
    );
    std::fs::create_dir_all(&base).expect("create the run directory");
    let v = run_json(&cut, &base);
    let _ = std::fs::remove_dir_all(&base);
    let jobs = v["jobs"].as_array().expect("jobs is an array");
    let cut_off: Vec<_> = jobs.iter().map(|j| j["cut_off"].as_bool()).collect();
    assert_eq!(cut_off, [Some(true), Some(true), Some(false)], "{v}");
    assert!(v["sim_time_s"].as_f64().unwrap_or(f64::NAN) < 1.0, "{v}");
}

#[test]
fn direct_mode_is_simulated_and_refused_by_wb_run() {
    let path = write_temp("direct.toml", SMALL);
    let p = path.to_str().unwrap();
    let out = wb(&["sim", p, "--set", "w.mode=direct", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(
        v["engine"]["dirtied_mib"].as_f64(),
        Some(0.0),
        "nothing went through the cache"
    );
    let direct = v["engine"]["stalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["reason"] == "direct_io")
        .expect("a direct_io line");
    assert!(direct["count"].as_u64().unwrap() > 0);
    let dir = std::env::temp_dir().join(format!("wb-cli-direct-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = wb(&[
        "run",
        p,
        "--set",
        "w.mode=direct",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("job 'w': mode \"direct\" is simulated only"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_stable_json_reports_each_mode_and_removes_its_files() {
    let Some((base, dir, data_dir)) = common::bench_dirs("stable") else {
        return;
    };
    let args = ["stable", "--seconds", "1", "--repeat", "1"];
    let out = common::wb_bench_json(&args, &dir, &data_dir);
    let v = json(&out);
    let configs = v["configs"].as_array().expect("configs is an array");
    let names: Vec<&str> = configs.iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["wait", "none", "snapshot", "always-copy"], "{v}");
    for c in configs {
        for p in ["p50", "p99", "p99_9", "max"] {
            let x = c["write_lat_us"][p].as_f64().unwrap_or(f64::NAN);
            assert!(x.is_finite() && x > 0.0, "{p} = {x} in {c}");
        }
        assert!(c["mib_s"].as_f64().unwrap_or(0.0) > 0.0, "{c}");
    }
    // Only snapshot copies pages, and only wait waits for them.
    assert_eq!(configs[0]["snapshot_pages"], 0);
    assert_eq!(configs[1]["snapshot_pages"], 0);
    assert_eq!(configs[1]["stable_waits"], 0);
    assert_eq!(configs[2]["stable_waits"], 0);
    // always-copy is none with copies in writeback, not in the engine.
    assert_eq!(configs[3]["snapshot_pages"], 0);
    assert_eq!(configs[3]["stable_waits"], 0);
    let left = common::files_in(&dir);
    assert!(left.is_empty(), "files left behind: {left:?}");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn bench_stable_refuses_bad_arguments() {
    let out = wb(&["bench", "stable", "--clients", "0"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("'0' is not a number of clients from 1 to 64"),
        "{err}"
    );
    let out = wb(&["bench", "stable", "--memory", "lots", "--seconds", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--memory: invalid value 'lots' for memory"),
        "{err}"
    );
}

const DBENCH_RUN: &str = r#"
name = "dbench-run"
seed = 3
duration = "10s"

[cache]
memory = "64MiB"

[[device]]
name = "disk"
model = "hdd"
stable_writes = "snapshot"

[[job]]
name = "c"
kind = "dbench"
device = "disk"
files = 2
file_size = "64KiB"
block_size = "4KiB"
read_every = 4
flush_every = 10
count = 200
"#;

#[test]
fn run_reports_each_kind_of_a_dbench_job() {
    let Some((base, dir, _)) = common::bench_dirs("run-dbench") else {
        return;
    };
    let path = write_temp("dbench-run.toml", DBENCH_RUN);
    let v = run_json(&path, &dir);
    let _ = std::fs::remove_dir_all(&base);
    let job = &v["jobs"][0];
    assert_eq!(job["errors"], 0, "{v}");
    // 200 operations: every 10th a flush (20), every 4th that is not one
    // a read (50 multiples of 4, 10 of them multiples of 20), the rest writes.
    let kinds: Vec<(&str, u64)> = job["op_kinds"]
        .as_array()
        .expect("op_kinds is an array")
        .iter()
        .map(|k| {
            (
                k["kind"].as_str().unwrap_or("?"),
                k["count"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(kinds, [("write", 140), ("read", 40), ("flush", 20)], "{v}");
    assert_eq!(
        v["engine"]["devices"][0]["stable_writes"], "snapshot",
        "{v}"
    );
}

#[test]
fn vopr_json_counts_runs_faults_and_checks() {
    let out = wb(&["vopr", "--seeds", "1..6", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v["runs"], 5);
    assert_eq!(v["violations"], 0);
    assert_eq!(v["failures"].as_array().map(Vec::len), Some(0));
    for kind in [
        "write_eio",
        "read_eio",
        "enospc",
        "latency_spike",
        "knob_change",
    ] {
        assert!(v["faults"][kind].is_u64(), "{kind} in {v}");
    }
    assert_eq!(v["checks"]["no_panic"], 5);
    assert!(v["checks"]["invariants"].as_u64().unwrap_or(0) > 0, "{v}");
    // The same seeds, the same counts.
    assert_eq!(json(&wb(&["vopr", "--seeds", "1..6", "--json"])), v);
    let scenario = wb(&["vopr", "--print-scenario", "3"]);
    assert!(String::from_utf8_lossy(&scenario.stdout).contains("name = \"vopr-3\""));
    // One seed's whole report, twice: the same bytes but for the wall time.
    let report = || {
        let out = wb(&["vopr", "--report", "7"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let kept: Vec<String> = text
            .lines()
            .filter(|l| !l.contains("wall_time_s"))
            .map(String::from)
            .collect();
        assert!(kept.len() > 50, "{text}");
        kept
    };
    assert_eq!(report(), report());
}

#[test]
fn vopr_refuses_bad_arguments() {
    let out = wb(&["vopr", "--seeds", "5..5"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("'5..5': the range is empty"), "{err}");
    let out = wb(&["vopr", "--faults", "power"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown fault profile 'power' (expected io or all)"),
        "{err}"
    );
}

const REMOVER_RUN: &str = r#"
name = "remover-run"
seed = 1
duration = "60s"

[cache]
memory = "64MiB"

[[device]]
name = "disk"
model = "sata-ssd"

[[job]]
name = "rm"
kind = "remover"
device = "disk"
files = 300
file_size = "4KiB"
big_files = 2
big_file_size = "40MiB"
"#;

#[test]
fn run_removes_a_remover_jobs_tree_through_the_backlog() {
    let Some((base, dir, _)) = common::bench_dirs("run-remover") else {
        return;
    };
    let path = write_temp("remover-run.toml", REMOVER_RUN);
    let v = run_json(&path, &dir);
    // The device's directory under --dir.
    let left = common::files_in(&dir.join("disk"));
    let _ = std::fs::remove_dir_all(&base);
    let job = &v["jobs"][0];
    assert_eq!(
        (job["ops"].as_u64(), job["errors"].as_u64()),
        (Some(302), Some(0)),
        "{v}"
    );
    assert!(left.is_empty(), "files left: {left:?}");
    // Every file released by the backlog; the 40 MiB ones in three steps
    // each (16 + 16 MiB cut, then the removal), the others in one.
    let backlog = &v["engine"]["devices"][0]["backlog"];
    assert_eq!(backlog["items_done"], 302, "{v}");
    assert_eq!(backlog["steps_done"], 300 + 2 * 3, "{v}");
}

#[test]
fn fsx_passes_on_a_plain_directory_and_catches_a_planted_corruption() {
    let dir = std::env::temp_dir().join(format!("wb-fsx-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ok = std::process::Command::new(env!("CARGO_BIN_EXE_wb"))
        .args(["fsx", "--ops", "5000", "--seed", "3"])
        .arg(&dir)
        .output()
        .expect("run wb fsx");
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(
        ok.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(
        stdout.starts_with("fsx: 5000 operations on 4 files"),
        "{stdout}"
    );
    assert!(stdout.contains(": 0 mismatches"), "{stdout}");

    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_wb"))
        .args([
            "fsx",
            "--ops",
            "20000",
            "--seed",
            "3",
            "--corrupt-at",
            "100",
        ])
        .arg(&dir)
        .output()
        .expect("run wb fsx");
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("wb fsx: MISMATCH with seed 3: "),
        "{stderr}"
    );
    assert!(stderr.contains("\nreplay: wb fsx "), "{stderr}");
    assert!(
        stderr.contains("the last 200 operations:\n  #"),
        "the log: {stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fsx_refuses_bad_arguments() {
    for args in [
        &["--files", "0"][..],
        &["--files", "65"],
        &["--max-size", "1KiB"],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_wb"))
            .arg("fsx")
            .arg(std::env::temp_dir().join("wb-fsx-never"))
            .args(args)
            .output()
            .expect("run wb fsx");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with("wb fsx: --"), "{args:?}: {stderr}");
    }
}

#[test]
fn a_closed_pipe_ends_wb_quietly() {
    use std::io::Read;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_wb"))
        .args(["vopr", "--print-scenario", "7"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start wb");
    // Close the pipe at once: wb's writes find nobody reading.
    drop(child.stdout.take());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    let status = child.wait().expect("wb ran");
    assert!(!stderr.contains("panicked"), "{stderr}");
    use std::os::unix::process::ExitStatusExt;
    assert!(
        status.success() || status.signal() == Some(libc::SIGPIPE),
        "{status}: {stderr}"
    );
}

#[test]
fn sim_trace_writes_a_bounded_trace_and_refuses_a_path_it_cannot_write() {
    let path = write_temp("traced.toml", SMALL);
    let p = path.to_str().unwrap();
    let trace = path.with_file_name("traced.json");
    let out = wb(&[
        "sim",
        p,
        "--trace",
        trace.to_str().unwrap(),
        "--trace-events",
        "50",
    ]);
    // Tracks (one per job) and the 50 events kept.
    let parsed = common::bounded_trace(&out, &trace, 50);
    let events = parsed["traceEvents"].as_array().unwrap();
    for job in ["w", "r"] {
        assert!(
            events.iter().any(|e| e["args"]["name"] == job),
            "track {job}"
        );
    }
    // A trace that cannot be written fails before the run, with the path.
    let out = wb(&["sim", p, "--trace", "/nonexistent/dir/t.json"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot write the trace to /nonexistent/dir/t.json"),
        "{stderr}"
    );
}

/// `wb run --trace`: the real runtime's trace, one track per job thread
/// (named after the job), the device's writes in flight and the page
/// counts, and the writer's throttling as slices: its dirty limit is a
/// tenth of what it writes.
#[test]
fn run_trace_shows_the_jobs_stalls_and_the_device_queue() {
    let Some(base) = run_dir("wb-cli-run-trace") else {
        return;
    };
    let scenario = SMALL
        .replace(
            "memory = \"64MiB\"",
            "memory = \"64MiB\"\ndirty_bytes = \"4MiB\"\ndirty_background_bytes = \"1MiB\"",
        )
        .replace("file_size = \"8MiB\"", "file_size = \"32MiB\"");
    let path = write_temp("traced-run.toml", &scenario);
    let trace = base.join("run.json");
    let out = wb(&[
        "run",
        path.to_str().unwrap(),
        "--no-calibrate",
        "--dir",
        base.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    let text = std::fs::read(&trace);
    let _ = std::fs::remove_dir_all(&base);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: serde_json::Value = serde_json::from_slice(&text.expect("trace")).expect("JSON");
    let events = parsed["traceEvents"].as_array().unwrap();
    let track = |job: &str| {
        events
            .iter()
            .find(|e| {
                e["ph"] == "M"
                    && e["args"]["name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with(&format!("{job} (task ")))
            })
            .and_then(|e| e["tid"].as_u64())
    };
    let writer = track("w").expect("the writer's track");
    let throttled = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["tid"] == writer && e["name"] == "dirty_throttle")
        .count();
    assert!(throttled > 0, "the writer was throttled");
    // Each pause carries what it was computed from.
    assert!(events
        .iter()
        .filter(|e| e["ph"] == "X" && e["tid"] == writer && e["name"] == "dirty_throttle")
        .all(|e| e["args"]["pos_ratio_permille"].is_u64() && e["args"]["limit_pages"].is_u64()));
    // The device's requests: writes as slices on its lanes, with the
    // reason they were written.
    let lanes: Vec<u64> = events
        .iter()
        .filter(|e| {
            e["ph"] == "M"
                && e["args"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("disk q"))
        })
        .filter_map(|e| e["tid"].as_u64())
        .collect();
    let writes: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"] == "write")
        .filter(|e| e["tid"].as_u64().is_some_and(|t| lanes.contains(&t)))
        .collect();
    assert!(!writes.is_empty(), "the writes as slices");
    assert!(writes
        .iter()
        .all(|e| e["args"]["pages"].as_u64().is_some_and(|p| p > 0)
            && e["args"]["reason"].is_string()));
    let counter_max = |name: &str| {
        events
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"] == name)
            .filter_map(|e| e["args"]["value"].as_u64())
            .max()
    };
    assert!(counter_max("disk.writes_in_flight").is_some_and(|n| n > 0));
    assert!(counter_max("dirty_pages").is_some_and(|n| n > 0));
    assert!(counter_max("cached_pages").is_some_and(|n| n > 0));
    assert!(counter_max("dirty_thresh_pages").is_some_and(|n| n > 0));
    assert!(counter_max("disk.wbt_depth").is_some_and(|n| n > 0));
}

#[test]
fn sim_compare_runs_each_value_as_set_would_and_refuses_bad_specs() {
    let path = write_temp("compare.toml", SMALL);
    let p = path.to_str().unwrap();
    let out = wb(&["sim", p, "--compare", "dirty_ratio=20,5"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "dirty_ratio=20 ",
        "dirty_ratio=5 ",
        "w p99: ",
        "r p99: ",
        "with dirty_ratio=5 (",
    ] {
        assert!(text.contains(needle), "{needle:?} in {text}");
    }
    // Each run is the run --set gives (the simulator is deterministic).
    let v = json(&wb(&["sim", p, "--compare", "dirty_ratio=20,5", "--json"]));
    assert_eq!(v["knob"], "dirty_ratio");
    let runs = v["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2);
    let mut alone = json(&wb(&["sim", p, "--set", "dirty_ratio=5", "--json"]));
    let mut second = runs[1]["report"].clone();
    assert_eq!(runs[1]["value"], "5");
    for r in [&mut alone, &mut second] {
        r.as_object_mut().unwrap().remove("wall_time_s");
    }
    assert_eq!(second, alone);
    // Bad specs: exit 2 with the reason, before any run.
    for (spec, says) in [
        ("dirty_ratio=20", "at least two values"),
        ("dirty_ratio", "expected KNOB=V1,V2"),
        ("dirty_ratio=20,,5", "at least two values"),
        ("dirty_ratio=20,150", "dirty_ratio"),
        ("no_such_knob=1,2", "no_such_knob"),
    ] {
        let out = wb(&["sim", p, "--compare", spec]);
        assert_eq!(out.status.code(), Some(2), "{spec}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--compare") && err.contains(says),
            "{spec}: {err}"
        );
        assert!(out.stdout.is_empty(), "{spec}: nothing ran");
    }
    let out = wb(&[
        "sim",
        p,
        "--compare",
        "dirty_ratio=20,5",
        "--trace",
        "/tmp/x.json",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// `wb bench sim-speed` on two scenarios against a baseline: the same
/// binary computes the same reports; a baseline whose reports differ (a
/// script that changes the seed in this binary's) is told apart; a
/// missing baseline is bad input.
#[test]
fn sim_speed_compares_builds_and_tells_different_reports_apart() {
    let dir = std::env::temp_dir().join(format!("wb-sim-speed-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.toml"), SMALL).unwrap();
    std::fs::write(dir.join("b.toml"), SMALL.replace("seed = 3", "seed = 5")).unwrap();
    let bench = |baseline: &Path| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_wb"))
            .args([
                "bench",
                "sim-speed",
                "--repeat",
                "2",
                "--json",
                "--scenarios",
            ])
            .arg(&dir)
            .arg("--baseline")
            .arg(baseline)
            .output()
            .expect("run wb bench sim-speed");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("JSON")
    };
    let same = bench(Path::new(env!("CARGO_BIN_EXE_wb")));
    let scenarios = same["scenarios"].as_array().expect("scenarios");
    let names: Vec<_> = scenarios.iter().map(|s| s["name"].clone()).collect();
    assert_eq!(names, ["a", "b"], "{same}");
    for s in scenarios {
        assert_eq!(s["same_report"], true, "{s}");
        for build in ["this_build", "baseline"] {
            assert_eq!(s[build]["speeds"].as_array().map(Vec::len), Some(2), "{s}");
            assert!(s[build]["median"].as_f64().is_some_and(|m| m > 0.0), "{s}");
        }
    }

    let script = dir.join("other-wb");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n'{}' \"$@\" | sed -e 's/\"seed\": *[0-9]*/\"seed\": 99/'\n",
            env!("CARGO_BIN_EXE_wb")
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let other = bench(&script);
    for s in other["scenarios"].as_array().expect("scenarios") {
        assert_eq!(s["same_report"], false, "{s}");
    }

    let missing = std::process::Command::new(env!("CARGO_BIN_EXE_wb"))
        .args(["bench", "sim-speed", "--scenarios"])
        .arg(&dir)
        .args(["--baseline", "/nonexistent/wb"])
        .output()
        .expect("run wb bench sim-speed");
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&missing.stderr)
            .contains("--baseline /nonexistent/wb: no such file"),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
