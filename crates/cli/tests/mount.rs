//! `wb mount` end to end: real tools on a real FUSE mount.
//!
//! Each test starts `wb mount` as a child process on directories under
//! /tmp, waits (bounded) for its "serving" line, and always unmounts and
//! cleans up in a Drop guard, also when it fails (SIGTERM, then `umount -l`
//! as a fallback). The tests need root and /dev/fuse (fio for one test);
//! without them they print why and pass without checking anything, except
//! under CI (`WB_REQUIRE_ALL_TESTS`, set by .ci/run), where that fails.
//! They run one at a time (a lock): they share two cores and one disk.

mod common;
use common::mount::*;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
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

/// Sets `user.writeback.dontcache=1` on `path`: its writes go uncached.
fn tag_dontcache(path: &Path) {
    set_xattr(path, c"user.writeback.dontcache", b"1").expect("setxattr");
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

/// `wb mount --trace FILE`: recorded from the start; `echo 0` writes the
/// trace (a track per calling process, the writer's throttling, the
/// device's writes in flight); `echo 1` starts another, written at unmount.
#[test]
fn the_trace_file_starts_and_stops_and_is_written_at_unmount() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("trace");
    let trace = root.0.join("mount-trace.json");
    let trace_arg = trace.to_str().unwrap().to_string();
    let mount = Mount::start(
        &root.dir("backing"),
        &root.dir("mnt"),
        &[
            "--trace",
            &trace_arg,
            "--set",
            "dirty_bytes=4MiB",
            "--set",
            "dirty_background_bytes=1MiB",
        ],
    );
    let control = mount.mnt.join(".writeback/trace");
    assert_eq!(fs::read_to_string(&control).unwrap(), "1\n");
    let mut data = vec![0u8; 64 << 20];
    pattern(3, &mut data);
    // Written until the writer has been dirty-throttled at least once: a
    // fast disk may keep a 4 MiB limit's writer under its free-run line
    // for a while (CI did once). At most 16 files of 64 MiB.
    for i in 0.. {
        assert!(i < 16, "no dirty-throttle pause in {i} x 64 MiB");
        fs::write(mount.mnt.join(format!("f{i}")), &data).expect("write");
        if stats_value(&mount.mnt, "pause_dirty_throttle_count") > 0 {
            break;
        }
    }
    fs::write(&control, "0").expect("stop the trace");
    assert_eq!(fs::read_to_string(&control).unwrap(), "0\n");
    let parsed: serde_json::Value =
        serde_json::from_slice(&fs::read(&trace).expect("written at 0")).expect("JSON");
    let events = parsed["traceEvents"].as_array().unwrap();
    let pid_track = events
        .iter()
        .find(|e| {
            e["ph"] == "M"
                && e["args"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("pid "))
        })
        .and_then(|e| e["tid"].as_u64())
        .expect("a track for the writing process");
    assert!(events
        .iter()
        .any(|e| e["ph"] == "X" && e["tid"] == pid_track && e["name"] == "dirty_throttle"));
    assert!(events.iter().any(|e| e["ph"] == "C"
        && e["name"]
            .as_str()
            .is_some_and(|n| n.ends_with(".writes_in_flight"))
        && e["args"]["value"].as_u64().is_some_and(|v| v > 0)));
    assert_eq!(
        fs::write(&control, "2").unwrap_err().raw_os_error(),
        Some(libc::EINVAL)
    );
    // The stats have the same pauses as a log2 histogram per domain: the
    // buckets add up to the count.
    let stats = fs::read_to_string(mount.mnt.join(".writeback/stats")).unwrap();
    let value = |l: &str| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<u64>().ok());
    let (count_line, bucket_lines): (Vec<&str>, Vec<&str>) = stats
        .lines()
        .filter(|l| l.starts_with("domain:") && l.contains(".pause_dirty_throttle_"))
        .filter(|l| l.contains("_count ") || l.contains("_lt_") || l.contains("_ge_"))
        .partition(|l| l.contains("_count "));
    let count: u64 = count_line.iter().filter_map(|l| value(l)).sum();
    assert!(count > 0, "{stats}");
    assert_eq!(
        bucket_lines.iter().filter_map(|l| value(l)).sum::<u64>(),
        count,
        "{stats}"
    );
    // Another, left running: the unmount writes it.
    fs::remove_file(&trace).expect("remove the first trace");
    fs::write(&control, "1").expect("start again");
    fs::write(mount.mnt.join("g"), &data[..1 << 20]).expect("write");
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
    assert!(err.contains("trace written to"), "{err}");
    let again: serde_json::Value =
        serde_json::from_slice(&fs::read(&trace).expect("written at unmount")).expect("JSON");
    assert!(again["traceEvents"]
        .as_array()
        .is_some_and(|e| !e.is_empty()));
}

#[test]
fn knob_files_and_stats() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("knobs");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &[]);
    let ctl = mount.mnt.join(".writeback");
    let stats = fs::read_to_string(ctl.join("stats")).expect("read stats");
    for name in [
        "dirty_bytes ",
        "writeback_bytes ",
        "reclaimable_bytes ",
        "dirtied_bytes ",
        "written_bytes ",
    ] {
        assert!(
            stats.lines().any(|l| l.starts_with(name)),
            "no {name} in:\n{stats}"
        );
    }
    assert!(stats.contains("pause_dirty_throttle_count "), "{stats}");
    assert!(stats.contains("pause_dirty_throttle_total_us "), "{stats}");
    // Hidden from the root's listing, reachable by name.
    let names: Vec<_> = fs::read_dir(&mount.mnt)
        .expect("list root")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(!names.iter().any(|n| n == ".writeback"), "{names:?}");
    assert_eq!(
        fs::read_to_string(ctl.join("memory")).expect("memory"),
        "268435456\n"
    );

    let device = fs::read_dir(&ctl)
        .expect("list .writeback")
        .map(|e| e.expect("entry").path())
        .find(|p| p.is_dir())
        .expect("a device directory");
    let knob = device.join("wbt_lat_usec");
    assert_eq!(fs::read_to_string(&knob).expect("read knob"), "-1\n");
    fs::write(&knob, "0\n").expect("valid value");
    assert_eq!(fs::read_to_string(&knob).expect("read knob"), "0\n");
    for bad in ["bogus\n", "-7\n", "1 2\n"] {
        let err = fs::write(&knob, bad).expect_err("invalid value must fail");
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{bad:?}: {err}");
        assert_eq!(
            fs::read_to_string(&knob).expect("read knob"),
            "0\n",
            "changed by {bad:?}"
        );
    }
    let ratio = ctl.join("dirty_ratio");
    fs::write(&ratio, "15").expect("set dirty_ratio");
    assert_eq!(fs::read_to_string(&ratio).expect("read"), "15\n");
    let err = fs::write(&ratio, "101").expect_err("out of range");
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    assert_eq!(fs::read_to_string(&ratio).expect("read"), "15\n");
    // The memory goes down, and back up to what the mount started with,
    // never past it.
    let memory = ctl.join("memory");
    let start: u64 = fs::read_to_string(&memory)
        .expect("read memory")
        .trim()
        .parse()
        .expect("memory in bytes");
    let err = fs::write(&memory, (2 * start).to_string()).expect_err("past the start");
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{err}");
    fs::write(&memory, (start / 2).to_string()).expect("lowered");
    assert_eq!(
        fs::read_to_string(&memory).expect("read"),
        format!("{}\n", start / 2)
    );
    fs::write(&memory, start.to_string()).expect("raised back");
    assert_eq!(
        fs::read_to_string(&memory).expect("read"),
        format!("{start}\n")
    );
    // Nothing reached the backing directory.
    assert!(!mount.backing.join(".writeback").exists());

    // Handles asking for uncached writes are recorded: O_DIRECT, or the
    // user.writeback.dontcache attribute (passed through to BACKING_DIR).
    let open_dontcache = || {
        let stats = fs::read_to_string(ctl.join("stats")).expect("read stats");
        stats
            .lines()
            .find_map(|l| l.strip_prefix("fuse_open_dontcache_files "))
            .and_then(|v| v.parse::<u64>().ok())
            .expect("fuse_open_dontcache_files line")
    };
    let plain = mount.mnt.join("plain");
    let tagged = mount.mnt.join("tagged");
    fs::write(&plain, b"x").expect("write");
    fs::write(&tagged, b"x").expect("write");
    tag_dontcache(&tagged);
    let a = fs::File::open(&plain).expect("open");
    assert_eq!(open_dontcache(), 0);
    let b = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&plain)
        .expect("open O_DIRECT");
    let c = fs::File::open(&tagged).expect("open tagged");
    assert_eq!(open_dontcache(), 2);
    drop((a, b, c));
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
}

