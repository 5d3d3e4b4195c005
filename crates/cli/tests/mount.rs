//! `wb mount` itself, end to end: the binary started as a child process.
//! Its --help, the paths and knobs it refuses (exit 2), a budget it cannot
//! reserve (exit 1), what it says at the end (the trace written), that a
//! SIGTERM or an `umount` ends it with everything written back, that
//! after a SIGKILL the next `wb mount` removes what the killed one left,
//! and `wb fsx` through a mount.
//!
//! What programs see through a mount (data, names, metadata, the
//! `.writeback` tree, errors, real programs) is tested in
//! crates/fuse/tests, which mount in-process through `wb_fuse::mount`, the
//! function `wb mount` calls.
//!
//! Each test starts `wb mount` on directories under /tmp, waits (bounded)
//! for its "serving" line, and always unmounts and cleans up in a Drop
//! guard, also when it fails (SIGTERM, then `umount -l` as a fallback).
//! The tests need root and /dev/fuse; without them they print why and
//! pass without checking anything, except under CI
//! (`WB_REQUIRE_ALL_TESTS`, set by .ci/run), where that fails. They run
//! one at a time (a lock): they share two cores and one disk.

mod common;
use common::mount::*;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

macro_rules! require {
    ($needs_fio:expr) => {
        if let Some(reason) = skip_reason($needs_fio) {
            wb_testkit::skip(&reason);
            return;
        }
    };
}

// ---------------------------------------------------------------- tests

#[test]
fn help_explains_every_option() {
    let out = Command::new(WB)
        .args(["mount", "--help"])
        .output()
        .expect("run wb");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for word in [
        "BACKING_DIR",
        "MOUNTPOINT",
        "--set",
        "--allow-other",
        "--data-dir",
        "--no-calibrate",
        "--io-backend",
        ".writeback/stats",
        "SIGTERM",
        "wbt_lat_usec",
        "--uring",
        "enable_uring",
    ] {
        assert!(
            text.contains(word),
            "--help does not mention {word}:\n{text}"
        );
    }
}

#[test]
fn refuses_bad_mountpoints_and_knobs() {
    let root = TempRoot::new("refuse");
    let backing = root.dir("backing");
    let mnt = root.dir("mnt");
    fs::write(mnt.join("file"), b"x").expect("write");
    let inside = root.dir("backing/inside");
    let empty = root.dir("empty");
    let cases: [(&Path, &Path, &[&str], &str); 4] = [
        (&backing, &mnt, &[], "not empty"),
        (&backing, &inside, &[], "inside BACKING_DIR"),
        (&backing, &mnt.join("file"), &[], "not a directory"),
        (&backing, &empty, &["--set", "nope=1"], "unknown knob"),
    ];
    for (b, m, extra, msg) in cases {
        let out = Command::new(WB)
            .arg("mount")
            .arg(b)
            .arg(m)
            .args(extra)
            .output()
            .expect("run wb");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{m:?} {extra:?}: {err}");
        assert!(err.contains(msg), "expected '{msg}' in: {err}");
    }
    let out = Command::new(WB)
        .arg("mount")
        .arg(&backing)
        .arg(&empty)
        .args(["--set", "dirty_ratio=150"])
        .output()
        .expect("run wb");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("dirty_ratio"), "{err}");
}

/// `wb mount --trace FILE`: a trace under way when wb ends is written to
/// FILE, and wb says so. (What a trace holds, and `.writeback/trace`:
/// crates/fuse/tests/control.rs.)
#[test]
fn the_trace_under_way_is_written_at_exit_and_said_so() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("trace");
    let trace = root.0.join("mount-trace.json");
    let trace_arg = trace.to_str().unwrap().to_string();
    let mount = Mount::start(
        &root.dir("backing"),
        &root.dir("mnt"),
        &["--trace", &trace_arg],
    );
    let mut data = vec![0u8; 1 << 20];
    pattern(3, &mut data);
    fs::write(mount.mnt.join("g"), &data).expect("write");
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
    assert!(
        err.contains(&format!("trace written to {}", trace.display())),
        "{err}"
    );
    let again: serde_json::Value =
        serde_json::from_slice(&fs::read(&trace).expect("written at exit")).expect("JSON");
    assert!(again["traceEvents"]
        .as_array()
        .is_some_and(|e| !e.is_empty()));
}

/// A writer that fills `path` with `pattern(file_seed + chunk index)`
/// chunks, and counts the bytes of every write(2) that returned.
fn writer(path: PathBuf, seed: u64, acked: Arc<AtomicU64>, stop: Arc<AtomicBool>) {
    const CHUNK: usize = 1 << 20;
    let Ok(mut f) = fs::File::create(&path) else {
        return;
    };
    let mut buf = vec![0u8; CHUNK];
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        pattern(seed + i, &mut buf);
        if f.write_all(&buf).is_err() {
            return;
        }
        acked.fetch_add(CHUNK as u64, Ordering::SeqCst);
        i += 1;
    }
}

