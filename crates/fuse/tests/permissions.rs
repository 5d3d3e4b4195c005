//! Permissions through a mount (`allow_other`, checked by the kernel as
//! on the backing filesystem): what another user may do, and the setuid
//! and setgid bits a write or chown clears, compared with the same
//! commands run on the backing filesystem directly.
//!
//! Each test mounts in this process (common/mod.rs): root and /dev/fuse
//! needed, one test at a time, always unmounted.

#[macro_use]
mod common;
use common::*;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

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
    let mount = Mount::start_with(&root.dir("backing"), &root.dir("mnt"), |o| {
        o.allow_other = true;
    });
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
    let mount = Mount::start_with(&root.dir("backing"), &root.dir("mnt"), |o| {
        o.allow_other = true;
    });
    let seen = permission_run(&mount.mnt);
    assert_eq!(seen, expected);
}