/// Runs fio's crc32c verify workload (4 sequential and 4 random writers of
/// 32 MiB each) in `mnt`, with `extra` options; fails on any fio error.
fn fio_verify(state: &Path, mnt: &Path, extra: &[&str]) {
    let out = run(Command::new("fio")
        .current_dir(state)
        .arg(format!("--directory={}", mnt.display()))
        .args([
            "--size=32m",
            "--numjobs=4",
            "--ioengine=psync",
            "--verify=crc32c",
            "--verify_fatal=1",
            "--randrepeat=1",
            "--output-format=json",
        ])
        .args(extra)
        .args([
            "--name=seq",
            "--rw=write",
            "--bs=128k",
            "--name=rand",
            "--rw=randwrite",
            "--bs=16k",
        ]));
    let errors: Vec<_> = out
        .lines()
        .filter(|l| l.trim_start().starts_with("\"error\""))
        .filter(|l| !l.contains(": 0"))
        .map(str::to_string)
        .collect();
    assert!(errors.is_empty(), "fio reported errors: {errors:?}\n{out}");
    assert_eq!(out.matches("\"jobname\"").count(), 8, "{out}");
}

#[test]
fn fio_verify_crc32c() {
    require!(true);
    let _serial = serial();
    let root = TempRoot::new("fio");
    let backing = root.dir("backing");
    let mnt = root.dir("mnt");
    let state = root.dir("fio-state");
    let mount = Mount::start(&backing, &mnt, &[]);
    // Write with fsync every 8 writes, verifying as it goes.
    fio_verify(&state, &mount.mnt, &["--fsync=8"]);
    // O_DIRECT writers write uncached; the data must be as good.
    fio_verify(&state, &mount.mnt, &["--direct=1"]);
    // A verify pass on the same mount (from the cache) ...
    fio_verify(&state, &mount.mnt, &["--verify_only"]);
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
    // ... and one on a new mount: everything came back from BACKING_DIR.
    let mount = Mount::start(&backing, &mnt, &[]);
    fio_verify(&state, &mount.mnt, &["--verify_only"]);
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
}

/// ext4 on zram0, set up by scripts/zram-ext4.sh; taken down on drop.
struct ZramExt4 {
    mnt: PathBuf,
}

const ZRAM_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/zram-ext4.sh");

impl ZramExt4 {
    /// Err with the reason where zram0 cannot be had.
    fn up(mnt: &Path) -> Result<ZramExt4, String> {
        if !Path::new("/sys/block/zram0").exists() {
            return Err("no /sys/block/zram0 (zram module not loaded)".into());
        }
        let out = Command::new(ZRAM_SCRIPT)
            .args(["up", mnt.to_str().expect("UTF-8 path"), "512M"])
            .output()
            .expect("run scripts/zram-ext4.sh");
        match out.status.code() {
            Some(0) => Ok(ZramExt4 {
                mnt: mnt.to_path_buf(),
            }),
            Some(3) => Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
            _ => panic!(
                "scripts/zram-ext4.sh up failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }
}

impl Drop for ZramExt4 {
    fn drop(&mut self) {
        let _ = Command::new(ZRAM_SCRIPT)
            .arg("down")
            .arg(&self.mnt)
            .status();
    }
}

#[test]
fn on_zram_auto_snapshots_and_fio_verifies() {
    require!(true);
    let _serial = serial();
    let root = TempRoot::new("zram");
    let zram = match ZramExt4::up(&root.0.join("zram")) {
        Ok(z) => z,
        Err(reason) => {
            wb_testkit::skip(&reason);
            return;
        }
    };
    let backing = zram.mnt.join("backing");
    fs::create_dir_all(&backing).expect("create the backing directory");
    let mnt = root.dir("mnt");
    let state = root.dir("fio-state");
    let mount = Mount::start(&backing, &mnt, &[]);
    // zram declares stable_writes = 1: auto picks snapshot, and says so.
    assert!(
        mount
            .serving
            .contains("device zram0, stable_writes snapshot (auto)"),
        "{}",
        mount.serving
    );
    let stats = fs::read_to_string(mnt.join(".writeback/stats")).expect("read the stats");
    assert!(
        stats.contains("zram0.stable_writes_snapshot 1\n"),
        "{stats}"
    );
    assert!(stats.contains("zram0.stable_writes_auto 1\n"), "{stats}");
    fio_verify(&state, &mount.mnt, &["--fsync=8"]);
    fio_verify(&state, &mount.mnt, &["--verify_only"]);
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
    let mount = Mount::start(&backing, &mnt, &[]);
    fio_verify(&state, &mount.mnt, &["--verify_only"]);
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
    drop(zram);
}

/// A file of `mib` MiB of `pattern` data at `path`.
fn make_source(path: &Path, mib: u64) {
    let mut f = fs::File::create(path).expect("create source");
    let mut buf = vec![0u8; 1 << 20];
    for i in 0..mib {
        pattern(i, &mut buf);
        f.write_all(&buf).expect("write source");
    }
}

#[test]
fn dd_two_gib_then_cmp() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("dd");
    let source = root.0.join("source");
    make_source(&source, 2048);
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &[]);
    let target = mount.mnt.join("big");
    run(Command::new("dd")
        .arg(format!("if={}", source.display()))
        .arg(format!("of={}", target.display()))
        .args(["bs=1M", "status=none"]));
    assert_eq!(fs::metadata(&target).expect("stat").len(), 2 << 30);
    run(Command::new("cmp").arg(&source).arg(&target));
    let backing = mount.backing.clone();
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
    run(Command::new("cmp").arg(&source).arg(backing.join("big")));
}

/// Writes `values` in turn to their knob files every 100 ms until `stop`;
/// returns how many writes were made.
fn flip_knobs(values: Vec<(PathBuf, String)>, stop: Arc<AtomicBool>) -> u64 {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let (knob, value) = &values[n as usize % values.len()];
        fs::write(knob, value).expect("a valid knob value is accepted");
        n += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    n
}

#[test]
fn knobs_flipped_every_100ms_during_dd_lose_nothing() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("flip");
    let source = root.0.join("source");
    make_source(&source, 2048);
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &[]);
    let device = fs::read_dir(mount.mnt.join(".writeback"))
        .expect("list .writeback")
        .map(|e| e.expect("entry").path())
        .find(|p| p.is_dir())
        .expect("a device directory");
    let stop = Arc::new(AtomicBool::new(false));
    // The memory too: down to a quarter of the mount's and back.
    let memory = mount.mnt.join(".writeback/memory");
    let start: u64 = fs::read_to_string(&memory)
        .expect("read memory")
        .trim()
        .parse()
        .expect("memory in bytes");
    let values: Vec<(PathBuf, String)> = [
        ("wbt_lat_usec", "0".to_string()),
        ("wbt_lat_usec", "-1".to_string()),
        ("memory", (start / 4).to_string()),
        ("wbt_lat_usec", "2000".to_string()),
        ("nr_requests", "2".to_string()),
        ("wbt_lat_usec", "0".to_string()),
        ("memory", start.to_string()),
        ("queue_depth", "1".to_string()),
        ("wbt_lat_usec", "2000".to_string()),
        ("nr_requests", "128".to_string()),
        ("queue_depth", "32".to_string()),
    ]
    .into_iter()
    .map(|(knob, value)| {
        let path = if knob == "memory" {
            memory.clone()
        } else {
            device.join(knob)
        };
        (path, value)
    })
    .collect();
    let flipper = {
        let stop = stop.clone();
        std::thread::spawn(move || flip_knobs(values, stop))
    };
    let target = mount.mnt.join("big");
    run(Command::new("dd")
        .arg(format!("if={}", source.display()))
        .arg(format!("of={}", target.display()))
        .args(["bs=1M", "conv=fsync", "status=none"]));
    stop.store(true, Ordering::Relaxed);
    let flips = flipper.join().expect("knob writer");
    assert!(flips >= 10, "only {flips} knob changes during the dd");
    run(Command::new("cmp").arg(&source).arg(&target));
    let backing = mount.backing.clone();
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
    run(Command::new("cmp").arg(&source).arg(backing.join("big")));
}

