//! `wb mount` in a memory cgroup (v1): its default budget fits the
//! cgroup's limit, and the start line says so; a copy of four times the
//! limit goes through without an OOM kill; a process that needs memory
//! beside a full cache gets it, and the budget grows back after; a limit
//! lowered at run time is followed.
//!
//! Each test makes its own cgroup under /sys/fs/cgroup/memory, starts
//! `wb mount` in it, waits (bounded) for its "serving" line, and always
//! unmounts, stops the mount and removes the cgroup in Drop guards, also
//! when it fails. They need root, /dev/fuse and the v1 memory
//! controller; without them they say why and pass without checking
//! anything, except under CI (`WB_REQUIRE_ALL_TESTS`), where that fails.
//! They run one at a time (a lock).

mod common;
use common::mount::*;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
/// The v1 memory controller's mount.
const V1_MEMORY: &str = "/sys/fs/cgroup/memory";
fn v1_skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse is missing".into());
    }
    if !Path::new(V1_MEMORY).join("memory.limit_in_bytes").exists() {
        return Some(format!("no cgroup v1 memory controller at {V1_MEMORY}"));
    }
    None
}

macro_rules! require {
    () => {
        if let Some(reason) = v1_skip_reason() {
            wb_testkit::skip(&reason);
            return;
        }
    };
}

fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("wb-test-{name}-{}-{nanos}", std::process::id())
}

/// A v1 memory cgroup of our own, removed on drop (its processes moved
/// to the root first).
struct Cgroup {
    dir: PathBuf,
    /// Its path in the hierarchy, as the start line names it.
    path: String,
}

impl Cgroup {
    fn new(name: &str, limit_bytes: u64) -> Cgroup {
        let path = format!("/{}", unique(name));
        let dir = Path::new(V1_MEMORY).join(&path[1..]);
        fs::create_dir(&dir).expect("create the cgroup");
        let cgroup = Cgroup { dir, path };
        cgroup.set_limit(limit_bytes);
        cgroup
    }

    fn set_limit(&self, bytes: u64) {
        fs::write(self.dir.join("memory.limit_in_bytes"), bytes.to_string())
            .expect("set the cgroup's limit");
    }

    fn read_u64(&self, file: &str) -> u64 {
        let text = fs::read_to_string(self.dir.join(file)).expect("read a cgroup file");
        text.trim().parse().expect("a number")
    }

    /// OOM kills in the cgroup so far (memory.oom_control `oom_kill`).
    fn oom_kills(&self) -> u64 {
        let text = fs::read_to_string(self.dir.join("memory.oom_control")).expect("oom_control");
        text.lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .map_or(0, |n| n.trim().parse().expect("a count"))
    }