#[test]
fn sigterm_during_heavy_writes_loses_nothing() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("sigterm");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &[]);
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let acked = Arc::new(AtomicU64::new(0));
            let path = mount.mnt.join(format!("w{w}"));
            let (a, s) = (Arc::clone(&acked), Arc::clone(&stop));
            let seed = w << 32;
            let handle = std::thread::spawn(move || writer(path, seed, a, s));
            (w, acked, handle)
        })
        .collect();
    // Heavy: wait until a good amount is written and some is still dirty.
    let start = Instant::now();
    while writers
        .iter()
        .map(|(_, a, _)| a.load(Ordering::SeqCst))
        .sum::<u64>()
        < (600 << 20)
        && start.elapsed() < Duration::from_secs(60)
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    let stats = fs::read_to_string(mount.mnt.join(".writeback/stats")).unwrap_or_default();
    let backing = mount.backing.clone();
    let before: Vec<u64> = writers
        .iter()
        .map(|(_, a, _)| a.load(Ordering::SeqCst))
        .collect();
    let (status, err) = mount.stop(); // SIGTERM while the writers write
    stop.store(true, Ordering::Relaxed);
    let mut acked_total = Vec::new();
    for (w, acked, handle) in writers {
        handle.join().expect("writer thread");
        acked_total.push((w, acked.load(Ordering::SeqCst)));
    }
    assert!(status.success(), "{status}: {err}");
    assert!(err.contains("written back"), "{err}");
    eprintln!("stats at the signal:\n{stats}");
    for (w, acked) in acked_total {
        assert!(acked >= before[w as usize]);
        // Every write that returned, before or after the signal, is there.
        let data = fs::read(backing.join(format!("w{w}"))).expect("read back");
        assert!(
            data.len() as u64 >= acked,
            "w{w}: {} bytes, {acked} acknowledged",
            data.len()
        );
        let mut want = vec![0u8; 1 << 20];
        for (i, chunk) in data[..acked as usize].chunks(1 << 20).enumerate() {
            pattern((w << 32) + i as u64, &mut want);
            assert!(chunk == &want[..chunk.len()], "w{w}: chunk {i} differs");
        }
    }
}

#[test]
fn umount_writes_everything_back_and_exits() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("umount");
    let mut mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &[]);
    let mut data = vec![0u8; 64 << 20];
    pattern(42, &mut data);
    fs::write(mount.mnt.join("f"), &data).expect("write");
    run(Command::new("umount").arg(&mount.mnt));
    let mut child = mount.child.take().expect("running");
    let status = wait_bounded(&mut child, EXIT_TIMEOUT).expect("exits after umount");
    let err = mount.drain_stderr();
    assert!(status.success(), "{status}: {err}");
    assert!(
        err.contains("unmounted") && err.contains("written back"),
        "{err}"
    );
    assert!(fs::read(mount.backing.join("f")).expect("read back") == data);
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn sigkill_during_rm_rf_leaves_orphans_the_next_mount_removes() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("orphan-crash");
    let (backing, mnt) = (root.dir("backing"), root.dir("mnt"));
    // The tree to remove, made in the backing directory: small files and
    // a few large ones.
    let doomed = backing.join("doomed");
    fs::create_dir(&doomed).expect("mkdir doomed");
    for i in 0..3000u64 {
        fs::write(doomed.join(format!("s{i:05}")), format!("small {i}")).expect("write");
    }
    let mut big = vec![0u8; 32 << 20];
    for i in 0..4u64 {
        pattern(100 + i, &mut big);
        fs::write(doomed.join(format!("b{i}")), &big).expect("write big");
    }
    let mut mount = Mount::start(&backing, &mnt, &[]);
    // Files kept, written through the mount and synced.
    let mut kept = vec![0u8; 8 << 20];
    for i in 0..4u64 {
        pattern(200 + i, &mut kept);
        let mut f = fs::File::create(mnt.join(format!("kept{i}"))).expect("create kept");
        f.write_all(&kept).expect("write kept");
        f.sync_all().expect("sync kept");
    }
    // A removed file still open keeps its orphan until the close: there
    // is one when the mount dies, whatever the pace of the backlog.
    let held = fs::File::open(mnt.join("doomed/b0")).expect("open b0");
    fs::remove_file(mnt.join("doomed/b0")).expect("remove b0");
    let orphans = backing.join(wb_fuse::ORPHAN_DIR);
    let mut rm = Command::new("rm")
        .arg("-rf")
        .arg(mnt.join("doomed"))
        .stderr(Stdio::null())
        .spawn()
        .expect("rm -rf");
    // Killed once rm has removed a little: with most of the tree left it
    // cannot finish before the kill lands, however late this thread runs
    // (listing a directory of thousands takes a while, and through the
    // mount rm removes a thousand files in well under 100 ms: waiting for
    // a third of the tree to go lost that race once in CI).
    let start = Instant::now();
    while entries(&doomed).len() > 2900 && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut child = mount.child.take().expect("running");
    child.kill().expect("SIGKILL the mount");
    let _ = child.wait();
    let rm_done = rm.try_wait().expect("rm").is_some();
    let _ = rm.wait();
    drop(held);
    drop(mount);
    let left_orphans = entries(&orphans).len();
    let left_doomed = entries(&doomed);
    assert!(left_orphans >= 1, "no orphan at the kill");
    assert!(!rm_done, "rm -rf finished before the kill");
    assert!(left_doomed.len() < 3003, "rm -rf removed nothing");
    let mount = Mount::start(&backing, &mnt, &[]);
    let want = format!("removing {left_orphans} files left in");
    let start = Instant::now();
    while !entries(&orphans).is_empty() && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(entries(&orphans), Vec::<String>::new(), "orphans removed");
    let err = mount.drain_stderr();
    assert!(err.contains(&want), "{err}");
    // What rm removed stays removed; what it did not reach is intact.
    assert_eq!(entries(&mnt.join("doomed")), left_doomed);
    for name in &left_doomed {
        let data = fs::read(mnt.join("doomed").join(name)).expect("read a file rm left");
        match name.strip_prefix('s') {
            Some(i) => assert_eq!(
                data,
                format!("small {}", i.parse::<u64>().unwrap()).as_bytes()
            ),
            None => {
                let i: u64 = name[1..].parse().expect("b<i>");
                pattern(100 + i, &mut big);
                assert!(data == big, "{name} differs");
            }
        }
    }
    for i in 0..4u64 {
        pattern(200 + i, &mut kept);
        let data = fs::read(mnt.join(format!("kept{i}"))).expect("read kept");
        assert!(data == kept, "kept{i} differs after the crash");
    }
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
}