/// Everything `stat` shows that must match between two trees.
fn describe(path: &Path, with_mtime: bool) -> String {
    let m = fs::symlink_metadata(path).expect("stat");
    let target = if m.file_type().is_symlink() {
        fs::read_link(path).expect("readlink").display().to_string()
    } else {
        String::new()
    };
    let mtime = if with_mtime {
        format!(" mtime {}.{:09}", m.mtime(), m.mtime_nsec())
    } else {
        String::new()
    };
    format!(
        "mode {:o} size {} nlink {} uid {} gid {}{mtime} link '{target}'",
        m.mode(),
        if m.is_dir() { 0 } else { m.size() },
        if m.is_dir() { 0 } else { m.nlink() },
        m.uid(),
        m.gid(),
    )
}

/// Relative path → description, for every entry under `dir`.
fn tree(dir: &Path, with_mtime: bool) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).expect("read_dir") {
            let p = e.expect("entry").path();
            let rel = p.strip_prefix(dir).expect("under dir").to_path_buf();
            let meta = fs::symlink_metadata(&p).expect("stat");
            if meta.is_dir() {
                stack.push(p.clone());
            }
            out.push((rel, describe(&p, with_mtime)));
        }
    }
    out.sort();
    out
}

fn assert_same_trees(a: &Path, b: &Path) {
    let (ta, tb) = (tree(a, true), tree(b, true));
    let names_a: Vec<_> = ta.iter().map(|(p, _)| p).collect();
    let names_b: Vec<_> = tb.iter().map(|(p, _)| p).collect();
    assert_eq!(names_a, names_b, "different entries in {a:?} and {b:?}");
    for ((p, da), (_, db)) in ta.iter().zip(&tb) {
        assert_eq!(da, db, "{} differs between {a:?} and {b:?}", p.display());
    }
}

#[test]
fn cp_a_tree_then_diff() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("cp");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &[]);
    let copy = mount.mnt.join("crates");
    run(Command::new("cp").arg("-a").arg(&source).arg(&copy));
    run(Command::new("diff").arg("-r").arg(&source).arg(&copy));
    // Sizes, modes, owners, times, links: as cp -a made them.
    assert_same_trees(&source, &copy);
    let backing = mount.backing.clone();
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
    // Written back: the backing copy is the same, times included.
    assert_same_trees(&source, &backing.join("crates"));
    run(Command::new("diff")
        .arg("-r")
        .arg(&source)
        .arg(backing.join("crates")));
}

/// The same operations on a plain directory and on the mount.
fn posix_script(dir: &Path) {
    let p = |rel: &str| dir.join(rel);
    fs::create_dir(p("d")).expect("mkdir");
    fs::write(p("d/a"), b"hello world").expect("write a");
    fs::set_permissions(p("d/a"), fs::Permissions::from_mode(0o640)).expect("chmod");
    fs::hard_link(p("d/a"), p("hard")).expect("link");
    std::os::unix::fs::symlink("d/a", p("sym")).expect("symlink");
    std::os::unix::fs::symlink("/nonexistent/target", p("dangling")).expect("symlink");
    fs::write(p("b"), vec![7u8; 100_000]).expect("write b");
    fs::rename(p("b"), p("d/b2")).expect("rename");
    fs::write(p("victim"), b"old").expect("write victim");
    fs::write(p("new"), b"replacement").expect("write new");
    fs::rename(p("new"), p("victim")).expect("rename over");
    // Appends, truncation, extension, reads past the end.
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(p("d/a"))
        .expect("open append");
    f.write_all(b"!!").expect("append");
    drop(f);
    let f = fs::OpenOptions::new()
        .write(true)
        .open(p("d/b2"))
        .expect("open");
    f.set_len(5000).expect("shrink");
    f.set_len(9000).expect("grow");
    drop(f);
    let mut buf = Vec::new();
    fs::File::open(p("d/b2"))
        .expect("open")
        .read_to_end(&mut buf)
        .expect("read");
    assert_eq!(buf.len(), 9000);
    assert!(buf[..5000].iter().all(|&b| b == 7) && buf[5000..].iter().all(|&b| b == 0));
    // O_TRUNC.
    fs::write(p("trunc"), vec![1u8; 10_000]).expect("write");
    fs::write(p("trunc"), b"short").expect("rewrite with O_TRUNC");
    // Unlinked while open: still readable through the handle.
    fs::write(p("gone"), b"still here").expect("write");
    let mut open = fs::File::open(p("gone")).expect("open");
    fs::remove_file(p("gone")).expect("unlink");
    let mut s = String::new();
    open.read_to_string(&mut s).expect("read unlinked");
    assert_eq!(s, "still here");
    // Times set after writing stick (as cp -a and tar need).
    fs::write(p("timed"), vec![3u8; 50_000]).expect("write");
    let when = std::time::UNIX_EPOCH + Duration::new(1_000_000_000, 123_456_789);
    let f = fs::OpenOptions::new()
        .write(true)
        .open(p("timed"))
        .expect("open");
    f.set_modified(when).expect("set mtime");
    drop(f);
    fs::create_dir(p("empty")).expect("mkdir");
    fs::remove_dir(p("empty")).expect("rmdir");
    let _ = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(p("private"))
        .expect("create 0600");
}

#[test]
fn files_behave_as_on_the_backing_filesystem() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("posix");
    let reference = root.dir("reference");
    posix_script(&reference);
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &[]);
    posix_script(&mount.mnt);
    // mtimes differ between the two runs, except where set explicitly.
    assert_eq!(tree(&mount.mnt, false), tree(&reference, false));
    let timed = |dir: &Path| describe(&dir.join("timed"), true);
    assert_eq!(timed(&mount.mnt), timed(&reference));
    let ino = |p: &Path| fs::metadata(p).expect("stat").ino();
    assert_eq!(
        ino(&mount.mnt.join("hard")),
        ino(&mount.mnt.join("d/a")),
        "hard links share an inode"
    );
    assert_eq!(
        ino(&mount.mnt.join("hard")),
        ino(&mount.backing.join("hard")),
        "st_ino as in BACKING_DIR"
    );
    for name in ["d/a", "d/b2", "victim", "trunc", "timed"] {
        assert_eq!(
            fs::read(mount.mnt.join(name)).expect("read mount"),
            fs::read(reference.join(name)).expect("read reference"),
            "{name}"
        );
    }
    let backing = mount.backing.clone();
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
    assert_eq!(tree(&backing, false), tree(&reference, false));
    assert_eq!(timed(&backing), timed(&reference));
}

#[test]
fn nothing_outside_the_backing_dir_is_reachable() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("escape");
    let backing = root.dir("backing");
    fs::write(root.0.join("secret"), b"outside").expect("write secret");
    std::os::unix::fs::symlink("../secret", backing.join("up")).expect("symlink");
    let abs = root.0.join("secret");
    std::os::unix::fs::symlink(&abs, backing.join("abs")).expect("symlink");
    fs::create_dir(backing.join("d")).expect("mkdir");
    // The mountpoint is one level deeper than the backing dir, so "../secret"
    // resolved next to the mount finds nothing.
    let mount = Mount::start(&backing, &root.dir("m/mnt"), &[]);
    let mnt = &mount.mnt;
    assert_eq!(
        fs::read_link(mnt.join("up")).expect("readlink"),
        Path::new("../secret")
    );
    let err = fs::read(mnt.join("up")).expect_err("must not reach BACKING_DIR/../secret");
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
    let err =
        fs::read(mnt.join("d/../../secret")).expect_err("`..` leaves the mount, not BACKING_DIR");
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
    // Operations on a symlink change the link, never its target.
    let before = fs::metadata(&abs).expect("stat secret");
    std::os::unix::fs::lchown(mnt.join("abs"), Some(1234), Some(1234)).expect("lchown");
    assert_eq!(
        fs::symlink_metadata(backing.join("abs"))
            .expect("lstat")
            .uid(),
        1234
    );
    let after = fs::metadata(&abs).expect("stat secret");
    assert_eq!((before.uid(), before.mode()), (after.uid(), after.mode()));
    // (An absolute link is resolved by the kernel in the caller's own
    // namespace, as on any filesystem; the server never resolves one.)
    let err = fs::create_dir(mnt.join(".writeback/x")).expect_err("control dir is read-only");
    assert!(
        matches!(err.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)),
        "{err}"
    );
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
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

/// dbench's lines that report a failed operation or client. dbench also
/// prints "failed to create barrier semaphore" where SysV semaphores are
/// unavailable and carries on without them: that one is not an error.
fn dbench_errors(out: &str) -> Vec<&str> {
    out.lines()
        .filter(|l| l.contains("ERROR") || l.contains("failed"))
        .filter(|l| !l.contains("failed to create barrier semaphore"))
        .collect()
}

