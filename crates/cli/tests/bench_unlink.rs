//! `wb bench unlink` in a short run: its three configurations, their
//! figures, the tree gone afterwards; and its refusals of bad input.

use std::path::Path;

mod common;

/// Why this machine cannot run the bench, if it cannot.
fn unusable(dir: &Path) -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("mounting and dropping the page cache need root".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse is missing".into());
    }
    if !writeback::io::supports_direct(dir) {
        return Some(format!("{} does not support O_DIRECT", dir.display()));
    }
    None
}

#[test]
fn bench_unlink_json_reports_each_configuration_and_removes_its_tree() {
    let base = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("wb-cli-bench-unlink-{}", std::process::id()));
    let dir = base.join("bench");
    std::fs::create_dir_all(&dir).expect("create the bench directory");
    if let Some(reason) = unusable(&dir) {
        let _ = std::fs::remove_dir_all(&base);
        wb_testkit::skip(&reason);
        return;
    }
    let out = common::wb(&[
        "bench",
        "unlink",
        "--dir",
        dir.to_str().expect("UTF-8 path"),
        "--files",
        "1500",
        "--big-files",
        "3",
        "--big-file-size",
        "48MiB",
        "--memory",
        "128MiB",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {err}", out.status);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let configs = v["configs"].as_array().expect("configs is an array");
    let names: Vec<&str> = configs.iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["kernel", "mount", "mount-flush-all"], "{v}");
    for c in configs {
        // 1500 small files and 3 large in 2 directories, then the root.
        assert_eq!(c["unlinks"], 1500 + 3 + 2 + 1, "{c}");
        let lat = |p: &str| c["unlink_us"][p].as_f64().unwrap_or(f64::NAN);
        assert!(lat("p50") > 0.0 && lat("p50") <= lat("p99"), "{c}");
        assert!(
            lat("p99") <= lat("p99_9") && lat("p99_9") <= lat("max"),
            "{c}"
        );
        let big = c["big_file_unlink_max_us"].as_f64().unwrap_or(f64::NAN);
        assert!(big > 0.0 && big <= lat("max"), "{c}");
        let (walk, total) = (c["walk_s"].as_f64(), c["total_s"].as_f64());
        assert!(walk.unwrap_or(f64::NAN) <= total.unwrap_or(f64::NAN), "{c}");
    }
    let left = common::files_in(&dir);
    assert!(left.is_empty(), "files left behind: {left:?}");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn bench_unlink_refuses_bad_arguments() {
    let out = common::wb(&["bench", "unlink", "--files", "0", "--big-files", "0"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--files and --big-files are both 0: nothing to remove"),
        "{err}"
    );
    let out = common::wb(&["bench", "unlink", "--files", "lots"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("'lots' is not a count from 0 to 10000000"),
        "{err}"
    );
    let out = common::wb(&["bench", "unlink", "--big-file-size", "0"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("size must be more than 0"), "{err}");
}
