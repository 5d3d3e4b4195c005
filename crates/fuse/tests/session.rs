//! The library call itself: `wb_fuse::mount` refuses bad paths and knobs
//! with errors that say why, a session ends cleanly whether unmounted,
//! dropped or unmounted from outside (everything written back, nothing of
//! it left in the process), and serving leaves the process's umask alone.
//! (`wb mount`'s own messages and exit codes: crates/cli/tests/mount.rs.)
//!
//! Each test that mounts does so in this process (common/mod.rs): root and
//! /dev/fuse needed, one test at a time, always unmounted.

#[macro_use]
mod common;
use common::*;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use wb_fuse::{Event, MountError};

/// The error `wb_fuse::mount` gives for these options (it must fail).
fn refused(options: wb_fuse::MountOptions) -> MountError {
    match wb_fuse::mount(options) {
        Ok(session) => panic!("mounted: {session:?}"),
        Err(e) => e,
    }
}

#[test]
fn bad_paths_and_knobs_are_refused_with_errors_that_say_why() {
    // Checked before anything needs root.
    let _serial = serial();
    let root = TempRoot::new("refuse");
    let backing = root.dir("backing");
    let mnt = root.dir("mnt");
    fs::write(mnt.join("file"), b"x").expect("write");
    let inside = root.dir("backing/inside");
    let empty = root.dir("empty");
    let cases: [(&Path, &Path, &str); 4] = [
        (&backing, &mnt, "not empty"),
        (&backing, &inside, "inside BACKING_DIR"),
        (&backing, &mnt.join("file"), "not a directory"),
        (&root.0.join("nope"), &empty, "BACKING_DIR"),
    ];
    for (b, m, msg) in cases {
        let e = refused(Mount::options(b, m));
        assert!(matches!(e, MountError::Paths(_)), "{e:?}");
        assert!(e.is_bad_input(), "{e:?}");
        assert!(e.to_string().contains(msg), "expected '{msg}' in: {e}");
    }
    let e = refused(Mount::options(&backing, &empty).knob("nope", "1"));
    match &e {
        MountError::Knob { spec, reason } => {
            assert_eq!(spec, "nope=1");
            assert!(reason.contains("unknown knob 'nope'"), "{reason}");
            assert!(reason.contains("dirty_ratio"), "lists the knobs: {reason}");
        }
        e => panic!("{e:?}"),
    }
    assert!(e.is_bad_input());
    let e = refused(Mount::options(&backing, &empty).knob("dirty_ratio", "150"));
    assert!(matches!(e, MountError::Knob { .. }), "{e:?}");
    assert!(e.to_string().contains("dirty_ratio"), "{e}");
    let mut options = Mount::options(&backing, &empty);
    options.knobs.push("no-equals".into());
    let e = refused(options);
    assert_eq!(e.to_string(), "knob no-equals: expected KNOB=VALUE");
    // Nothing was mounted by any of them.
    assert!(!is_mounted(&empty) && !is_mounted(&mnt));
}

#[test]
fn a_backing_directory_without_o_direct_and_a_bad_trace_path_are_refused() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("refuse-root");
    let mnt = root.dir("mnt");
    let e = refused(Mount::options(Path::new("/proc"), &mnt));
    assert!(matches!(e, MountError::NoDirectIo { .. }), "{e:?}");
    assert!(!e.is_bad_input());
    assert_eq!(
        e.to_string(),
        "the filesystem of /proc does not support O_DIRECT (tmpfs?); the engine needs it"
    );
    let trace = root.0.join("missing/trace.json");
    let mut options = Mount::options(&root.dir("backing"), &mnt);
    options.trace = Some(wb_fuse::TraceTarget {
        path: trace.clone(),
        events: 1000,
    });
    let e = refused(options);
    assert!(matches!(e, MountError::TraceFile { .. }), "{e:?}");
    assert!(e.is_bad_input());
    assert!(
        e.to_string()
            .starts_with(&format!("cannot write the trace to {}: ", trace.display())),
        "{e}"
    );
    assert!(!is_mounted(&mnt));
}