#[test]
fn dbench_error_lines_are_told_from_its_harmless_warning() {
    let out = "failed to create barrier semaphore\n4 clients started\nThroughput 90 MB/sec";
    assert!(dbench_errors(out).is_empty());
    let bad = "(12) ERROR: handle 13402 was not found\nChild failed with status 1";
    assert_eq!(dbench_errors(bad).len(), 2);
}

/// dbench (Debian's package; 4 clients, 60 s) runs to its end on the mount:
/// thousands of creates, renames, unlinks and small writes.
#[test]
fn dbench_completes_on_the_mount() {
    require!(false);
    if tool_missing("dbench", "--help") {
        return;
    }
    let _serial = serial();
    let root = TempRoot::new("dbench");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &[]);
    // dbench's clients wait forever for a main process that failed, so a
    // bound: 60 s of load and its setup and cleanup take far less than 300.
    let out = run(Command::new("timeout")
        .args(["300", "dbench", "-D"])
        .arg(&mount.mnt)
        .args(["-t", "60", "4"]));
    assert!(out.contains("Throughput"), "dbench did not finish:\n{out}");
    let errors = dbench_errors(&out);
    assert!(
        errors.is_empty(),
        "dbench reported errors: {errors:?}\n{out}"
    );
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
}

/// The value of the `name` line of `.writeback/stats`.
fn stat_line(mnt: &Path, name: &str) -> Option<u64> {
    let stats = fs::read_to_string(mnt.join(".writeback/stats")).expect("read stats");
    stats
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

/// The sum over devices of a per-domain stats line, e.g.
/// `domain:root:<device>.dirtied_bytes` for `("root", "dirtied_bytes")`.
fn domain_stat(mnt: &Path, domain: &str, name: &str) -> u64 {
    let stats = fs::read_to_string(mnt.join(".writeback/stats")).expect("read stats");
    let prefix = format!("domain:{domain}:");
    stats
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|l| l.split_once(' '))
        .filter(|(key, _)| key.ends_with(&format!(".{name}")))
        .filter_map(|(_, v)| v.parse::<u64>().ok())
        .sum()
}

#[test]
fn direct_and_tagged_writes_go_uncached_and_leave_the_cache() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("dontcache");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &[]);
    const MIB: u64 = 64;
    let bytes = MIB << 20;
    // dd with O_DIRECT: its handle writes uncached.
    let direct = mount.mnt.join("direct");
    run(Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", direct.display()))
        .args([
            "bs=1M",
            &format!("count={MIB}"),
            "oflag=direct",
            "conv=fsync",
        ]));
    assert!(
        domain_stat(&mount.mnt, "root", "dontcache_kicks") > 0,
        "no uncached writes seen"
    );
    let dropped = domain_stat(&mount.mnt, "root", "dontcache_dropped_bytes");
    assert!(dropped >= bytes * 95 / 100, "dropped {dropped} of {bytes}");
    let cached = stat_line(&mount.mnt, "cached_bytes").expect("cached_bytes");
    assert!(
        cached <= bytes * 5 / 100,
        "cached {cached} after {bytes} uncached"
    );
    // A file carrying user.writeback.dontcache, written by a plain dd.
    let tagged = mount.mnt.join("tagged");
    fs::write(&tagged, b"").expect("create");
    tag_dontcache(&tagged);
    run(Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", tagged.display()))
        .args(["bs=1M", &format!("count={MIB}"), "conv=fsync,notrunc"]));
    let dropped = domain_stat(&mount.mnt, "root", "dontcache_dropped_bytes");
    assert!(
        dropped >= 2 * bytes * 95 / 100,
        "dropped {dropped} of {}",
        2 * bytes
    );
    let cached = stat_line(&mount.mnt, "cached_bytes").expect("cached_bytes");
    assert!(
        cached <= bytes * 2 * 5 / 100,
        "cached {cached} after {} uncached",
        2 * bytes
    );
    // A plain file stays cached, for contrast.
    let plain = mount.mnt.join("plain");
    run(Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", plain.display()))
        .args(["bs=1M", "count=16", "conv=fsync"]));
    let cached_after = stat_line(&mount.mnt, "cached_bytes").expect("cached_bytes");
    assert!(
        cached_after >= cached + (16 << 20),
        "{cached_after} vs {cached}"
    );
    assert_eq!(fs::metadata(&direct).expect("stat").len(), bytes);
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
}

/// The cgroup v2 mount point, if there is one.
fn cgroup2_root() -> Option<PathBuf> {
    let mounts = fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[2] == "cgroup2")
        .map(|f| PathBuf::from(f[1]))
}

/// A cgroup removed on drop.
struct TempCgroup(PathBuf);

impl Drop for TempCgroup {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.0);
    }
}

#[test]
fn a_write_is_charged_to_the_writers_cgroup() {
    require!(false);
    let Some(cgroups) = cgroup2_root() else {
        wb_testkit::skip("no cgroup v2 hierarchy is mounted");
        return;
    };
    let _serial = serial();
    let name = format!("wb-test-{}", std::process::id());
    let group = TempCgroup(cgroups.join(&name));
    if let Err(e) = fs::create_dir(&group.0) {
        wb_testkit::skip(&format!("cannot make a cgroup: {e}"));
        return;
    }
    let root = TempRoot::new("cgroup");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &[]);
    let target = mount.mnt.join("charged");
    // The shell moves itself into the cgroup, then becomes dd.
    let script = format!(
        "echo $$ > {}/cgroup.procs && exec dd if=/dev/zero of={} bs=1M count=8 conv=fsync 2>/dev/null",
        group.0.display(),
        target.display()
    );
    run(Command::new("sh").args(["-c", &script]));
    let domain = format!("/{name}");
    assert_eq!(domain_stat(&mount.mnt, &domain, "dirtied_bytes"), 8 << 20);
    assert_eq!(domain_stat(&mount.mnt, &domain, "written_bytes"), 8 << 20);
    // The test process's own write goes to its own (root) domain.
    fs::write(mount.mnt.join("mine"), vec![1u8; 1 << 20]).expect("write");
    assert_eq!(domain_stat(&mount.mnt, &domain, "dirtied_bytes"), 8 << 20);
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
    drop(group);
}

// ------------------------------------------------- removals (orphans.rs)

/// A stats line's value (the line must be there).
fn stats_value(mnt: &Path, name: &str) -> u64 {
    stat_line(mnt, name).unwrap_or_else(|| panic!("no line {name} in .writeback/stats"))
}

/// Files released by the mount's backlogs so far, over its devices.
fn releases_done(mnt: &Path) -> u64 {
    let stats = fs::read_to_string(mnt.join(".writeback/stats")).unwrap_or_default();
    stats
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(name, _)| name.ends_with(".backlog_items_done"))
        .filter_map(|(_, v)| v.parse::<u64>().ok())
        .sum()
}

/// Waits (bounded) until the mount's backlogs have released `want` files;
/// returns how many they released.
fn wait_for_releases(mnt: &Path, want: u64) -> u64 {
    let start = Instant::now();
    let mut done = releases_done(mnt);
    while done < want && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
        done = releases_done(mnt);
    }
    done
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

/// The kernel keeps names, names known not to exist and listings (the
/// server answers OPENDIR with ENOSYS and lists from the backing
/// directory's own cookies): every change made through the mount shows at
/// once, and a listing of many entries, read in many requests, has each
/// exactly once.
#[test]
fn cached_names_and_listings_follow_changes_through_the_mount() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("dircache");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &[]);
    let mnt = &mount.mnt;
    // A missing name, remembered as missing, then created.
    let late = mnt.join("late");
    assert_eq!(
        fs::metadata(&late).unwrap_err().raw_os_error(),
        Some(libc::ENOENT)
    );
    fs::write(&late, "here").expect("create late");
    assert_eq!(fs::read_to_string(&late).unwrap(), "here");
    // A directory of 1500 entries (many readdir requests).
    let dir = mnt.join("d");
    fs::create_dir(&dir).expect("mkdir");
    let names: Vec<String> = (0..1500)
        .map(|i| format!("file-with-a-longer-name-{i:05}"))
        .collect();
    for name in &names {
        fs::write(dir.join(name), name).expect("create");
    }
    assert_eq!(entries(&dir), names, "each entry once");
    assert_eq!(entries(&dir), names, "again, from the kernel's cache");
    // Removed, renamed and added through the mount: the next listing shows it.
    for name in &names[..500] {
        fs::remove_file(dir.join(name)).expect("remove");
    }
    fs::rename(dir.join(&names[500]), dir.join("renamed")).expect("rename");
    fs::create_dir(dir.join("sub")).expect("mkdir sub");
    let mut want: Vec<String> = names[501..].to_vec();
    want.extend(["renamed".to_string(), "sub".to_string()]);
    want.sort();
    assert_eq!(entries(&dir), want);
    assert!(!dir.join(&names[0]).exists());
    assert_eq!(fs::read_to_string(dir.join("renamed")).unwrap(), names[500]);
    // The names are there in the backing directory too, with the data.
    assert_eq!(entries(&mount.backing.join("d")), want);
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
}

