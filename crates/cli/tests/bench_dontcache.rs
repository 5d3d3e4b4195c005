//! `wb bench dontcache` as a person runs it: the JSON it promises, what
//! each configuration leaves cached, and exit 2 for bad input.

use std::path::{Path, PathBuf};

mod common;
use common::wb;

const NAMES: [&str; 6] = [
    "kernel-buffered",
    "kernel-dontcache",
    "kernel-direct",
    "engine-buffered",
    "engine-dontcache",
    "engine-dontcache-inline",
];

/// Why `dir` cannot host the benchmark, if it cannot: root (for the dirty
/// limits), O_DIRECT and RWF_DONTCACHE are needed.
fn unusable(dir: &Path) -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("changing vm.dirty_bytes needs root".into());
    }
    if !writeback::io::supports_direct(dir) {
        return Some(format!("{} does not support O_DIRECT", dir.display()));
    }
    common::dontcache_refused(dir)
}

#[test]
fn dontcache_json_has_every_config_and_what_each_leaves_cached() {
    // /var/tmp: a disk filesystem (the test's own tmp dir may be tmpfs,
    // which has no O_DIRECT).
    let base = PathBuf::from("/var/tmp").join(format!("wb-cli-dontcache-{}", std::process::id()));
    let dir = base.join("bench");
    std::fs::create_dir_all(&dir).expect("create the bench directory");
    if let Some(why) = unusable(&dir) {
        let _ = std::fs::remove_dir_all(&base);
        wb_testkit::skip(&why);
        return;
    }
    let knobs_before = common::dirty_knobs();
    let data_dir = base.join("wb-data");
    let args = ["dontcache", "--size", "64MiB", "--repeat", "1"];
    let out = common::wb_bench_json(&args, &dir, &data_dir);
    let left = common::files_in(&dir);
    let _ = std::fs::remove_dir_all(&base);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stderr: {stderr}");
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON object");
    assert!(left.is_empty(), "files left in {}: {left:?}", dir.display());
    assert_eq!(
        common::dirty_knobs(),
        knobs_before,
        "dirty limits not restored"
    );

    assert_eq!(v["size_mib"], 64, "{v}");
    assert_eq!(v["repeat"], 1, "{v}");
    assert!(
        v["dir"].as_str().is_some_and(|d| d.ends_with("bench")),
        "{v}"
    );
    assert!(v["fs"].as_str().is_some_and(|f| !f.is_empty()), "{v}");
    let configs = v["configs"].as_array().expect("configs is an array");
    let names: Vec<_> = configs.iter().map(|c| c["name"].as_str()).collect();
    assert_eq!(names, NAMES.map(Some), "{v}");
    let num = |c: &serde_json::Value, key: &str| c[key].as_f64().unwrap_or(f64::NAN);
    for c in configs {
        let mib_s = num(c, "mib_s");
        assert!(mib_s.is_finite() && mib_s > 0.0, "mib_s {mib_s} in {c}");
        let lat: Vec<f64> = ["p50", "p99", "p99_9", "max"]
            .iter()
            .map(|k| c["lat_us"][k].as_f64().unwrap_or(f64::NAN))
            .collect();
        assert!(lat.iter().all(|x| x.is_finite() && *x > 0.0), "{c}");
        assert!(lat.windows(2).all(|w| w[0] <= w[1]), "unordered: {c}");
        for key in ["dirty_peak_mib", "cached_end_mib"] {
            let x = num(c, key);
            assert!(x.is_finite() && x >= 0.0, "{key} {x} in {c}");
        }
    }
    let cached = |name: &str| {
        let i = NAMES.iter().position(|n| *n == name).expect("a name");
        num(&configs[i], "cached_end_mib")
    };
    // Uncached writes leave (next to) nothing; the 1 GiB cache keeps what
    // it wrote; O_DIRECT never enters the page cache.
    assert!(cached("engine-dontcache") <= 0.05 * 64.0, "{v}");
    assert!(cached("engine-buffered") >= 0.5 * 64.0, "{v}");
    assert!(cached("kernel-direct") <= 1.0, "{v}");
}

#[test]
fn dontcache_bad_input_exits_2_with_a_message() {
    let out = wb(&["bench", "dontcache", "--size", "1MiB"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--size 1048576 (1.0MiB)"), "{stderr}");
    assert!(stderr.contains("64 MiB"), "{stderr}");
    assert!(out.stdout.is_empty());

    let missing = format!("/nonexistent/wb-dontcache-{}", std::process::id());
    for args in [
        &[
            "bench",
            "dontcache",
            "--size",
            "100MiB",
            "--dir",
            "/var/tmp",
            "--size",
            "65537KiB",
        ][..],
        &["bench", "dontcache", "--repeat", "0"],
        &["bench", "dontcache", "--dir", &missing],
    ] {
        let out = wb(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.trim().is_empty() && !stderr.contains("panicked"),
            "{args:?}: {stderr}"
        );
    }
    assert!(!Path::new(&missing).exists());
}
