//! What the mount shows survives an unmount: after a stress of creates,
//! writes, truncations, renames, links, unlinks, mode and time changes
//! from several processes at once, every file's content, size, mode and
//! mtime through a new mount on the same BACKING_DIR equal what the mount
//! showed before the unmount (write-backs and length changes never move
//! an mtime). Root and /dev/fuse are needed (common/mount.rs), and
//! python3 (installed by scripts/setup.sh) for the workers.

mod common;
use common::mount::*;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Worker processes at once, and operations each.
const WORKERS: u32 = 4;
const OPS: u32 = 1500;

/// One worker: random operations on 3 directories x 24 names shared by
/// all workers (so they collide: errors such as a name another just
/// removed are expected and skipped).
const WORKER: &str = r#"
import os, random, sys
root, seed, ops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
def name():
    return os.path.join(root, "d%d" % rng.randrange(3), "n%02d" % rng.randrange(24))
def data(n):
    return bytes(rng.getrandbits(8) for _ in range(n))
for _ in range(ops):
    op = rng.randrange(10)
    a = name()
    try:
        if op <= 2:
            fd = os.open(a, os.O_WRONLY | os.O_CREAT, 0o644)
            os.pwrite(fd, data(rng.randrange(1, 20000)), rng.randrange(0, 30000))
            os.close(fd)
        elif op == 3:
            with open(a, "ab") as f:
                f.write(data(rng.randrange(1, 9000)))
        elif op == 4:
            os.truncate(a, rng.randrange(0, 40000))
        elif op == 5:
            os.rename(a, name())
        elif op == 6:
            os.link(a, name())
        elif op == 7:
            os.unlink(a)
        elif op == 8:
            os.chmod(a, rng.choice([0o600, 0o640, 0o644, 0o664, 0o755]))
        else:
            t = rng.randrange(10**9, 2 * 10**9) * 10**9 + rng.randrange(10**9)
            os.utime(a, ns=(t, t))
    except OSError:
        pass
"#;

/// What the mount shows of every regular file under `dir`: size, mode,
/// mtime (ns) and content.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (u64, u32, i64, Vec<u8>)> {
    let mut out = BTreeMap::new();
    for d in 0..3 {
        let sub = dir.join(format!("d{d}"));
        for e in fs::read_dir(&sub).expect("list").flatten() {
            let path = e.path();
            let meta = fs::symlink_metadata(&path).expect("stat");
            if !meta.is_file() {
                continue;
            }
            let mtime = meta.mtime() * 1_000_000_000 + meta.mtime_nsec();
            let bytes = fs::read(&path).expect("read");
            assert_eq!(bytes.len() as u64, meta.len(), "{}", path.display());
            let rel = path.strip_prefix(dir).expect("under dir").to_path_buf();
            out.insert(rel, (meta.len(), meta.mode(), mtime, bytes));
        }
    }
    out
}

#[test]
fn after_a_multi_process_stress_a_new_mount_shows_what_the_old_one_did() {
    if let Some(reason) = skip_reason(false) {
        wb_testkit::skip(&reason);
        return;
    }
    if Command::new("python3").arg("--version").output().is_err() {
        wb_testkit::skip("python3 is not installed");
        return;
    }
    let _serial = serial();
    let root = TempRoot::new("remount");
    let (backing, mnt) = (root.dir("backing"), root.dir("mnt"));
    let script = root.0.join("worker.py");
    fs::write(&script, WORKER).expect("write the worker");
    // Write-back while the workers run, so that their later changes land
    // over written-back data (and its mtimes).
    let soon = [
        "--set",
        "dirty_expire_centisecs=5",
        "--set",
        "dirty_writeback_centisecs=2",
    ];
    let mount = Mount::start(&backing, &mnt, &soon);
    for d in 0..3 {
        fs::create_dir(mnt.join(format!("d{d}"))).expect("mkdir");
    }
    let workers: Vec<_> = (0..WORKERS)
        .map(|seed| {
            Command::new("python3")
                .arg(&script)
                .arg(&mnt)
                .arg(seed.to_string())
                .arg(OPS.to_string())
                .spawn()
                .expect("start a worker")
        })
        .collect();
    for mut w in workers {
        assert!(w.wait().expect("worker").success(), "a worker failed");
    }
    let before = snapshot(&mnt);
    assert!(
        before.len() >= 20,
        "only {} files after the stress",
        before.len()
    );
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
    let mount = Mount::start(&backing, &mnt, &[]);
    let after = snapshot(&mnt);
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "the same names"
    );
    for (rel, (size, mode, mtime, bytes)) in &before {
        let (size2, mode2, mtime2, bytes2) = &after[rel];
        let name = rel.display();
        assert_eq!((size, mode), (size2, mode2), "{name}: size and mode");
        assert_eq!(mtime, mtime2, "{name}: mtime moved across the unmount");
        assert!(
            bytes == bytes2,
            "{name}: content changed across the unmount"
        );
    }
    eprintln!(
        "{} files: content, size, mode and mtime the same through the new mount",
        before.len()
    );
}

/// An open file whose last name is removed has no links (POSIX, ext4),
/// though the mount keeps it under an orphan name until it is closed; a
/// second name still counts.
#[test]
fn an_open_file_whose_last_name_is_removed_has_no_links() {
    if let Some(reason) = skip_reason(false) {
        wb_testkit::skip(&reason);
        return;
    }
    let _serial = serial();
    let root = TempRoot::new("nlink");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"), &[]);
    let (a, b) = (mount.mnt.join("a"), mount.mnt.join("b"));
    fs::write(&a, b"data").expect("write");
    fs::hard_link(&a, &b).expect("link");
    let open = fs::File::open(&a).expect("open");
    fs::remove_file(&a).expect("remove a");
    assert_eq!(open.metadata().expect("fstat").nlink(), 1, "b is left");
    fs::remove_file(&b).expect("remove b");
    assert_eq!(
        open.metadata().expect("fstat").nlink(),
        0,
        "no name is left"
    );
    drop(open);
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
}
