//! Directories through a mount: names and listings the kernel caches
//! follow every change (and, with a shared backing directory, changes
//! made outside within a second), removed files leave through the hidden
//! orphan directory, and a tree larger than the descriptor limit is
//! written, read and removed.
//!
//! Each test mounts in this process (common/mod.rs): root and /dev/fuse
//! needed, one test at a time, always unmounted.

#[macro_use]
mod common;
use common::*;
use std::fs;
use std::io::Read;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

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
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"));
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
    stop_ok(mount);
}

/// With `--shared-backing`, a file another program makes in the backing
/// directory shows through the mount within the 1 s the kernel may keep
/// what it knows (polled for up to 5 s: a loaded machine).
#[test]
fn with_a_shared_backing_directory_outside_changes_show_within_a_second() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("shared-backing");
    let mount = Mount::start_with(&root.dir("backing"), &root.dir("mnt"), |o| {
        o.backing = wb_fuse::Backing::Shared;
    });
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
    stop_ok(mount);
}

#[test]
fn removed_files_leave_through_a_hidden_orphan_directory() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("orphans");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"));
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
    stop_ok(mount);
    assert!(
        !orphans.exists(),
        "a clean shutdown removes the empty orphan directory"
    );
}

/// The process's soft open-file limit lowered to `n` until dropped (the
/// hard one cannot be raised again without CAP_SYS_RESOURCE, so it stays).
struct FdLimit {
    soft: u64,
    hard: u64,
}

impl FdLimit {
    fn lower(n: u64) -> FdLimit {
        use nix::sys::resource::{getrlimit, setrlimit, Resource};
        let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
        setrlimit(Resource::RLIMIT_NOFILE, n.min(hard), hard).expect("setrlimit");
        FdLimit { soft, hard }
    }
}

impl Drop for FdLimit {
    fn drop(&mut self) {
        use nix::sys::resource::{setrlimit, Resource};
        let _ = setrlimit(Resource::RLIMIT_NOFILE, self.soft, self.hard);
    }
}

#[test]
fn a_tree_larger_than_the_descriptor_limit_is_written_read_and_removed() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("many-files");
    // 1000 descriptors (for the whole process, the test's own few
    // included, as they were for a `wb mount` started with that limit):
    // 35 % each for inodes and backing files (wb_fuse::INODES_PERCENT,
    // BACKING_FILES_PERCENT), the rest for handles, rings and the lag of
    // pruning and eviction behind the requests.
    let _limit = FdLimit::lower(1000);
    let mount = Mount::start_with(&root.dir("backing"), &root.dir("mnt"), |o| {
        o.raise_fd_limit = false;
    });
    let tree = mount.mnt.join("tree");
    for d in 0..6 {
        let dir = tree.join(format!("d{d}"));
        fs::create_dir_all(&dir).expect("mkdir");
        for i in 0..500 {
            fs::write(dir.join(format!("f{i}")), format!("{d}/{i}")).expect("write a file");
        }
    }
    let inodes = stats_value(&mount.mnt, "fuse_inodes");
    let budget = 1000 * wb_fuse::INODES_PERCENT / 100;
    assert!(
        inodes < budget * 3 / 2,
        "{inodes} inodes held with a budget of {budget}"
    );
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
    stop_ok(mount);
    assert_eq!(entries(&root.0.join("backing")), Vec::<String>::new());
}
