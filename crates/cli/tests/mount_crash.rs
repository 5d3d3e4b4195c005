//! SIGKILL of `wb mount` at random moments, then BACKING_DIR checked
//! against what the files passed through (DESIGN.md, "What a crash of the
//! mount may lose"):
//!
//! - every file's length and each of its pages is as at some moment since
//!   its last fsync: never longer than it ever was, no byte it never held
//!   (no page-rounded zero tail);
//! - fsynced data is intact;
//! - a name replaced by renaming another file over it holds the old or the
//!   new content, whole;
//! - a new mount on the same BACKING_DIR serves what it holds.
//!
//! The kill lands at a moment drawn from the seed (the seed is printed on
//! failure: `WB_CRASH_SEED=N` runs that one). `WB_CRASH_SEEDS` (default 3)
//! and `WB_CRASH_FILES` (default 300 for `cp -a`) set the size of a run;
//! BENCHMARKS.md has the 20-seed runs. Root and /dev/fuse are needed (see
//! common/mount.rs); CI fails rather than skips without them.

mod common;
use common::mount::*;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PAGE: usize = 4096;
/// Write-back soon and often, so that a kill finds files partly written
/// back: data 20 ms old is written, the flusher looks every 10 ms.
const SOON: [&str; 4] = [
    "--set",
    "dirty_expire_centisecs=2",
    "--set",
    "dirty_writeback_centisecs=1",
];

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The seeds of this run: `WB_CRASH_SEED` alone, or 1..=`WB_CRASH_SEEDS`.
fn seeds() -> Vec<u64> {
    match std::env::var("WB_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(seed) => vec![seed],
        None => (1..=env_or("WB_CRASH_SEEDS", 3)).collect(),
    }
}

fn can_mount() -> bool {
    match skip_reason(false) {
        Some(reason) => {
            wb_testkit::skip(&reason);
            false
        }
        None => true,
    }
}

/// Random bytes of `len`, from `rng`.
fn bytes(rng: &mut SplitMix64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    rng.fill_bytes(&mut v);
    v
}

/// Random bytes of a length that is not a whole number of pages, up to
/// `max`.
fn odd_bytes(rng: &mut SplitMix64, max: u64) -> Vec<u8> {
    let len = odd_len(rng, max);
    bytes(rng, len)
}

/// A length that is not a whole number of pages, up to `max`.
fn odd_len(rng: &mut SplitMix64, max: u64) -> usize {
    let len = 1 + rng.next_u64() % max;
    if len.is_multiple_of(PAGE as u64) {
        len as usize - 1
    } else {
        len as usize
    }
}

/// `path` opened for writing, made if missing, kept as it is.
fn open_or_create(path: &Path) -> std::io::Result<fs::File> {
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

/// SIGKILLs the mount (as an OOM kill or a panic would end it) and waits
/// until it is gone and its mount point detached.
fn kill(mount: &mut Mount) {
    let mut child = mount.child.take().expect("running");
    child.kill().expect("SIGKILL the mount");
    let _ = child.wait();
    let _ = Command::new("umount").arg("-l").arg(&mount.mnt).status();
}

/// What went wrong with one file, for the failure message.
fn why_not_passed_through(found: &[u8], states: &[Vec<u8>]) -> Option<String> {
    let longest = states.iter().map(Vec::len).max().unwrap_or(0);
    let shortest = states.iter().map(Vec::len).min().unwrap_or(0);
    if found.len() > longest {
        return Some(format!(
            "{} bytes, longer than it ever was ({longest})",
            found.len()
        ));
    }
    if found.len() < shortest {
        return Some(format!(
            "{} bytes, shorter than since its last fsync ({shortest})",
            found.len()
        ));
    }
    for (p, page) in found.chunks(PAGE).enumerate() {
        let held = states.iter().any(|s| {
            let at = p * PAGE;
            (0..page.len()).all(|i| s.get(at + i).copied().unwrap_or(0) == page[i])
        });
        if !held {
            let zeros = page.iter().rev().take_while(|&&b| b == 0).count();
            return Some(format!(
                "page {p} ({} bytes, {zeros} trailing zeros) is no state the file held",
                page.len()
            ));
        }
    }
    None
}

/// Every file under `dir`, by path relative to it, with its bytes.
fn files_under(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() {
                if e.file_name() != wb_fuse::ORPHAN_DIR {
                    todo.push(path);
                }
            } else if kind.is_file() {
                let rel = path.strip_prefix(dir).expect("under dir").to_path_buf();
                out.insert(rel, fs::read(&path).expect("read a backing file"));
            }
        }
    }
    out
}

