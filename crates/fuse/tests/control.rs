//! The `.writeback` tree of a mount: knob files, stats, the trace file,
//! and what they count of writes through the mount (uncached writes, the
//! writer's cgroup, the `user.writeback.cached` attribute).
//!
//! Each test mounts in this process (common/mod.rs): root and /dev/fuse
//! needed, one test at a time, always unmounted.

#[macro_use]
mod common;
use common::*;
use std::fs;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A mount's `.writeback/trace`: recorded from the start; `echo 0` writes
/// the trace (a track per calling process, the writer's throttling, the
/// device's writes in flight); `echo 1` starts another, written at unmount.
#[test]
fn the_trace_file_starts_and_stops_and_is_written_at_unmount() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("trace");
    let trace = root.0.join("mount-trace.json");
    let mount = Mount::start_with(&root.dir("backing"), &root.dir("mnt"), |o| {
        o.trace = Some(wb_fuse::TraceTarget {
            path: trace.clone(),
            events: wb_trace::DEFAULT_CAPACITY,
        });
        o.knobs.push("dirty_bytes=4MiB".into());
        o.knobs.push("dirty_background_bytes=1MiB".into());
    });
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
    // Another, left running: the unmount writes it (and says so: `wb
    // mount` prints "trace written to" from this; crates/cli/tests/mount.rs).
    fs::remove_file(&trace).expect("remove the first trace");
    fs::write(&control, "1").expect("start again");
    fs::write(mount.mnt.join("g"), &data[..1 << 20]).expect("write");
    let ended = mount.stop_with();
    assert!(ended.written_back.is_ok(), "{:?}", ended.written_back);
    let written = ended
        .trace
        .expect("the trace under way is written at unmount");
    assert_eq!(written.path, trace);
    assert!(written.result.is_ok(), "{:?}", written.result);
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
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"));
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
    stop_ok(mount);
}

/// Writes `values` in turn to their knob files every 100 ms until `stop`;
/// returns how many writes were made.
/// `.writeback/stats` counts the kernel's requests by opcode: each 4 KiB
/// write(2) on a file of the mount is one WRITE (its files are opened
/// direct: the kernel keeps no pages of them), each fsync(2) one FSYNC,
/// each getxattr(2) one GETXATTR; the total is the sum of the opcodes,
/// and a request's time is in its total and bounds its longest.
#[test]
fn requests_are_counted_by_opcode_with_their_time() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("requests");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"));
    let path = mount.mnt.join("f");
    let mut file = fs::File::create(&path).expect("create");
    let before = mount.stats();
    let block = vec![7u8; 4096];
    for _ in 0..20 {
        std::io::Write::write_all(&mut file, &block).expect("write");
    }
    for _ in 0..3 {
        file.sync_all().expect("fsync");
    }
    for _ in 0..5 {
        let _ = get_xattr(&path, c"user.absent", 64);
    }
    let after = mount.stats();
    let delta = |name: &str| {
        let key = format!("fuse_request_{name}_count");
        let (a, b) = (after.get(&key), before.get(&key));
        a.expect(&key) - b.expect(&key)
    };
    assert_eq!(delta("write"), 20);
    assert_eq!(delta("fsync"), 3);
    assert_eq!(delta("getxattr"), 5);
    assert_eq!(delta("mkdir"), 0);
    let sum: u64 = after
        .iter()
        .filter(|(k, _)| k.starts_with("fuse_request_") && k.ends_with("_count"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(after["fuse_requests_count"], sum);
    // INIT came first, and the create, open and lookups of this test.
    assert_eq!(after["fuse_request_init_count"], 1);
    assert!(after["fuse_request_create_count"] >= 1);
    let (total, max) = (
        after["fuse_request_fsync_total_us"],
        after["fuse_request_fsync_max_us"],
    );
    assert!(
        max > 0 && total >= max,
        "fsync total {total} us, max {max} us"
    );
    drop(file);
    stop_ok(mount);
}

/// Requests come over the transport the mount was asked for: all of them
/// but INIT (always over /dev/fuse, before the rings exist) over io_uring
/// with `WB_FUSE_TRANSPORT=uring`, none otherwise.
#[test]
fn requests_come_over_the_transport_asked_for() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("transport");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"));
    let path = mount.mnt.join("f");
    fs::write(&path, vec![1u8; 64 << 10]).expect("write");
    assert_eq!(fs::read(&path).expect("read").len(), 64 << 10);
    let stats = mount.stats();
    let (all, over_uring) = (
        stats["fuse_requests_count"],
        stats["fuse_requests_over_uring_count"],
    );
    match transport() {
        wb_fuse::Uring::On => {
            // INIT came over /dev/fuse; so may the odd request sent before
            // every queue had its entries registered.
            assert!(over_uring > 0, "{over_uring} of {all} over io_uring");
            assert!(all - over_uring <= 3, "{over_uring} of {all} over io_uring");
        }
        _ => assert_eq!(over_uring, 0, "{all} requests"),
    }
    stop_ok(mount);
}

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
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"));
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
    stop_ok(mount);
    run(Command::new("cmp").arg(&source).arg(backing.join("big")));
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
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"));
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
    stop_ok(mount);
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
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"));
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
    stop_ok(mount);
    drop(group);
}

#[test]
fn the_cached_attribute_tells_what_the_cache_holds_of_a_file() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("cached-attr");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"));
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