/// Whether `tool` (run with `arg`) cannot run here: then the calling test
/// is skipped, with the reason (a failure under CI).
fn tool_missing(tool: &str, arg: &str) -> bool {
    if Command::new(tool).arg(arg).output().is_ok() {
        return false;
    }
    wb_testkit::skip(&format!(
        "{tool} is not installed (./scripts/setup.sh installs it)"
    ));
    true
}

#[test]
fn fsx_on_the_mount_matches_its_model() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("fsx");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &[]);
    for extra in [&["--seed", "11"][..], &["--seed", "12", "--direct"]] {
        let out = Command::new(WB)
            .args(["fsx", "--ops", "20000"])
            .arg(mount.mnt.join("fsx"))
            .args(extra)
            .output()
            .expect("run wb fsx");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{extra:?}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains(": 0 mismatches"), "{stdout}");
    }
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
}

/// Runs `command` (`wb`, or a wrapper that runs it) with `mount BACKING
/// MNT --no-calibrate --data-dir DATA` and `extra` in `root`, expecting it
/// to end without mounting; its output.
fn mount_failing(mut command: Command, root: &TempRoot, extra: &[&str]) -> std::process::Output {
    command
        .arg("mount")
        .arg(root.dir("backing"))
        .arg(root.dir("mnt"))
        .args(["--no-calibrate", "--data-dir"])
        .arg(root.dir("wb-data"))
        .args(extra)
        .output()
        .expect("run wb mount")
}

/// `--uring on` with FUSE over io_uring switched off in the kernel: exit
/// 1, saying why and how to switch it on, nothing mounted. (The kernel's
/// switch is set off for the test and put back after.)
#[test]
fn uring_on_without_the_kernels_switch_is_a_clear_error() {
    require!(false);
    let _serial = serial();
    let switch = Path::new("/sys/module/fuse/parameters/enable_uring");
    let was = match fs::read_to_string(switch) {
        Ok(v) => v,
        Err(e) => return wb_testkit::skip(&format!("{}: {e}", switch.display())),
    };
    struct Restore<'a>(&'a Path, String);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            let _ = fs::write(self.0, self.1.trim());
        }
    }
    let _restore = Restore(switch, was);
    fs::write(switch, "N").expect("switch FUSE over io_uring off");
    let root = TempRoot::new("nouring");
    let mnt = root.dir("mnt");
    let out = mount_failing(Command::new(WB), &root, &["--uring", "on"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "wb mount: --uring on: FUSE over io_uring is off in this kernel \
         (/sys/module/fuse/parameters/enable_uring is N); \
         as root: echo Y > /sys/module/fuse/parameters/enable_uring"
    );
    assert!(!is_mounted(&mnt), "nothing mounted");
}

#[test]
fn a_budget_the_system_cannot_map_is_a_clear_error() {
    require!(false);
    if tool_missing("prlimit", "--version") {
        return;
    }
    let _serial = serial();
    let root = TempRoot::new("nomem");
    let mnt = root.dir("mnt");
    // 4 GiB of address space for a 16 GiB cache.
    let mut prlimit = Command::new("prlimit");
    prlimit.arg("--as=4294967296").arg(WB);
    let out = mount_failing(prlimit, &root, &["--set", "memory=16GiB"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "wb mount: reserving the cache's memory (16.0GiB): Cannot allocate memory (os error 12)"
    );
    assert!(!is_mounted(&mnt), "nothing mounted");
}