/// A new mount on the same BACKING_DIR serves what it holds: every file
/// reads through it as it reads there.
fn remount_serves(backing: &Path, mnt: &Path, seed: u64) {
    let before = files_under(backing);
    let mount = Mount::start(backing, mnt, &[]);
    for (rel, want) in &before {
        let got = fs::read(mnt.join(rel)).unwrap_or_else(|e| {
            panic!("seed {seed}: {} through the new mount: {e}", rel.display())
        });
        assert!(
            &got == want,
            "seed {seed}: {} reads {} bytes through the new mount, {} in BACKING_DIR",
            rel.display(),
            got.len(),
            want.len()
        );
    }
    let (status, err) = mount.stop();
    assert!(status.success(), "seed {seed}: {status}: {err}");
}

// ------------------------------------------------ random operations

/// One name's model: the contents it held since its last fsync (the
/// first is what the fsync made durable); whether it exists for sure (an
/// operation that made it returned); and, if a file was renamed over it,
/// that file's content, which it must then hold exactly (`replaced`), or
/// may hold exactly if the kill cut the rename (`maybe_replaced`).
#[derive(Default)]
struct NameModel {
    states: Vec<Vec<u8>>,
    exists: bool,
    replaced: Option<Vec<u8>>,
    maybe_replaced: Option<Vec<u8>>,
}

impl NameModel {
    fn current(&self) -> Vec<u8> {
        self.states.last().cloned().unwrap_or_default()
    }

    /// A change the mount may or may not have made when it died.
    fn changed(&mut self, content: Vec<u8>) {
        self.states.push(content);
        // Later writes: the page-wise rule applies again.
        self.replaced = None;
    }
}

/// Creates, appends, overwrites, truncations (shorter, longer, to zero
/// then rewritten), replace-via-rename and fsyncs on a few names through
/// the mount until it dies; each seed's kill lands after 0.5 to 2.5 s.
/// Then every name in BACKING_DIR holds a state it passed through, fsynced
/// data is there, a replaced name holds the old or the new content whole,
/// and a new mount serves it.
#[test]
fn sigkill_at_random_moments_leaves_every_file_in_a_state_it_passed_through() {
    if !can_mount() {
        return;
    }
    let _serial = serial();
    for seed in seeds() {
        random_ops_then_kill(seed);
    }
}

