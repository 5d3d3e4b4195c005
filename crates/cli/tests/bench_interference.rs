//! `wb bench interference` in a short run: the kernel configurations added
//! for issue 12 (RWF_DONTCACHE by our own writer, kyber, bfq), the best
//! kernel configuration per figure, a --sweep point as a row of its own,
//! and the machine left as it was.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

const KERNEL: [&str; 4] = ["kernel", "kernel-dontcache", "kernel-kyber", "kernel-bfq"];

/// The `scheduler` file of the block device under `dir` (a partition's
/// is its disk's).
fn scheduler_file(dir: &Path) -> Option<PathBuf> {
    let dev = std::fs::metadata(dir).ok()?.dev();
    let node = std::fs::canonicalize(format!(
        "/sys/dev/block/{}:{}",
        libc::major(dev),
        libc::minor(dev)
    ))
    .ok()?;
    let parent = node.parent().map(Path::to_path_buf);
    std::iter::once(node)
        .chain(parent)
        .map(|base| base.join("queue/scheduler"))
        .find(|f| f.is_file())
}

/// Why `dir` cannot host this test, if it cannot.
fn unusable(dir: &Path) -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("changing vm.dirty_bytes and block schedulers needs root".into());
    }
    if Command::new("fio").arg("--version").output().is_err() {
        return Some("fio is not installed (scripts/setup.sh installs it)".into());
    }
    if !writeback::io::supports_direct(dir) {
        return Some(format!("{} does not support O_DIRECT", dir.display()));
    }
    let Some(file) = scheduler_file(dir) else {
        return Some(format!("{} has no block queue in sysfs", dir.display()));
    };
    let offered = std::fs::read_to_string(&file).unwrap_or_default();
    for name in ["kyber", "bfq"] {
        if !offered
            .split_whitespace()
            .any(|w| w.trim_matches(['[', ']']) == name)
        {
            return Some(format!("{} does not offer {name}", file.display()));
        }
    }
    common::dontcache_refused(dir)
}

fn knobs(dir: &Path) -> Vec<String> {
    let mut v = common::dirty_knobs();
    if let Some(file) = scheduler_file(dir) {
        v.push(std::fs::read_to_string(&file).unwrap_or_default());
        v.push(std::fs::read_to_string(file.with_file_name("wbt_lat_usec")).unwrap_or_default());
    }
    v
}

#[test]
fn interference_runs_the_new_kernel_configs_and_names_the_best_kernel() {
    let base =
        PathBuf::from("/var/tmp").join(format!("wb-cli-interference-{}", std::process::id()));
    let dir = base.join("bench");
    std::fs::create_dir_all(&dir).expect("create the bench directory");
    if let Some(why) = unusable(&dir) {
        let _ = std::fs::remove_dir_all(&base);
        wb_testkit::skip(&why);
        return;
    }
    let before = knobs(Path::new("/var/tmp"));
    let data_dir = base.join("wb-data");
    let args = [
        "interference",
        "--configs",
        "floor,kernel,kernel-dontcache,kernel-kyber,kernel-bfq,engine",
        "--writer-size",
        "256MiB",
        "--reader-size",
        "64MiB",
        "--seconds",
        "1",
        "--repeat",
        "1",
        "--sweep",
        "wbt_lat_usec=4000",
    ];
    let out = common::wb_bench_json(&args, &dir, &data_dir);
    let left = common::files_in(&dir);
    let _ = std::fs::remove_dir_all(&base);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stderr: {stderr}");
    assert!(left.is_empty(), "files left: {left:?}");
    assert_eq!(
        knobs(Path::new("/var/tmp")),
        before,
        "dirty limits or scheduler not restored"
    );
    assert!(!stderr.contains("left out"), "{stderr}");

    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON object");
    let configs = v["configs"].as_array().expect("configs is an array");
    let names: Vec<_> = configs.iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "floor",
            "kernel",
            "kernel-dontcache",
            "kernel-kyber",
            "kernel-bfq",
            "engine",
            "engine[wbt_lat_usec=4000]"
        ],
        "{v}"
    );
    let point = &configs[6];
    assert_eq!(
        (&point["config"], &point["knob"], &point["value"]),
        (
            &serde_json::json!("engine"),
            &serde_json::json!("wbt_lat_usec"),
            &serde_json::json!("4000")
        ),
        "{point}"
    );
    let figure = |c: &serde_json::Value, key: &str| {
        if key == "writer_mib_s" {
            c["writer"]["mib_s"].as_f64()
        } else {
            c["reader"][key].as_f64()
        }
    };
    for c in configs {
        for key in ["p50_us", "p99_us", "p99_9_us", "max_us", "iops"] {
            let x = figure(c, key).unwrap_or(f64::NAN);
            assert!(x.is_finite() && x > 0.0, "{key} {x} in {c}");
        }
        if c["name"] != "floor" {
            let w = figure(c, "writer_mib_s").unwrap_or(f64::NAN);
            assert!(w.is_finite() && w > 0.0, "writer {w} in {c}");
        }
    }
    let best = &v["best_kernel"];
    for (key, lower) in [
        ("p50_us", true),
        ("p99_us", true),
        ("p99_9_us", true),
        ("max_us", true),
        ("iops", false),
        ("writer_mib_s", false),
    ] {
        let name = best[key]["config"].as_str().expect("a config name");
        assert!(KERNEL.contains(&name), "{key}: {name}");
        let value = best[key]["value"].as_f64().expect("a value");
        let values: Vec<f64> = configs
            .iter()
            .filter(|c| KERNEL.iter().any(|k| c["name"] == *k))
            .filter_map(|c| figure(c, key))
            .collect();
        assert_eq!(values.len(), 4, "{key} in {v}");
        let want = if lower {
            values.iter().copied().fold(f64::INFINITY, f64::min)
        } else {
            values.iter().copied().fold(0.0, f64::max)
        };
        assert_eq!(value, want, "{key} in {v}");
        let chosen = configs.iter().find(|c| c["name"] == name).expect("listed");
        assert_eq!(figure(chosen, key), Some(value), "{key} in {v}");
    }
}