/// With `--shared-backing`, a file another program makes in the backing
/// directory shows through the mount within the 1 s the kernel may keep
/// what it knows (polled for up to 5 s: a loaded machine).
#[test]
fn with_a_shared_backing_directory_outside_changes_show_within_a_second() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("shared-backing");
    let mount = Mount::start(
        &root.dir("backing"),
        &root.dir("mnt"),
        &["--shared-backing"],
    );
    let (mnt, backing) = (&mount.mnt, &mount.backing);
    assert_eq!(entries(mnt), Vec::<String>::new());
    assert!(!mnt.join("outside").exists());
    fs::write(backing.join("outside"), "made outside").expect("write in the backing dir");
    let start = std::time::Instant::now();
    while !(mnt.join("outside").exists() && entries(mnt) == ["outside"]) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "a file made in the backing directory did not show through the mount"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        fs::read_to_string(mnt.join("outside")).unwrap(),
        "made outside"
    );
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
}

#[test]
fn removed_files_leave_through_a_hidden_orphan_directory() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("orphans");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &[]);
    let (mnt, backing) = (&mount.mnt, &mount.backing);
    let orphans = backing.join(wb_fuse::ORPHAN_DIR);
    assert!(orphans.is_dir(), "the mount makes its orphan directory");
    // Never visible through the mount, and its name cannot be taken.
    assert!(!entries(mnt).contains(&wb_fuse::ORPHAN_DIR.to_string()));
    let hidden = mnt.join(wb_fuse::ORPHAN_DIR);
    assert_eq!(
        fs::metadata(&hidden).unwrap_err().raw_os_error(),
        Some(libc::ENOENT)
    );
    assert_eq!(
        fs::create_dir(&hidden).unwrap_err().raw_os_error(),
        Some(libc::EPERM)
    );
    assert_eq!(
        fs::write(&hidden, b"x").unwrap_err().raw_os_error(),
        Some(libc::EPERM)
    );
    let mut big = vec![0u8; 40 << 20];
    pattern(11, &mut big);
    fs::write(mnt.join("big"), &big).expect("write big");
    for (name, text) in [("small", "small"), ("old", "old"), ("new", "new")] {
        fs::write(mnt.join(name), text).expect("write");
    }
    fs::write(mnt.join("held"), "held").expect("write held");
    fs::write(mnt.join("linked"), "linked").expect("write linked");
    fs::hard_link(mnt.join("linked"), mnt.join("link2")).expect("link");
    let mut held = fs::File::open(mnt.join("held")).expect("open held");
    let released_before = releases_done(mnt);
    for name in ["big", "small", "held", "linked"] {
        fs::remove_file(mnt.join(name)).expect("remove");
    }
    fs::rename(mnt.join("new"), mnt.join("old")).expect("rename over");
    // The names are gone at once, through the mount and in the backing directory.
    for name in ["big", "small", "held", "linked", "new"] {
        assert!(!mnt.join(name).exists(), "{name} through the mount");
        assert!(!backing.join(name).exists(), "{name} in the backing dir");
    }
    assert_eq!(fs::read_to_string(mnt.join("old")).unwrap(), "new");
    assert_eq!(fs::read_to_string(mnt.join("link2")).unwrap(), "linked");
    // big, small and the replaced old are released; held waits for its
    // close, and a name with another left has nothing to release.
    assert!(wait_for_releases(mnt, released_before + 3) >= released_before + 3);
    let mut text = String::new();
    held.read_to_string(&mut text)
        .expect("read the removed file");
    assert_eq!(text, "held", "an open file outlives its name");
    assert_eq!(entries(&orphans).len(), 1, "the held file's orphan stays");
    drop(held);
    assert_eq!(
        wait_for_releases(mnt, released_before + 4),
        released_before + 4
    );
    assert_eq!(entries(&orphans), Vec::<String>::new());
    assert_eq!(entries(backing), [wb_fuse::ORPHAN_DIR, "link2", "old"]);
    assert!(stats_value(mnt, "pause_backlog_max_us") < 1_000_000);
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
    assert!(
        !orphans.exists(),
        "a clean shutdown removes the empty orphan directory"
    );
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

#[test]
fn a_tree_larger_than_the_descriptor_limit_is_written_read_and_removed() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("many-files");
    // 1000 descriptors: 400 for inodes, 400 for backing files.
    let mount = Mount::start_limited(&root.dir("backing"), &root.dir("mnt"), &[], Some(1000));
    let tree = mount.mnt.join("tree");
    for d in 0..6 {
        let dir = tree.join(format!("d{d}"));
        fs::create_dir_all(&dir).expect("mkdir");
        for i in 0..500 {
            fs::write(dir.join(format!("f{i}")), format!("{d}/{i}")).expect("write a file");
        }
    }
    let inodes = stats_value(&mount.mnt, "fuse_inodes");
    assert!(inodes < 600, "{inodes} inodes held with a budget of 400");
    for d in 0..6 {
        for i in 0..500 {
            let path = tree.join(format!("d{d}/f{i}"));
            assert_eq!(
                fs::read_to_string(&path).expect("read back"),
                format!("{d}/{i}")
            );
        }
    }
    run(Command::new("rm").arg("-rf").arg(&tree));
    assert!(!tree.exists());
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
    assert_eq!(entries(&root.0.join("backing")), Vec::<String>::new());
}

// ------------------------------------------- write-back errors per handle

/// Sets the extended attribute `name` of `path` to `value`.
fn set_xattr(path: &Path, name: &std::ffi::CStr, value: &[u8]) -> std::io::Result<()> {
    let path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: path and name are NUL-terminated strings alive for the call;
    // value is a live slice of value.len() bytes, only read.
    let rc = unsafe {
        libc::setxattr(
            path.as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[test]
fn a_write_back_error_reaches_every_handle_once_and_nothing_is_lost() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("wb-errors");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &["--fault-seam"]);
    let path = mount.mnt.join("f");
    let mut data = vec![0u8; 1 << 20];
    pattern(5, &mut data);
    let open_rw = || {
        fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .expect("open")
    };
    let (mut a, b, c) = (open_rw(), open_rw(), open_rw());
    a.write_all(&data).expect("write");
    let arm = |value: &[u8]| set_xattr(&path, c"user.writeback.fail_writes", value);
    assert_eq!(
        arm(b"lots").unwrap_err().raw_os_error(),
        Some(libc::EINVAL),
        "a value that does not parse"
    );
    arm(b"1000 eio").expect("arm the fault seam");
    let eio = |r: std::io::Result<()>| r.err().and_then(|e| e.raw_os_error()) == Some(libc::EIO);
    assert!(eio(a.sync_data()), "the handle that wrote hears of it");
    arm(b"0").expect("disarm");
    // The pages stayed dirty: the next fsync writes them; every other
    // handle still hears of the error, once.
    assert!(eio(b.sync_data()), "a second handle hears of it");
    assert!(eio(c.sync_all()), "a third too");
    a.sync_data().expect("the error was reported to a already");
    b.sync_data().expect("and to b");
    c.sync_all().expect("and to c");
    drop((a, b, c));
    let stats = fs::read_to_string(mount.mnt.join(".writeback/stats")).expect("read stats");
    let write_errors: Vec<u64> = stats
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(name, _)| name.ends_with(".write_errors"))
        .filter_map(|(_, v)| v.parse().ok())
        .collect();
    assert!(
        !write_errors.is_empty() && write_errors.iter().sum::<u64>() > 0,
        "{stats}"
    );
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
    let back = fs::read(root.0.join("backing/f")).expect("read back");
    assert!(back == data, "the data is all there after the errors");
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

/// A shared, writable mapping of a whole file (test helper).
struct Mapping {
    addr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(file: &fs::File, len: usize) -> std::io::Result<Mapping> {
        use std::os::fd::AsRawFd;
        // SAFETY: a new mapping chosen by the kernel (addr NULL), of a file
        // descriptor that is open for this call; the result is checked.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapping {
            addr: addr.cast(),
            len,
        })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `addr` maps `len` bytes for as long as `self` lives; the
        // file is at least `len` long, so every byte is backed.
        unsafe { std::slice::from_raw_parts(self.addr, self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.addr, self.len) }
    }

    fn msync(&self) {
        // SAFETY: the whole mapping, which is live.
        let rc = unsafe { libc::msync(self.addr.cast(), self.len, libc::MS_SYNC) };
        assert_eq!(rc, 0, "msync: {}", std::io::Error::last_os_error());
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped; no reference outlives self.
        unsafe { libc::munmap(self.addr.cast(), self.len) };
    }
}