fn random_ops_then_kill(seed: u64) {
    let root = TempRoot::new("crash-ops");
    let (backing, mnt) = (root.dir("backing"), root.dir("mnt"));
    let mut rng = SplitMix64::seed_from_u64(seed);
    let mut mount = Mount::start(&backing, &mnt, &SOON);
    let kill_after = Duration::from_millis(500 + rng.next_u64() % 2000);
    let pid = mount.child.as_ref().expect("running").id();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(kill_after);
        // SAFETY: kill has no memory-safety preconditions; the pid is the
        // mount's, still our unreaped child (reaped only after this join).
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    });
    let names: Vec<String> = (0..12).map(|i| format!("f{i:02}")).collect();
    let mut model: BTreeMap<String, NameModel> = BTreeMap::new();
    let mut ops = 0u64;
    let start = Instant::now();
    // Until an operation fails: the mount is gone.
    while start.elapsed() < Duration::from_secs(30) {
        let name = names[(rng.next_u64() % names.len() as u64) as usize].clone();
        let path = mnt.join(&name);
        let m = model.entry(name.clone()).or_default();
        let cur = m.current();
        let ok = match rng.next_u64() % 8 {
            // Write a range (creating the file, extending it past a hole).
            0 | 1 => {
                let off = (rng.next_u64() % (cur.len() as u64 + 2 * PAGE as u64)) as usize;
                let data = odd_bytes(&mut rng, 20_000);
                let mut next = cur.clone();
                if next.len() < off + data.len() {
                    next.resize(off + data.len(), 0);
                }
                next[off..off + data.len()].copy_from_slice(&data);
                m.changed(next);
                open_or_create(&path)
                    .and_then(|f| f.write_all_at(&data, off as u64))
                    .is_ok()
            }
            // Append.
            2 => {
                let data = odd_bytes(&mut rng, 9_000);
                let mut next = cur.clone();
                next.extend_from_slice(&data);
                m.changed(next);
                fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(&path)
                    .and_then(|mut f| f.write_all(&data))
                    .is_ok()
            }
            // Truncate, shorter or longer.
            3 => {
                let len = (rng.next_u64() % (cur.len() as u64 + 3 * PAGE as u64)) as usize;
                let mut next = cur.clone();
                next.resize(len, 0);
                m.changed(next);
                open_or_create(&path)
                    .and_then(|f| f.set_len(len as u64))
                    .is_ok()
            }
            // Truncate to zero and rewrite (O_TRUNC), then close.
            4 => {
                let data = odd_bytes(&mut rng, 30_000);
                m.changed(Vec::new());
                m.changed(data.clone());
                fs::File::create(&path)
                    .and_then(|mut f| f.write_all(&data))
                    .is_ok()
            }
            // fsync: what it has is durable from now on.
            5 => {
                let result = fs::File::open(&path).and_then(|f| f.sync_all());
                match result {
                    Ok(()) => {
                        m.states = vec![cur];
                        m.replaced = None;
                        true
                    }
                    // Not created yet: nothing to sync.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
                    Err(_) => false,
                }
            }
            // Replace via rename: a new file written (no fsync), renamed
            // over the name.
            _ => {
                let data = odd_bytes(&mut rng, 40_000);
                let tmp = mnt.join(format!("{name}.tmp"));
                let written = fs::File::create(&tmp)
                    .and_then(|mut f| f.write_all(&data))
                    .is_ok();
                if written {
                    // Before the rename: one of its states; after: the new
                    // content, whole. In flight when the mount died: either.
                    let renamed = fs::rename(&tmp, &path).is_ok();
                    if renamed {
                        m.states = vec![data.clone()];
                        m.replaced = Some(data);
                    } else {
                        m.maybe_replaced = Some(data);
                    }
                    renamed
                } else {
                    false
                }
            }
        };
        if !ok {
            break;
        }
        m.exists |= !m.states.is_empty() || path.exists();
        ops += 1;
    }
    killer.join().expect("killer");
    let died_at = start.elapsed();
    kill(&mut mount);
    drop(mount);
    assert!(
        ops >= 10,
        "seed {seed}: only {ops} operations before the kill"
    );
    let found = files_under(&backing);
    let mut checked = 0;
    for (name, m) in &model {
        let Some(bytes) = found.get(Path::new(name)) else {
            // Not made, or made by the operation the kill cut.
            assert!(!m.exists, "seed {seed}: {name} was made, and is gone");
            continue;
        };
        checked += 1;
        // A rename the kill cut may have happened: its file, whole.
        if m.maybe_replaced.as_ref() == Some(bytes) {
            continue;
        }
        if let Some(new) = &m.replaced {
            assert!(
                bytes == new,
                "seed {seed}: {name}, replaced by a rename, holds {} bytes, not the new content ({})",
                bytes.len(),
                new.len()
            );
            continue;
        }
        if let Some(why) = why_not_passed_through(bytes, &m.states) {
            panic!("seed {seed}: {name}: {why} (replay: WB_CRASH_SEED={seed})");
        }
    }
    eprintln!("seed {seed}: killed after {died_at:?}, {ops} operations, {checked} files checked");
    remount_serves(&backing, &mnt, seed);
}

