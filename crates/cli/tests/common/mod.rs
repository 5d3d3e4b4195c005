//! Helpers shared by the `wb` integration tests.
#![allow(dead_code)]

pub mod mount;

use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the `wb` binary with `args` from the crate's directory.
pub fn wb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wb"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("wb runs")
}

/// Runs `wb bench ARGS --json --dir DIR --data-dir DATA_DIR`.
pub fn wb_bench_json(args: &[&str], dir: &Path, data_dir: &Path) -> Output {
    let mut all = vec!["bench"];
    all.extend_from_slice(args);
    all.extend([
        "--json",
        "--dir",
        dir.to_str().expect("UTF-8 path"),
        "--data-dir",
        data_dir.to_str().expect("UTF-8 path"),
    ]);
    wb(&all)
}

/// The names of the files in `dir` (a bench must leave none behind).
pub fn files_in(dir: &Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(dir)
        .expect("read the bench directory")
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect()
}

/// Why RWF_DONTCACHE writes fail in `dir`, if they do (one 4 KiB probe
/// write to a file made and removed here).
pub fn dontcache_refused(dir: &Path) -> Option<String> {
    let probe = dir.join("dontcache-probe");
    let file = std::fs::File::create(&probe).expect("create the probe file");
    let buf = [0u8; 4096];
    let iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: the iovec describes `buf`, alive for the call and only read by
    // the kernel; one iovec is passed and counted; the fd is open.
    let n = unsafe { libc::pwritev2(file.as_raw_fd(), &iov, 1, 0, libc::RWF_DONTCACHE) };
    let err = std::io::Error::last_os_error();
    drop(file);
    let _ = std::fs::remove_file(&probe);
    (n < 0).then(|| format!("RWF_DONTCACHE writes fail in {}: {err}", dir.display()))
}

/// The kernel's dirty-limit knobs as read now, to check a bench put them back.
pub fn dirty_knobs() -> Vec<String> {
    [
        "dirty_bytes",
        "dirty_ratio",
        "dirty_background_bytes",
        "dirty_background_ratio",
    ]
    .iter()
    .map(|k| std::fs::read_to_string(format!("/proc/sys/vm/{k}")).unwrap_or_default())
    .collect()
}

/// A fresh base directory for a bench test with `bench` and `wb-data`
/// inside: (base, bench dir, data dir); None (after skipping, with the
/// reason) where the bench directory has no O_DIRECT.
pub fn bench_dirs(name: &str) -> Option<(PathBuf, PathBuf, PathBuf)> {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("wb-cli-bench-{name}-{}", std::process::id()));
    let dir = base.join("bench");
    std::fs::create_dir_all(&dir).expect("create the bench directory");
    if !writeback::io::supports_direct(&dir) {
        let _ = std::fs::remove_dir_all(&base);
        wb_testkit::skip(&format!("{} does not support O_DIRECT", dir.display()));
        return None;
    }
    let data_dir = base.join("wb-data");
    Some((base, dir, data_dir))
}

/// The trace `wb` wrote to `path` with `--trace-events kept`, after
/// checking it was bounded: exactly `kept` events (besides the track
/// names), some dropped, and `wb` said how many on stderr.
pub fn bounded_trace(out: &Output, path: &Path, kept: u64) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).expect("trace written")).expect("JSON");
    assert_eq!(parsed["otherData"]["kept_events"], kept);
    let dropped = parsed["otherData"]["dropped_events"]
        .as_u64()
        .expect("dropped");
    assert!(dropped > 0, "{dropped} dropped");
    let recorded = parsed["traceEvents"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["ph"] != "M")
        .count();
    assert_eq!(recorded as u64, kept);
    let said = format!(
        "the trace kept the last {kept} events, {dropped} earlier ones were dropped (--trace-events)"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&said),
        "{said}"
    );
    parsed
}