fn read_at(path: &Path, offset: u64, len: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let f = fs::File::open(path).expect("open for reading");
    let mut buf = vec![0u8; len];
    f.read_exact_at(&mut buf, offset).expect("read");
    buf
}

#[test]
fn mapped_files_stay_coherent_with_reads_and_writes() {
    use std::os::unix::fs::FileExt;
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("mmap");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &[]);
    let path = mount.mnt.join("mapped");
    fs::write(&path, vec![b'a'; 16384]).expect("write");
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .expect("open");
    let mut map = Mapping::new(&file, 16384).expect("mmap of a file on the mount");
    assert!(
        map.bytes().iter().all(|&b| b == b'a'),
        "sees what write() wrote"
    );

    // write() through another descriptor: the mapping sees it.
    let other = fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open");
    other.write_all_at(&[b'b'; 4096], 4096).expect("pwrite");
    assert!(
        map.bytes()[4096..8192].iter().all(|&b| b == b'b'),
        "sees a later write()"
    );

    // Stores through the mapping, synced: read() and the backing file see them.
    map.bytes_mut()[8192..8200].copy_from_slice(b"cccccccc");
    map.msync();
    assert_eq!(read_at(&path, 8192, 8), b"cccccccc");
    assert_eq!(read_at(&mount.backing.join("mapped"), 8192, 8), b"cccccccc");

    // Stores not synced yet: a read() writes the mapped range back first.
    map.bytes_mut()[12288..12296].copy_from_slice(b"dddddddd");
    assert_eq!(read_at(&path, 12288, 8), b"dddddddd");
    drop(map);
    drop(file);
    let backing = mount.backing.clone();
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
    let data = fs::read(backing.join("mapped")).expect("read backing");
    assert_eq!(&data[4096..4100], b"bbbb");
    assert_eq!(&data[8192..8200], b"cccccccc");
    assert_eq!(&data[12288..12296], b"dddddddd");
}

#[test]
fn sqlite_in_wal_mode_runs_on_the_mount() {
    require!(false);
    if tool_missing("sqlite3", "-version") {
        return;
    }
    let _serial = serial();
    let root = TempRoot::new("sqlite");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &[]);
    let db = mount.mnt.join("test.db");
    // WAL mode maps the -shm index; 100,000 inserts in 10 transactions.
    let mut script =
        String::from("PRAGMA journal_mode=WAL;\nCREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);\n");
    for batch in 0..10 {
        script.push_str(&format!(
            "BEGIN;\nWITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 9999) \
             INSERT INTO t(id, v) SELECT {base} + i, hex(randomblob(32)) FROM n;\nCOMMIT;\n",
            base = batch * 10_000
        ));
    }
    script.push_str("SELECT count(*) FROM t;\nPRAGMA integrity_check;\n");
    let mut child = Command::new("sqlite3")
        .arg(&db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sqlite3");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("feed sqlite3");
    let out = child.wait_with_output().expect("sqlite3 ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.is_empty(),
        "{stdout}\n{stderr}"
    );
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["wal", "100000", "ok"],
        "{stdout}"
    );
}

/// The mode bits of `path`, without the file type.
fn mode_of(path: &Path) -> u32 {
    fs::symlink_metadata(path).expect("stat").mode() & 0o7777
}

/// Appends a byte to `path` as uid/gid 65534 (nobody).
fn append_as_nobody(path: &Path) {
    run(Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sh",
            "-c",
        ])
        .arg(format!("printf x >> '{}'", path.display())));
}

/// What a write by another user, a write by root and `chown(f, -1, -1)`
/// do to `dir/NAME`'s mode and change time.
fn privilege_script(dir: &Path) -> Vec<(String, u32)> {
    let mut seen = Vec::new();
    for (name, mode) in [
        ("suid", 0o4777),
        ("sgid", 0o2777),
        ("sgid-nox", 0o2767),
        ("both", 0o6777),
    ] {
        let path = dir.join(name);
        fs::write(&path, b"x").expect("create");
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod");
        append_as_nobody(&path);
        seen.push((format!("{name} after another user's write"), mode_of(&path)));
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod");
        fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(b"y"))
            .expect("root appends");
        seen.push((format!("{name} after root's write"), mode_of(&path)));
    }
    seen
}

#[test]
fn writes_clear_setuid_as_on_the_backing_filesystem() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("privs");
    let direct = root.dir("direct");
    // The control: the backing filesystem itself.
    let expected = privilege_script(&direct);
    assert_eq!(
        expected[0],
        ("suid after another user's write".to_string(), 0o777),
        "the backing filesystem clears setuid on another user's write"
    );
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &["--allow-other"]);
    fs::set_permissions(&mount.mnt, fs::Permissions::from_mode(0o777)).expect("chmod mount root");
    assert_eq!(privilege_script(&mount.mnt), expected);

    // chown(f, -1, -1) marks a change (ctime) and, on Linux, drops setuid
    // even for root: the same on the mount as on the backing filesystem.
    let cases = [(&direct, 0o4755, 0o755), (&direct, 0o644, 0o644)];
    let cases = cases
        .into_iter()
        .chain([(&mount.mnt, 0o4755, 0o755), (&mount.mnt, 0o644, 0o644)]);
    for (dir, mode, expected) in cases {
        let path = dir.join("suid");
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod");
        let before = fs::metadata(&path).expect("stat");
        std::thread::sleep(Duration::from_millis(20));
        nix::unistd::chown(&path, None, None).expect("chown -1 -1");
        let after = fs::metadata(&path).expect("stat");
        assert!(
            (after.ctime(), after.ctime_nsec()) > (before.ctime(), before.ctime_nsec()),
            "{}: ctime {}.{} -> {}.{}",
            path.display(),
            before.ctime(),
            before.ctime_nsec(),
            after.ctime(),
            after.ctime_nsec()
        );
        assert_eq!(after.mode() & 0o7777, expected, "{}", path.display());
    }
}