// ------------------------------------------------ cp -a

/// `cp -a` of a tree of files whose sizes are not whole pages, the mount
/// killed while it copies: every file that arrived is a prefix of its
/// source (never longer, no zero tail).
#[test]
fn sigkill_during_cp_a_leaves_no_file_longer_or_with_a_zero_tail() {
    if !can_mount() {
        return;
    }
    let _serial = serial();
    let files = env_or("WB_CRASH_FILES", 300);
    let root = TempRoot::new("crash-cp");
    let src = root.dir("src");
    let mut rng = SplitMix64::seed_from_u64(0xC0FFEE);
    let mut sources = BTreeMap::new();
    for i in 0..files {
        let dir = src.join(format!("d{}", i % 50));
        fs::create_dir_all(&dir).expect("mkdir");
        let data = odd_bytes(&mut rng, 60_000);
        let rel = PathBuf::from(format!("d{}/file{i:05}.dat", i % 50));
        fs::write(src.join(&rel), &data).expect("write a source file");
        sources.insert(rel, data);
    }
    let mut totals = [0u64; 3];
    for seed in seeds() {
        let found = cp_a_then_kill(&root, &src, &sources, seed);
        for (total, n) in totals.iter_mut().zip(found) {
            *total += n;
        }
    }
    eprintln!(
        "cp -a, {} seeds: files found empty {}, partly written back {}, whole {}; \
         0 longer than their source, 0 with bytes it never held",
        seeds().len(),
        totals[0],
        totals[1],
        totals[2]
    );
}