/// The names of this process's threads.
fn thread_names() -> Vec<String> {
    fs::read_dir("/proc/self/task")
        .expect("list threads")
        .flatten()
        .filter_map(|t| fs::read_to_string(t.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .collect()
}

/// Threads a mount runs: serving, pruning, writing back at the end.
fn mount_threads() -> Vec<String> {
    thread_names()
        .into_iter()
        .filter(|n| n.starts_with("fuser-") || n.starts_with("wb-fuse") || n == "wb-prune")
        .collect()
}

/// Descriptors of this process open on /dev/fuse.
fn fuse_descriptors() -> usize {
    fs::read_dir("/proc/self/fd")
        .expect("list descriptors")
        .flatten()
        .filter(|fd| fs::read_link(fd.path()).is_ok_and(|t| t == Path::new("/dev/fuse")))
        .count()
}

#[test]
fn an_unmounted_session_leaves_nothing_behind_and_the_data_in_the_backing_directory() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("session-end");
    let (backing, mnt) = (root.dir("backing"), root.dir("mnt"));
    let mount = Mount::start(&backing, &mnt);
    assert_eq!(mount.session().mountpoint(), mnt.as_path());
    assert_eq!(mount.session().backing_dir(), backing.as_path());
    assert!(
        mount.session().description().starts_with(&format!(
            "serving {} at {} (engine: ",
            backing.display(),
            mnt.display()
        )),
        "{}",
        mount.session().description()
    );
    // The serving threads start behind the mount.
    assert!(
        wait_until(Duration::from_secs(5), || mount_threads().len()
            > wb_fuse::SERVE_THREADS),
        "{:?}",
        thread_names()
    );
    assert!(fuse_descriptors() > 0);
    let mut data = vec![0u8; 32 << 20];
    pattern(8, &mut data);
    fs::write(mnt.join("f"), &data).expect("write");
    assert!(mount.stats()["dirty_bytes"] > 0, "some of it still dirty");
    stop_ok(mount);
    assert!(!is_mounted(&mnt));
    assert_eq!(mount_threads(), Vec::<String>::new(), "threads left");
    assert_eq!(fuse_descriptors(), 0, "/dev/fuse descriptors left");
    assert!(fs::read(backing.join("f")).expect("read back") == data);
    assert_eq!(entries(&backing), ["f"], "no orphan directory left");
}

#[test]
fn a_dropped_session_writes_back_and_unmounts_and_the_mountpoint_can_be_used_again() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("session-drop");
    let (backing, mnt) = (root.dir("backing"), root.dir("mnt"));
    let mut data = vec![0u8; 16 << 20];
    pattern(9, &mut data);
    {
        let session = wb_fuse::mount(Mount::options(&backing, &mnt)).expect("mount");
        fs::write(session.mountpoint().join("f"), &data).expect("write");
    }
    assert!(!is_mounted(&mnt), "dropping the session unmounts");
    assert_eq!(mount_threads(), Vec::<String>::new(), "threads left");
    assert!(fs::read(backing.join("f")).expect("read back") == data);
    let mount = Mount::start(&backing, &mnt);
    assert!(fs::read(mnt.join("f")).expect("read again") == data);
    stop_ok(mount);
}

#[test]
fn an_outside_umount_ends_serving_and_the_unmount_then_writes_everything_back() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("session-umount");
    let (backing, mnt) = (root.dir("backing"), root.dir("mnt"));
    let session = wb_fuse::mount(Mount::options(&backing, &mnt)).expect("mount");
    let mut data = vec![0u8; 64 << 20];
    pattern(42, &mut data);
    fs::write(mnt.join("f"), &data).expect("write");
    run(Command::new("umount").arg(&mnt));
    match session.wait() {
        Event::Unmounted(Ok(())) => {}
        other => panic!("{other:?}"),
    }
    let ended = session.unmount_with(|_, _| {});
    assert!(ended.written_back.is_ok(), "{:?}", ended.written_back);
    assert!(ended.serving_ended);
    assert!(ended.trace.is_none());
    assert!(fs::read(backing.join("f")).expect("read back") == data);
    assert_eq!(mount_threads(), Vec::<String>::new(), "threads left");
}

/// Whether fusectl is mounted (/sys/fs/fuse/connections): a connection
/// can then be aborted.
fn fusectl_mounted() -> bool {
    fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(2) == Some("fusectl"))
}

/// A session unmounted while a file is still open on it writes everything
/// back all the same; its serving threads end at once where fusectl can
/// abort the connection, otherwise with the last close.
#[test]
fn a_session_unmounted_with_a_file_open_ends_serving_by_the_last_close() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("session-busy");
    let (backing, mnt) = (root.dir("backing"), root.dir("mnt"));
    let session = wb_fuse::mount(Mount::options(&backing, &mnt)).expect("mount");
    let mut data = vec![0u8; 8 << 20];
    pattern(10, &mut data);
    let mut f = fs::File::create(mnt.join("f")).expect("create");
    f.write_all(&data).expect("write");
    let ended = session.unmount_with(|_, _| {});
    assert!(ended.written_back.is_ok(), "{:?}", ended.written_back);
    assert!(!is_mounted(&mnt), "detached");
    assert!(fs::read(backing.join("f")).expect("read back") == data);
    if fusectl_mounted() {
        assert!(ended.serving_ended, "the connection was aborted");
        assert!(f.write_all(b"x").is_err(), "the open file is cut off");
        assert_eq!(mount_threads(), Vec::<String>::new(), "threads left");
    } else {
        assert!(!ended.serving_ended, "served until the last close");
        assert!(!mount_threads().is_empty());
    }
    drop(f);
    assert!(
        wait_until(Duration::from_secs(10), || mount_threads().is_empty()),
        "threads left after the last close: {:?}",
        mount_threads()
    );
    assert_eq!(fuse_descriptors(), 0, "/dev/fuse descriptors left");
}

/// The process's umask (read by setting it and setting it back).
fn umask() -> u32 {
    use nix::sys::stat::{umask, Mode};
    let old = umask(Mode::empty());
    umask(old);
    old.bits()
}

#[test]
fn serving_leaves_the_process_umask_alone() {
    require!(false);
    let _serial = serial();
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o027));
    let root = TempRoot::new("umask");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"));
    // The kernel applies the caller's umask to the mode asked for, once.
    fs::write(mount.mnt.join("f"), b"x").expect("create");
    fs::create_dir(mount.mnt.join("d")).expect("mkdir");
    let mode = |p: &Path| fs::metadata(p).expect("stat").permissions().mode() & 0o7777;
    assert_eq!(mode(&mount.mnt.join("f")), 0o640);
    assert_eq!(mode(&mount.mnt.join("d")), 0o750);
    assert_eq!(mode(&mount.backing.join("f")), 0o640);
    assert_eq!(umask(), 0o027, "the process's umask is its own");
    stop_ok(mount);
    assert_eq!(umask(), 0o027);
    nix::sys::stat::umask(old);
    assert!(wait_until(Duration::from_secs(1), || mount_threads().is_empty()));
}