/// fallocate(2) on `f`: Ok or the errno.
fn fallocate(f: &fs::File, mode: i32, offset: u64, len: u64) -> Result<(), i32> {
    use std::os::fd::AsRawFd;
    // SAFETY: a descriptor `f` keeps open for the call and plain integers.
    let rc = unsafe { libc::fallocate(f.as_raw_fd(), mode, offset as i64, len as i64) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

/// lseek(2) with SEEK_DATA or SEEK_HOLE: the offset or the errno.
fn seek(f: &fs::File, offset: i64, whence: i32) -> Result<i64, i32> {
    use std::os::fd::AsRawFd;
    // SAFETY: as in `fallocate`.
    let pos = unsafe { libc::lseek(f.as_raw_fd(), offset, whence) };
    if pos >= 0 {
        Ok(pos)
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

/// Every fallocate mode, with writes between them (some still dirty when
/// the next fallocate comes), then SEEK_DATA / SEEK_HOLE: what each call
/// returned and what the file holds.
fn fallocate_script(path: &Path) -> (Vec<String>, Vec<u8>) {
    use std::os::unix::fs::FileExt;
    const K: u64 = 1024;
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .expect("open");
    let mut data = vec![0u8; (4 << 20) as usize];
    pattern(7, &mut data);
    f.write_all_at(&data, 0).expect("write 4 MiB");
    let mut seen = Vec::new();
    // The kernel's FUSE client passes on KEEP_SIZE, PUNCH_HOLE and
    // ZERO_RANGE only (fuse_file_fallocate); the library does the others
    // (crates/writeback/tests/space.rs).
    let steps: [(&str, i32, u64, u64); 7] = [
        (
            "punch",
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            64 * K,
            128 * K,
        ),
        (
            "punch unaligned",
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            300 * K + 100,
            5000,
        ),
        ("zero", libc::FALLOC_FL_ZERO_RANGE, 512 * K, 64 * K),
        (
            "zero past the end",
            libc::FALLOC_FL_ZERO_RANGE,
            4096 * K - 8 * K,
            64 * K,
        ),
        ("keep size", libc::FALLOC_FL_KEEP_SIZE, 8192 * K, 64 * K),
        ("extend", 0, 5000 * K, 100 * K),
        (
            "punch without keep size",
            libc::FALLOC_FL_PUNCH_HOLE,
            0,
            4096,
        ),
    ];
    for (i, (name, mode, offset, len)) in steps.into_iter().enumerate() {
        // Dirty data in and around the range, not yet written back.
        let mut piece = vec![0u8; 96 * K as usize];
        pattern(100 + i as u64, &mut piece);
        f.write_all_at(&piece, offset.saturating_sub(16 * K))
            .expect("write");
        seen.push(format!(
            "{name}: {:?}, length {}",
            fallocate(&f, mode, offset, len),
            f.metadata().expect("stat").len()
        ));
    }
    seen.push(format!("data from 0: {:?}", seek(&f, 0, libc::SEEK_DATA)));
    seen.push(format!("hole from 0: {:?}", seek(&f, 0, libc::SEEK_HOLE)));
    seen.push(format!(
        "data past the end: {:?}",
        seek(&f, 1 << 30, libc::SEEK_DATA)
    ));
    let mut content = Vec::new();
    fs::File::open(path)
        .expect("reopen")
        .read_to_end(&mut content)
        .expect("read back");
    (seen, content)
}

#[test]
fn every_fallocate_mode_as_on_the_backing_filesystem() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("fallocate");
    let direct = root.dir("direct").join("f");
    let (expected, expected_content) = fallocate_script(&direct);
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &[]);
    let (seen, content) = fallocate_script(&mount.mnt.join("f"));
    assert_eq!(seen, expected);
    let f = fs::OpenOptions::new()
        .write(true)
        .open(mount.mnt.join("f"))
        .expect("open");
    for mode in [libc::FALLOC_FL_COLLAPSE_RANGE, libc::FALLOC_FL_INSERT_RANGE] {
        assert_eq!(
            fallocate(&f, mode, 0, 4096),
            Err(libc::EOPNOTSUPP),
            "FUSE refuses {mode:#x}"
        );
    }
    drop(f);
    assert!(content == expected_content, "the contents differ");
    let backing = mount.backing.clone();
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
    assert!(fs::read(backing.join("f")).expect("read backing") == expected_content);
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

/// Sets up `dir` as root for [`PERMISSION_SCRIPT`]: a sticky directory
/// with a file of root's, a read-only directory, files of nobody's.
fn permission_setup(dir: &Path) {
    let mode =
        |p: &Path, m: u32| fs::set_permissions(p, fs::Permissions::from_mode(m)).expect("chmod");
    let nobody =
        |p: &Path| nix::unistd::chown(p, Some(65534.into()), Some(65534.into())).expect("chown");
    mode(dir, 0o777);
    let sticky = dir.join("sticky");
    fs::create_dir(&sticky).expect("mkdir");
    mode(&sticky, 0o1777);
    fs::write(sticky.join("rootfile"), b"root").expect("write");
    mode(&sticky.join("rootfile"), 0o666);
    let ro = dir.join("ro");
    fs::create_dir(&ro).expect("mkdir");
    mode(&ro, 0o755);
    fs::write(ro.join("f"), b"read only").expect("write");
    mode(&ro.join("f"), 0o644);
    for (name, m) in [("own", 0o644), ("suid", 0o4755), ("suid2", 0o6775)] {
        let p = dir.join(name);
        fs::write(&p, b"nobody's").expect("write");
        nobody(&p);
        mode(&p, m);
    }
}

/// Run as nobody in the prepared directory: every line says what a
/// command did (its message or "ok") and what the files look like.
const PERMISSION_SCRIPT: &str = r#"
t() { if out=$("$@" 2>&1); then echo "$* -> ok $out"; else echo "$* -> $out"; fi; }
t touch ro/new
t rm -f sticky/rootfile
t mv sticky/rootfile sticky/moved
t sh -c 'echo x > ro/f'
t cat ro/f
t chmod 600 own
t chown 0 own
t chgrp 0 own
t chmod 4755 own
t touch sticky/mine
t mv sticky/mine sticky/mine2
t rm sticky/mine2
t ln ro/f hardlink
t mkdir d
t mkdir d/e
t rmdir d
t rm -r d
t sh -c 'printf x >> suid'
t truncate -s 1 suid2
t ln -s ro/f symlink
t chmod 600 ro/f
t touch -d @0 ro/f
t touch -d @0 own
for f in ro ro/f own suid suid2 sticky sticky/rootfile symlink; do
  echo "$f: $(stat -c '%A %u %g %s' "$f" 2>&1)"
done
"#;

fn permission_run(dir: &Path) -> String {
    permission_setup(dir);
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sh",
            "-c",
        ])
        .arg(format!("cd '{}' && {PERMISSION_SCRIPT}", dir.display()))
        .output()
        .expect("run the script as nobody");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn permissions_for_another_user_as_on_the_backing_filesystem() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("perm");
    let expected = permission_run(&root.dir("direct"));
    assert!(
        expected.contains("touch ro/new -> touch: cannot touch 'ro/new': Permission denied"),
        "{expected}"
    );
    assert!(
        expected.contains("rm -f sticky/rootfile -> rm: cannot remove"),
        "the sticky bit: {expected}"
    );
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &["--allow-other"]);
    let seen = permission_run(&mount.mnt);
    assert_eq!(seen, expected);
}

/// Runs `git` with `args` in `dir`; its stdout, or a failure with stderr.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=wb",
            "-c",
            "user.email=wb@example.invalid",
            "-c",
            "gc.auto=0",
        ])
        .args(args)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn git_clone_fsck_and_gc_on_the_mount() {
    require!(false);
    if tool_missing("git", "--version") {
        return;
    }
    let _serial = serial();
    let root = TempRoot::new("git");
    // A repository of 2,000 files in 20 directories, two commits.
    let src = root.dir("src");
    git(&src, &["init", "-q"]);
    for i in 0..2000u64 {
        let dir = src.join(format!("d{:02}", i % 20));
        fs::create_dir_all(&dir).expect("mkdir");
        let mut data = vec![0u8; 512 + (i as usize % 7) * 300];
        pattern(i, &mut data);
        fs::write(dir.join(format!("f{i:04}")), &data).expect("write");
    }
    git(&src, &["add", "-A"]);
    git(&src, &["commit", "-qm", "first"]);
    for i in (0..2000u64).step_by(10) {
        fs::write(
            src.join(format!("d{:02}/f{i:04}", i % 20)),
            format!("changed {i}"),
        )
        .expect("write");
    }
    git(&src, &["commit", "-qam", "second"]);
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &[]);
    let clone = mount.mnt.join("clone");
    let out = Command::new("git")
        .args(["clone", "-q", "--no-hardlinks"])
        .arg(&src)
        .arg(&clone)
        .output()
        .expect("run git clone");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    git(&clone, &["fsck", "--full", "--strict"]);
    git(&clone, &["gc", "-q", "--aggressive"]);
    git(&clone, &["fsck", "--full", "--strict"]);
    assert_eq!(
        git(&clone, &["status", "--porcelain"]),
        "",
        "a clean work tree"
    );
    assert_eq!(
        git(&clone, &["rev-parse", "HEAD"]),
        git(&src, &["rev-parse", "HEAD"])
    );
    for i in [0u64, 7, 1234, 1999] {
        let rel = format!("d{:02}/f{i:04}", i % 20);
        assert!(
            fs::read(src.join(&rel)).expect("read") == fs::read(clone.join(&rel)).expect("read"),
            "{rel} differs"
        );
    }
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
}

/// A tmpfs of `size` mounted on `dir` for a test; unmounted on drop.
struct SmallFs(PathBuf);

