//! Real programs on a mount: dbench (creates, renames, unlinks and small
//! writes from several clients), sqlite in WAL mode (it maps its index),
//! and git (a clone of 2,000 files, fsck, an aggressive gc).
//!
//! Each test mounts in this process (common/mod.rs): root and /dev/fuse
//! needed, and the program (installed by scripts/setup.sh); one test at a
//! time, always unmounted.

#[macro_use]
mod common;
use common::*;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

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
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"));
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
    stop_ok(mount);
}

#[test]
fn sqlite_in_wal_mode_runs_on_the_mount() {
    require!(false);
    if tool_missing("sqlite3", "-version") {
        return;
    }
    let _serial = serial();
    let root = TempRoot::new("sqlite");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"));
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
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"));
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
    stop_ok(mount);
}