    /// `program args` run inside the cgroup.
    fn command(&self, program: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new("sh");
        let procs = self.dir.join("cgroup.procs");
        cmd.arg("-c")
            .arg(format!("echo $$ > '{}' && exec \"$@\"", procs.display()))
            .arg("sh")
            .arg(program)
            .args(args);
        cmd
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let root = Path::new(V1_MEMORY).join("cgroup.procs");
        for _ in 0..50 {
            let procs = fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
            for pid in procs.split_whitespace() {
                let _ = fs::write(&root, pid);
            }
            if fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("could not remove {}", self.dir.display());
    }
}

/// A tree under /var/tmp (a real disk: O_DIRECT) with `backing` and
/// `mnt`, removed on drop.
fn temp_root(name: &str) -> TempRoot {
    let root = TempRoot::new_in(Path::new("/var/tmp"), name);
    root.dir("backing");
    root.dir("mnt");
    root
}

/// `wb mount` (default settings, and `extra`) of `root`'s backing
/// directory, inside `cgroup`.
fn mount_in(cgroup: &Cgroup, root: &TempRoot, extra: &[&str]) -> Mount {
    let (backing, mnt, data) = (
        root.0.join("backing"),
        root.0.join("mnt"),
        root.0.join("wb-data"),
    );
    let mut args = vec!["mount", path(&backing), path(&mnt), "--no-calibrate"];
    args.extend(["--data-dir", path(&data)]);
    args.extend_from_slice(extra);
    Mount::spawn(cgroup.command(WB, &args), &backing, &mnt)
}

fn path(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// Deterministic pseudo-random bytes for MiB `i` of a test file.
fn chunk(i: u64) -> Vec<u8> {
    use rand_xoshiro::rand_core::{RngCore, SeedableRng};
    let mut buf = vec![0u8; MIB as usize];
    rand_xoshiro::SplitMix64::seed_from_u64(i).fill_bytes(&mut buf);
    buf
}

/// Writes `mib` MiB of `chunk`s to `file` and makes them durable.
fn write_file(file: &Path, mib: u64) {
    let mut f = fs::File::create(file).expect("create through the mount");
    for i in 0..mib {
        f.write_all(&chunk(i)).expect("write through the mount");
    }
    f.sync_all().expect("fsync through the mount");
}

/// Reads `file` back and compares it with the `chunk`s.
fn check_file(file: &Path, mib: u64) {
    let mut f = fs::File::open(file).expect("open");
    let mut buf = vec![0u8; MIB as usize];
    for i in 0..mib {
        f.read_exact(&mut buf).expect("read back");
        assert!(buf == chunk(i), "MiB {i} of {} differs", file.display());
    }
    assert_eq!(f.read(&mut buf).expect("read at the end"), 0, "longer");
}

// ---------------------------------------------------------------- tests

#[test]
fn help_tells_where_the_budget_comes_from_and_how_to_fix_it() {
    let out = Command::new(WB)
        .args(["mount", "--help"])
        .output()
        .expect("run wb");
    let text = String::from_utf8_lossy(&out.stdout);
    for word in [
        "--fixed-memory",
        "memory_min",
        "memory.limit_in_bytes",
        "memory.max",
        "MemAvailable",
        "follows memory pressure",
    ] {
        assert!(text.contains(word), "--help lacks {word}:\n{text}");
    }
}

/// 512 MiB of cgroup, 2 GiB copied in and read back: the budget is the
/// limit less 256 MiB, nothing is killed, the data is intact.
#[test]
fn a_copy_of_four_times_the_cgroup_limit_goes_through_without_an_oom_kill() {
    require!();
    let _serial = serial();
    let cgroup = Cgroup::new("copy", 512 * MIB);
    let root = temp_root("copy");
    let mut mount = mount_in(&cgroup, &root, &[]);
    let expected = format!(
        "memory 256.0MiB: cgroup {} memory.limit_in_bytes 512.0MiB less 256.0MiB, \
         follows memory pressure",
        cgroup.path
    );
    assert!(mount.serving.contains(&expected), "{}", mount.serving);

    let file = mount.mnt.join("copy");
    write_file(&file, 2048);
    let stats = mount.stats();
    assert!(stats["memory_bytes"] <= 256 * MIB, "{stats:?}");
    assert!(stats["cached_bytes"] <= stats["memory_bytes"], "{stats:?}");
    assert_eq!(stats["memory_follows_pressure"], 1);
    check_file(&file, 2048);
    assert_eq!(cgroup.oom_kills(), 0, "an OOM kill in the cgroup");
    assert!(
        cgroup.read_u64("memory.max_usage_in_bytes") <= 512 * MIB,
        "the limit holds"
    );
    assert!(mount.alive(), "wb mount died");

    let (status, err) = mount.unmount();
    assert!(status.success(), "wb mount: {status}\n{err}");
    assert_eq!(cgroup.oom_kills(), 0);
    check_file(&root.0.join("backing/copy"), 2048);
}

/// A 1 GiB cgroup: the mount holds 700 MiB, then `dd` with a 700 MiB
/// buffer runs beside it. The cache gives the memory back in time (no
/// OOM kill, dd succeeds quickly), and once dd is gone the budget grows
/// back to its ceiling, gradually.
#[test]
fn a_process_beside_a_full_cache_gets_its_memory_and_the_budget_grows_back() {
    require!();
    let _serial = serial();
    let cgroup = Cgroup::new("hog", 1024 * MIB);
    let root = temp_root("hog");
    let mut mount = mount_in(&cgroup, &root, &[]);
    let file = mount.mnt.join("held");
    write_file(&file, 700);
    let before = mount.stats();
    assert!(before["cached_bytes"] >= 650 * MIB, "{before:?}");
    let ceiling = before["memory_ceiling_bytes"];
    assert_eq!(ceiling, 768 * MIB, "1 GiB less 256 MiB");

    let start = Instant::now();
    let status = cgroup
        .command(
            "dd",
            &["if=/dev/zero", "of=/dev/null", "bs=700M", "count=3"],
        )
        .stderr(Stdio::null())
        .status()
        .expect("run dd");
    let took = start.elapsed();
    assert!(status.success(), "dd beside the cache: {status}");
    assert_eq!(cgroup.oom_kills(), 0, "an OOM kill in the cgroup");
    assert!(mount.alive(), "wb mount died");
    // About half a second here; a generous bound for a busy machine.
    assert!(took < Duration::from_secs(20), "dd took {took:?}");
    let after = mount.stats();
    assert!(after["memory_shrinks"] >= 1, "{after:?}");
    assert!(
        after["memory_given_back_bytes"] >= 300 * MIB,
        "gave back {} MiB",
        after["memory_given_back_bytes"] / MIB
    );

    // dd is gone: within GROW_HOLD (2 s) plus ~10 s of growth (10% of
    // the ceiling a second) the budget is back; allow 60 s.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut budgets = Vec::new();
    loop {
        let budget = mount.stat("memory_bytes");
        budgets.push(budget);
        if budget == ceiling || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(*budgets.last().unwrap(), ceiling, "grew back: {budgets:?}");
    let stats = mount.stats();
    assert!(stats["memory_grows"] >= 5, "gradually: {stats:?}");
    // Growing, it gave nothing back (near the top the room may trim the
    // budget a little, above what the cache holds).
    assert_eq!(
        stats["memory_given_back_bytes"], after["memory_given_back_bytes"],
        "{budgets:?}"
    );
    let dips = budgets.windows(2).filter(|w| w[1] < w[0]).count();
    assert!(dips <= budgets.len() / 4, "mostly grew: {budgets:?}");

    check_file(&file, 700);
    let (status, err) = mount.unmount();
    assert!(status.success(), "wb mount: {status}\n{err}");
}

/// The cgroup's limit lowered while the mount runs: the budget follows
/// within a bounded time, and says why.
#[test]
fn a_cgroup_limit_lowered_at_run_time_is_followed() {
    require!();
    let _serial = serial();
    let cgroup = Cgroup::new("limit", 2048 * MIB);
    let root = temp_root("limit");
    let mount = mount_in(&cgroup, &root, &[]);
    assert!(
        mount.serving.contains("memory 1.7GiB: 85% of cgroup "),
        "{}",
        mount.serving
    );
    write_file(&mount.mnt.join("f"), 128);
    cgroup.set_limit(512 * MIB);
    let deadline = Instant::now() + Duration::from_secs(10);
    while mount.stat("memory_bytes") > 256 * MIB && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let stats = mount.stats();
    assert!(stats["memory_bytes"] <= 256 * MIB, "{stats:?}");
    assert_eq!(stats["memory_reason_cgroup_limit"], 1, "{stats:?}");
    check_file(&mount.mnt.join("f"), 128);
    let (status, err) = mount.unmount();
    assert!(status.success(), "wb mount: {status}\n{err}");
}

/// --fixed-memory: the start line says so and nothing moves the budget.
#[test]
fn a_fixed_budget_does_not_follow_pressure() {
    require!();
    let _serial = serial();
    let cgroup = Cgroup::new("fixed", 1024 * MIB);
    let root = temp_root("fixed");
    let mount = mount_in(&cgroup, &root, &["--fixed-memory", "--set", "memory=64MiB"]);
    assert!(
        mount
            .serving
            .contains("memory 64.0MiB: --set memory, fixed,"),
        "{}",
        mount.serving
    );
    let stats = mount.stats();
    assert_eq!(stats["memory_follows_pressure"], 0, "{stats:?}");
    assert_eq!(stats["memory_reason_start"], 1, "{stats:?}");
    let (status, err) = mount.unmount();
    assert!(status.success(), "wb mount: {status}\n{err}");
}