/// Returns the files found in the copy: empty, partly written back, whole.
fn cp_a_then_kill(
    root: &TempRoot,
    src: &Path,
    sources: &BTreeMap<PathBuf, Vec<u8>>,
    seed: u64,
) -> [u64; 3] {
    let backing = root.dir(&format!("backing-{seed}"));
    let mnt = root.dir(&format!("mnt-{seed}"));
    let mut rng = SplitMix64::seed_from_u64(seed);
    let mut mount = Mount::start(&backing, &mnt, &SOON);
    let mut cp: Child = Command::new("cp")
        .arg("-a")
        .arg(src)
        .arg(mnt.join("copy"))
        .stderr(Stdio::null())
        .spawn()
        .expect("cp -a");
    // Killed a while into the copy: after a share of the files arrived.
    let want = 1 + rng.next_u64() % (sources.len() as u64 * 9 / 10).max(1);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(120) {
        let arrived = count_files(&backing.join("copy"));
        if arrived >= want || cp.try_wait().ok().flatten().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    kill(&mut mount);
    let _ = cp.wait();
    drop(mount);
    let found = files_under(&backing.join("copy"));
    let (mut empty, mut partial, mut complete) = (0, 0, 0);
    for (rel, bytes) in &found {
        let source = sources
            .get(rel)
            .unwrap_or_else(|| panic!("seed {seed}: {} was never copied", rel.display()));
        assert!(
            bytes.len() <= source.len(),
            "seed {seed}: {} is {} bytes, its source {}: longer than it ever was",
            rel.display(),
            bytes.len(),
            source.len()
        );
        if bytes[..] != source[..bytes.len()] {
            let bad = bytes
                .iter()
                .zip(source)
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            panic!(
                "seed {seed}: {} differs from its source at byte {bad} of {} (zero tail: {}) \
                 (replay: WB_CRASH_SEED={seed})",
                rel.display(),
                bytes.len(),
                bytes[bad..].iter().all(|&b| b == 0)
            );
        }
        match bytes.len() {
            0 => empty += 1,
            n if n == source.len() => complete += 1,
            _ => partial += 1,
        }
    }
    remount_serves(&backing, &mnt, seed);
    eprintln!(
        "seed {seed}: cp -a killed at {want} files: {} found, {empty} empty, {partial} partly \
         written back, {complete} whole",
        found.len()
    );
    [empty, partial, complete]
}

fn count_files(dir: &Path) -> u64 {
    let Ok(dirs) = fs::read_dir(dir) else {
        return 0;
    };
    dirs.flatten()
        .map(|d| fs::read_dir(d.path()).map_or(0, |f| f.count() as u64))
        .sum()
}

// ------------------------------------------------ replace by rename

/// 200 durable files, each replaced by writing `NAME.tmp` (no fsync) and
/// renaming it over NAME while the mount is killed at a random moment:
/// every name holds its old content or its new one, whole.
#[test]
fn sigkill_during_replace_by_rename_keeps_the_old_or_the_new_content() {
    if !can_mount() {
        return;
    }
    let _serial = serial();
    let mut totals = [0u64; 2];
    for seed in seeds() {
        let [old, new] = replace_then_kill(seed);
        totals[0] += old;
        totals[1] += new;
    }
    eprintln!(
        "replace by rename, {} seeds: {} names old, {} new, 0 neither",
        seeds().len(),
        totals[0],
        totals[1]
    );
}

/// Returns how many names held the old content, and how many the new.
fn replace_then_kill(seed: u64) -> [u64; 2] {
    const NAMES: usize = 200;
    let root = TempRoot::new("crash-rename");
    let (backing, mnt) = (root.dir("backing"), root.dir("mnt"));
    let mut rng = SplitMix64::seed_from_u64(seed);
    let mut mount = Mount::start(&backing, &mnt, &SOON);
    let mut old = Vec::new();
    for i in 0..NAMES {
        let data = odd_bytes(&mut rng, 30_000);
        let mut f = fs::File::create(mnt.join(format!("conf{i:03}"))).expect("create");
        f.write_all(&data).expect("write");
        f.sync_all().expect("fsync");
        old.push(data);
    }
    let new: Vec<Vec<u8>> = (0..NAMES).map(|_| odd_bytes(&mut rng, 30_000)).collect();
    let kill_at = rng.next_u64() % NAMES as u64;
    let pid = mount.child.as_ref().expect("running").id();
    for (i, data) in new.iter().enumerate() {
        if i as u64 == kill_at {
            // The kill lands while this replacement is under way.
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_micros(200));
                // SAFETY: kill has no memory-safety preconditions; the
                // pid is our child's, reaped only in `kill` below.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            });
        }
        let tmp = mnt.join(format!("conf{i:03}.tmp"));
        let done = fs::File::create(&tmp)
            .and_then(|mut f| f.write_all(data))
            .and_then(|()| fs::rename(&tmp, mnt.join(format!("conf{i:03}"))));
        if done.is_err() {
            break;
        }
    }
    kill(&mut mount);
    drop(mount);
    let (mut olds, mut news) = (0, 0);
    for i in 0..NAMES {
        let name = format!("conf{i:03}");
        let bytes =
            fs::read(backing.join(&name)).unwrap_or_else(|e| panic!("seed {seed}: {name}: {e}"));
        if bytes == old[i] {
            olds += 1;
        } else if bytes == new[i] {
            news += 1;
        } else {
            panic!(
                "seed {seed}: {name} holds {} bytes, neither its old ({}) nor its new ({}) content \
                 (replay: WB_CRASH_SEED={seed})",
                bytes.len(),
                old[i].len(),
                new[i].len()
            );
        }
    }
    assert!(
        news > 0 || kill_at == 0,
        "seed {seed}: no replacement landed"
    );
    remount_serves(&backing, &mnt, seed);
    eprintln!("seed {seed}: replacements killed at {kill_at}: {olds} old, {news} new, 0 neither");
    [olds, news]
}
