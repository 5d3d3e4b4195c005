//! Names and metadata through a mount behave as on the backing
//! filesystem: a copied tree (sizes, modes, owners, times, links), the
//! POSIX operations of a script run on both, symlinks that never lead out
//! of the backing directory and have extended attributes of their own,
//! flock and POSIX locks between processes.
//!
//! Each test mounts in this process (common/mod.rs): root and /dev/fuse
//! needed, one test at a time, always unmounted.

#[macro_use]
mod common;
use common::*;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

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
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"));
    let copy = mount.mnt.join("crates");
    run(Command::new("cp").arg("-a").arg(&source).arg(&copy));
    run(Command::new("diff").arg("-r").arg(&source).arg(&copy));
    // Sizes, modes, owners, times, links: as cp -a made them.
    assert_same_trees(&source, &copy);
    let backing = mount.backing.clone();
    stop_ok(mount);
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
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"));
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
    stop_ok(mount);
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
    let mount = Mount::start(&backing, &root.dir("m/mnt"));
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
    stop_ok(mount);
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
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"));
    assert_eq!(symlink_xattr_transcript(&mount.mnt), expected);
    stop_ok(mount);
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
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"));
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
