//! Helpers shared by the `wb` integration tests.
#![allow(dead_code)]

use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::process::{Command, Output};

/// Runs the `wb` binary with `args` from the crate's directory.
pub fn wb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wb"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("wb runs")
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