impl SmallFs {
    fn mount(dir: PathBuf, size: &str) -> SmallFs {
        fs::create_dir_all(&dir).expect("mkdir");
        run(Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir));
        SmallFs(dir)
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_backing_filesystem_fails_the_write_and_loses_nothing_acknowledged() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("full");
    let small = SmallFs::mount(root.0.join("backing"), "16m");
    let mount = Mount::start(&small.0, &root.dir("mnt"), &[]);
    let mut data = vec![0u8; 1 << 20];
    pattern(5, &mut data);
    let mut f = fs::File::create(mount.mnt.join("big")).expect("create");
    let mut acked = 0u64;
    let err = loop {
        match f.write_all(&data) {
            Ok(()) => acked += data.len() as u64,
            Err(e) => break e,
        }
        assert!(acked <= 64 << 20, "a 16 MiB filesystem takes no 64 MiB");
    };
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    assert!(
        acked >= 8 << 20,
        "most of the filesystem was usable: {acked} bytes"
    );
    drop(f);
    let enospc = stat_line(
        &mount.mnt,
        &format!("{}.enospc_writes", device_of(&mount.mnt)),
    );
    assert!(enospc.is_some_and(|n| n >= 1), "{enospc:?}");
    let backing = mount.backing.clone();
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
    assert!(!err.contains("writing back failed"), "{err}");
    // Every byte write() acknowledged is in the backing file.
    let on_disk = fs::read(backing.join("big")).expect("read backing");
    assert!(on_disk.len() as u64 >= acked, "{} < {acked}", on_disk.len());
    for chunk in on_disk[..acked as usize].chunks(1 << 20) {
        assert!(chunk == &data[..chunk.len()], "acknowledged data intact");
    }
    drop(small);
}

/// The name of the mount's one device in `.writeback`.
fn device_of(mnt: &Path) -> String {
    fs::read_dir(mnt.join(".writeback"))
        .expect("list .writeback")
        .map(|e| e.expect("entry").path())
        .find(|p| p.is_dir())
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .expect("a device directory")
}

/// Exit code of `cmd` (a test helper for commands expected to fail).
fn exit_code(cmd: &mut Command) -> Option<i32> {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run the command")
        .code()
}

#[test]
fn flock_and_posix_locks_hold_across_processes() {
    use std::os::fd::AsRawFd;
    require!(false);
    if tool_missing("flock", "--version") || tool_missing("python3", "--version") {
        return;
    }
    let _serial = serial();
    let root = TempRoot::new("locks");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &[]);
    let path = mount.mnt.join("locked");
    fs::write(&path, vec![0u8; 4096]).expect("write");
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .expect("open");
    let try_flock = || {
        exit_code(
            Command::new("flock")
                .args(["-n", "-x"])
                .arg(&path)
                .arg("true"),
        )
    };
    // SAFETY: flock(2) on a descriptor `f` keeps open.
    assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) }, 0);
    assert_eq!(
        try_flock(),
        Some(1),
        "another process cannot take the flock"
    );
    // SAFETY: as above.
    assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_UN) }, 0);
    assert_eq!(try_flock(), Some(0), "once released it can");

    // A POSIX write lock on bytes 0..100.
    // SAFETY: a zeroed `flock` struct is valid; fcntl reads it only.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as i16;
    lock.l_whence = libc::SEEK_SET as i16;
    lock.l_start = 0;
    lock.l_len = 100;
    // SAFETY: F_SETLK with a pointer to a live, initialised struct.
    assert_eq!(
        unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLK, &lock) },
        0
    );
    let try_lockf = |start: u64| {
        exit_code(
            Command::new("python3")
                .arg("-c")
                .arg(format!(
                    "import fcntl, sys\n\
             f = open(sys.argv[1], 'r+')\n\
             try:\n    fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB, 50, {start})\n\
             except OSError:\n    sys.exit(1)"
                ))
                .arg(&path),
        )
    };
    assert_eq!(try_lockf(10), Some(1), "the locked range is refused");
    assert_eq!(try_lockf(200), Some(0), "another range is free");
    drop(f);
    assert_eq!(try_lockf(10), Some(0), "closing released the lock");
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
    let out = Command::new("prlimit")
        .arg("--as=4294967296")
        .arg(WB)
        .arg("mount")
        .arg(root.dir("backing"))
        .arg(&mnt)
        .args(["--no-calibrate", "--set", "memory=16GiB", "--data-dir"])
        .arg(root.dir("wb-data"))
        .output()
        .expect("run wb mount");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "wb mount: reserving the cache's memory (16.0GiB): Cannot allocate memory (os error 12)"
    );
    assert!(!is_mounted(&mnt), "nothing mounted");
}

/// Reads attribute `name` of `path` into a buffer of `size` bytes.
fn get_xattr(path: &Path, name: &std::ffi::CStr, size: usize) -> std::io::Result<Vec<u8>> {
    let path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
    let mut buf = vec![0u8; size];
    // SAFETY: path and name are NUL-terminated strings alive for the call;
    // the kernel writes at most buf.len() bytes into buf.
    let n = unsafe {
        libc::getxattr(
            path.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// Extended attributes of a symlink itself (lsetxattr and friends) in
/// `dir`: a transcript of each call's result.
fn symlink_xattr_transcript(dir: &Path) -> Vec<String> {
    use std::os::unix::fs::symlink;
    fs::write(dir.join("target"), "t").expect("target");
    symlink("target", dir.join("link")).expect("symlink");
    let link = std::ffi::CString::new(dir.join("link").into_os_string().into_encoded_bytes())
        .expect("path");
    let errno = |rc: isize| -> String {
        if rc < 0 {
            format!(
                "errno {}",
                std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
            )
        } else {
            format!("ok {rc}")
        }
    };
    let mut out = Vec::new();
    for (name, value) in [
        (c"trusted.wbtest", &b"on the link"[..]),
        (c"user.wbtest", b"u"),
    ] {
        // SAFETY: link and name are NUL-terminated strings alive for the
        // call; value is a live slice, only read.
        let rc = unsafe {
            libc::lsetxattr(
                link.as_ptr(),
                name.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                0,
            )
        };
        out.push(format!("set {name:?}: {}", errno(rc as isize)));
        let mut buf = [0u8; 64];
        // SAFETY: as above; the kernel writes at most buf.len() bytes.
        let n = unsafe {
            libc::lgetxattr(
                link.as_ptr(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        let value = String::from_utf8_lossy(&buf[..n.max(0) as usize]).into_owned();
        out.push(format!("get {name:?}: {} {value:?}", errno(n)));
    }
    let mut list = [0u8; 256];
    // SAFETY: as above.
    let n = unsafe { libc::llistxattr(link.as_ptr(), list.as_mut_ptr().cast(), list.len()) };
    let names = String::from_utf8_lossy(&list[..n.max(0) as usize]).replace('\0', " ");
    out.push(format!("list: {} {names:?}", errno(n)));
    // SAFETY: as above.
    let rc = unsafe { libc::lremovexattr(link.as_ptr(), c"trusted.wbtest".as_ptr()) };
    out.push(format!("remove: {}", errno(rc as isize)));
    // The target's attributes are its own.
    out.push(format!(
        "target: {:?}",
        get_xattr(&dir.join("target"), c"trusted.wbtest", 64).map_err(|e| e.raw_os_error())
    ));
    out
}

/// A symlink's own extended attributes behave through the mount as on the
/// backing filesystem: trusted.* stored, read, listed and removed, user.*
/// refused as Linux refuses it on symlinks.
#[test]
fn symlinks_have_their_own_extended_attributes_as_on_the_backing_filesystem() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("symlink-xattr");
    let plain = root.dir("plain");
    let expected = symlink_xattr_transcript(&plain);
    assert!(
        expected[1].contains("\"on the link\""),
        "the backing filesystem stores trusted.* on a symlink: {expected:?}"
    );
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &[]);
    assert_eq!(symlink_xattr_transcript(&mount.mnt), expected);
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
}

#[test]
fn the_cached_attribute_tells_what_the_cache_holds_of_a_file() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("cached-attr");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &[]);
    let file = mount.mnt.join("f");
    run(Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", file.display()))
        .args(["bs=1M", "count=16", "conv=fsync"]));
    let value = get_xattr(&file, c"user.writeback.cached", 64).expect("getxattr");
    let text = String::from_utf8(value).expect("text");
    let words: Vec<u64> = text
        .split_whitespace()
        .map(|w| w.parse().expect("a number"))
        .collect();
    // Written once and never read: all cached, none active.
    assert_eq!(words, vec![16 << 20, 0], "{text:?}");
    let small = get_xattr(&file, c"user.writeback.cached", 3).unwrap_err();
    assert_eq!(small.raw_os_error(), Some(libc::ERANGE));
    // Not stored on the backing file.
    let backing = root.dir("backing").join("f");
    let missing = get_xattr(&backing, c"user.writeback.cached", 64).unwrap_err();
    assert_eq!(missing.raw_os_error(), Some(libc::ENODATA));
}
