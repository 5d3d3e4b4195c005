//! Reading the memory where the process runs, for the engine's memory
//! pressure policy and the start budget (the engine's memory_pressure/
//! and memory_budget/ decide; this only reads):
//!
//! - /proc/meminfo: MemTotal, MemAvailable.
//! - The process's cgroups, found from /proc/self/cgroup (`0::/path` for
//!   v2, the `memory` controller's line for v1) under the mount points
//!   /proc/self/mountinfo gives (read once), walked up to the hierarchy's
//!   root: each level with a limit (v2 `memory.max` and `memory.high`,
//!   the tighter; v1 `memory.limit_in_bytes`, "unlimited" being a huge
//!   number) with its usage (`memory.current`, `memory.usage_in_bytes`)
//!   and its file pages (`memory.stat`: inactive_file + active_file, v1
//!   total_inactive_file + total_active_file).
//! - PSI memory stall totals: the `memory.pressure` of the nearest v2
//!   cgroup with a limit (its stalls include everyone under that limit),
//!   else /proc/pressure/memory (v1 has no per-cgroup PSI).
//!
//! /proc/self/cgroup is read again at every sample (the process may be
//! moved); a file that cannot be read leaves its level out, and a sample
//! without /proc/meminfo is an error.

use std::path::{Path, PathBuf};
use wb_engine::{CgroupMemory, LimitFile, MemorySample, PsiTotals, MAX_CGROUP_LEVELS};

/// cgroup v1 reports "no limit" as the page counter's maximum
/// (9223372036854771712 on 4 KiB pages); any limit from here up is none.
const UNLIMITED_FROM_BYTES: u64 = 1 << 62;
/// The system-wide PSI file.
pub(crate) const PROC_PSI_MEMORY: &str = "/proc/pressure/memory";

/// A cgroup hierarchy's mount: where it is, and which cgroup its root is
/// (not "/" inside some containers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CgroupMount {
    pub point: PathBuf,
    pub root: String,
}

/// The mounts of the two hierarchies that can limit memory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CgroupMounts {
    pub v2: Option<CgroupMount>,
    pub v1_memory: Option<CgroupMount>,
}

/// The process's cgroup paths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProcCgroup {
    pub v2: Option<String>,
    pub v1_memory: Option<String>,
}

/// MemTotal and MemAvailable in bytes, from /proc/meminfo's text.
pub(crate) fn parse_meminfo(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let kb = l.strip_prefix(name)?.trim().strip_suffix("kB")?;
            kb.trim()
                .parse::<u64>()
                .ok()
                .map(|kb| kb.saturating_mul(1024))
        })
    };
    Some((field("MemTotal:")?, field("MemAvailable:")?))
}

/// The `total=` of PSI's `some` and `full` lines.
pub(crate) fn parse_psi(text: &str) -> Option<PsiTotals> {
    let total = |kind: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(kind))?
            .split_whitespace()
            .find_map(|f| f.strip_prefix("total="))?
            .parse::<u64>()
            .ok()
    };
    Some(PsiTotals {
        some_us: total("some")?,
        // A file without a `full` line counts as no full stalls.
        full_us: total("full").unwrap_or(0),
    })
}

/// /proc/self/cgroup: `0::/path` (v2) and `N:...memory...:/path` (v1).
pub(crate) fn parse_proc_cgroup(text: &str) -> ProcCgroup {
    let mut out = ProcCgroup::default();
    for line in text.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            out.v2 = Some(path.to_string());
        } else if controllers.split(',').any(|c| c == "memory") {
            out.v1_memory = Some(path.to_string());
        }
    }
    out
}

/// The cgroup2 mount and the v1 mount with the memory controller, from
/// /proc/self/mountinfo: `ID PARENT MAJ:MIN ROOT POINT OPTS ... - TYPE
/// SOURCE SUPEROPTS`.
pub(crate) fn parse_mountinfo(text: &str) -> CgroupMounts {
    let mut out = CgroupMounts::default();
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let left: Vec<&str> = left.split(' ').collect();
        let mut right = right.split(' ');
        let (Some(fstype), Some(_source), Some(superopts)) =
            (right.next(), right.next(), right.next())
        else {
            continue;
        };
        let (Some(&root), Some(&point)) = (left.get(3), left.get(4)) else {
            continue;
        };
        let mount = CgroupMount {
            point: PathBuf::from(unescape_mount_path(point)),
            root: unescape_mount_path(root),
        };
        match fstype {
            "cgroup2" if out.v2.is_none() => out.v2 = Some(mount),
            "cgroup" if out.v1_memory.is_none() && superopts.split(',').any(|o| o == "memory") => {
                out.v1_memory = Some(mount)
            }
            _ => {}
        }
    }
    out
}

/// mountinfo writes space, tab, newline and backslash as octal escapes.
fn unescape_mount_path(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A limit file's value: None for "max" (v2) or v1's "unlimited".
pub(crate) fn parse_limit(text: &str) -> Option<u64> {
    let text = text.trim();
    if text == "max" {
        return None;
    }
    text.parse::<u64>()
        .ok()
        .filter(|&bytes| bytes < UNLIMITED_FROM_BYTES)
}

/// File pages on a cgroup's LRU lists, from its memory.stat.
pub(crate) fn parse_stat_file_bytes(text: &str, v1: bool) -> u64 {
    let (inactive, active) = match v1 {
        true => ("total_inactive_file", "total_active_file"),
        false => ("inactive_file", "active_file"),
    };
    let value = |key: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse::<u64>().ok()).flatten()
        })
    };
    value(inactive)
        .unwrap_or(0)
        .saturating_add(value(active).unwrap_or(0))
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The directory of cgroup `path` under `mount`, and the cgroup name of
/// the mount's root as seen from this process.
fn cgroup_dir(mount: &CgroupMount, path: &str) -> PathBuf {
    let rel = match mount.root.as_str() {
        "/" => path,
        root => path.strip_prefix(root).unwrap_or(path),
    };
    let dir = mount.point.join(rel.trim_start_matches('/'));
    // Inside a cgroup namespace the path may not exist as such: the
    // mount's root is then the process's own cgroup.
    if dir.is_dir() {
        dir
    } else {
        mount.point.clone()
    }
}

/// One level's limit and where it came from, if it has one.
fn level_limit(dir: &Path, v1: bool) -> Option<(u64, LimitFile)> {
    if v1 {
        let limit = parse_limit(&read(&dir.join("memory.limit_in_bytes"))?)?;
        return Some((limit, LimitFile::V1Limit));
    }
    let max = read(&dir.join("memory.max")).and_then(|t| parse_limit(&t));
    let high = read(&dir.join("memory.high")).and_then(|t| parse_limit(&t));
    match (max, high) {
        (Some(m), Some(h)) if h < m => Some((h, LimitFile::V2High)),
        (Some(m), _) => Some((m, LimitFile::V2Max)),
        (None, Some(h)) => Some((h, LimitFile::V2High)),
        (None, None) => None,
    }
}

/// The levels with a limit from `path` up to the hierarchy's root (at
/// most MAX_CGROUP_LEVELS looked at), the process's own first; and the
/// directory of the nearest one.
pub(crate) fn cgroup_levels(
    mount: &CgroupMount,
    path: &str,
    v1: bool,
) -> (Vec<CgroupMemory>, Option<PathBuf>) {
    let usage_file = match v1 {
        true => "memory.usage_in_bytes",
        false => "memory.current",
    };
    let (mut levels, mut nearest) = (Vec::new(), None);
    let mut dir = cgroup_dir(mount, path);
    for _ in 0..MAX_CGROUP_LEVELS {
        if let Some((limit_bytes, limit_file)) = level_limit(&dir, v1) {
            let usage = read(&dir.join(usage_file)).and_then(|t| t.trim().parse::<u64>().ok());
            if let Some(usage_bytes) = usage {
                let file_bytes =
                    read(&dir.join("memory.stat")).map_or(0, |t| parse_stat_file_bytes(&t, v1));
                let rel = dir.strip_prefix(&mount.point).unwrap_or(Path::new(""));
                levels.push(CgroupMemory {
                    path: format!("/{}", rel.display()),
                    limit_file,
                    limit_bytes,
                    usage_bytes,
                    file_bytes,
                });
                nearest.get_or_insert_with(|| dir.clone());
            }
        }
        if dir == mount.point {
            break;
        }
        match dir.parent() {
            Some(parent) => dir = parent.to_path_buf(),
            None => break,
        }
    }
    (levels, nearest)
}

/// Reads samples; knows the cgroup mounts (read once).
pub(crate) struct Sampler {
    mounts: CgroupMounts,
}

impl Sampler {
    pub fn new() -> Sampler {
        let mounts = read(Path::new("/proc/self/mountinfo"))
            .map(|t| parse_mountinfo(&t))
            .unwrap_or_default();
        Sampler { mounts }
    }

    /// The memory where the process runs now, and the PSI file that
    /// describes its stalls.
    pub fn sample(&self) -> std::io::Result<(MemorySample, PathBuf)> {
        let meminfo = std::fs::read_to_string("/proc/meminfo")?;
        let (total, available) = parse_meminfo(&meminfo).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "/proc/meminfo has no MemTotal or MemAvailable",
            )
        })?;
        let proc_cgroup = read(Path::new("/proc/self/cgroup"))
            .map(|t| parse_proc_cgroup(&t))
            .unwrap_or_default();
        let mut cgroups = Vec::new();
        let mut psi_file = PathBuf::from(PROC_PSI_MEMORY);
        if let (Some(mount), Some(path)) = (&self.mounts.v2, &proc_cgroup.v2) {
            let (levels, nearest) = cgroup_levels(mount, path, false);
            cgroups.extend(levels);
            if let Some(pressure) = nearest.map(|d| d.join("memory.pressure")) {
                if pressure.exists() {
                    psi_file = pressure;
                }
            }
        }
        if let (Some(mount), Some(path)) = (&self.mounts.v1_memory, &proc_cgroup.v1_memory) {
            cgroups.extend(cgroup_levels(mount, path, true).0);
        }
        cgroups.truncate(MAX_CGROUP_LEVELS);
        let psi = read(&psi_file).and_then(|t| parse_psi(&t));
        let sample = MemorySample {
            mem_total_bytes: total,
            mem_available_bytes: available,
            cgroups,
            psi,
        };
        Ok((sample, psi_file))
    }
}

/// The memory where the process runs now (for a start budget:
/// `wb_engine::start_budget`).
pub fn sample_memory() -> std::io::Result<MemorySample> {
    Sampler::new().sample().map(|(sample, _)| sample)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_gives_total_and_available() {
        let text = "MemTotal:       24589364 kB\nMemFree:        21000000 kB\n\
                    MemAvailable:   23000000 kB\nBuffers:            1234 kB\n";
        assert_eq!(
            parse_meminfo(text),
            Some((24_589_364 * 1024, 23_000_000 * 1024))
        );
        assert_eq!(parse_meminfo("MemTotal: 10 kB\n"), None);
    }

    #[test]
    fn psi_totals() {
        let text = "some avg10=0.00 avg60=1.50 avg300=0.20 total=123456\n\
                    full avg10=0.00 avg60=0.00 avg300=0.00 total=789\n";
        assert_eq!(
            parse_psi(text),
            Some(PsiTotals {
                some_us: 123_456,
                full_us: 789
            })
        );
        assert_eq!(parse_psi("garbage"), None);
    }

    #[test]
    fn proc_self_cgroup_v1_and_v2_lines() {
        let hybrid = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n\
                      3:cpu,cpuacct:/x\n0::/\n";
        assert_eq!(
            parse_proc_cgroup(hybrid),
            ProcCgroup {
                v2: Some("/".into()),
                v1_memory: Some("/process_api/abc".into()),
            }
        );
        let v2 = "0::/user.slice/user-0.slice/session-1.scope\n";
        assert_eq!(
            parse_proc_cgroup(v2).v2.as_deref(),
            Some("/user.slice/user-0.slice/session-1.scope")
        );
        assert_eq!(parse_proc_cgroup(v2).v1_memory, None);
        // A controller list that only contains "memory" as a substring.
        assert_eq!(parse_proc_cgroup("5:memory_x:/a\n").v1_memory, None);
        assert_eq!(
            parse_proc_cgroup("5:cpu,memory:/a:b\n")
                .v1_memory
                .as_deref(),
            Some("/a:b")
        );
    }

    #[test]
    fn mountinfo_finds_both_hierarchies() {
        let text = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
        let m = parse_mountinfo(text);
        assert_eq!(
            m.v1_memory,
            Some(CgroupMount {
                point: "/sys/fs/cgroup/memory".into(),
                root: "/".into()
            })
        );
        assert_eq!(
            m.v2.map(|m| m.point),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        // Pure v2, a container's view with an escaped space.
        let text = "25 20 0:22 /docker/abc /sys/fs/cgroup\\040x rw shared:9 - cgroup2 cgroup2 rw,nsdelegate\n";
        let m = parse_mountinfo(text);
        assert_eq!(
            m.v2,
            Some(CgroupMount {
                point: "/sys/fs/cgroup x".into(),
                root: "/docker/abc".into()
            })
        );
        assert_eq!(m.v1_memory, None);
    }

    #[test]
    fn limits_max_and_unlimited_are_none() {
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("9223372036854771712\n"), None);
        assert_eq!(parse_limit("4294967296\n"), Some(4 << 30));
        assert_eq!(parse_limit("nonsense"), None);
    }

    #[test]
    fn memory_stat_file_pages() {
        let v1 = "cache 100\nrss 5\ninactive_file 1\nactive_file 2\n\
                  total_inactive_file 4096\ntotal_active_file 8192\n";
        assert_eq!(parse_stat_file_bytes(v1, true), 12288);
        let v2 = "anon 1000\nfile 99999\ninactive_file 300\nactive_file 700\n";
        assert_eq!(parse_stat_file_bytes(v2, false), 1000);
        assert_eq!(parse_stat_file_bytes("", false), 0);
    }

    /// A fake hierarchy under a temporary directory.
    struct Tree(PathBuf);

    impl Tree {
        fn new(name: &str) -> Tree {
            let dir = std::env::temp_dir().join(format!("wb-cgroup-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Tree(dir)
        }

        fn file(&self, rel: &str, text: &str) {
            let path = self.0.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }

        fn mount(&self) -> CgroupMount {
            CgroupMount {
                point: self.0.clone(),
                root: "/".into(),
            }
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn v1_levels_walk_up_and_skip_the_unlimited() {
        let t = Tree::new("v1");
        t.file("memory.limit_in_bytes", "9223372036854771712\n");
        t.file("memory.usage_in_bytes", "999\n");
        t.file("a/memory.limit_in_bytes", "8589934592\n");
        t.file("a/memory.usage_in_bytes", "1000\n");
        t.file(
            "a/memory.stat",
            "total_inactive_file 10\ntotal_active_file 20\n",
        );
        t.file("a/b/memory.limit_in_bytes", "9223372036854771712\n");
        t.file("a/b/c/memory.limit_in_bytes", "4294967296\n");
        t.file("a/b/c/memory.usage_in_bytes", "500\n");
        let (levels, nearest) = cgroup_levels(&t.mount(), "/a/b/c", true);
        assert_eq!(
            levels,
            vec![
                CgroupMemory {
                    path: "/a/b/c".into(),
                    limit_file: LimitFile::V1Limit,
                    limit_bytes: 4 << 30,
                    usage_bytes: 500,
                    file_bytes: 0,
                },
                CgroupMemory {
                    path: "/a".into(),
                    limit_file: LimitFile::V1Limit,
                    limit_bytes: 8 << 30,
                    usage_bytes: 1000,
                    file_bytes: 30,
                },
            ]
        );
        assert_eq!(nearest, Some(t.0.join("a/b/c")));
    }

    #[test]
    fn v2_levels_take_the_tighter_of_max_and_high() {
        let t = Tree::new("v2");
        // The root has neither file.
        t.file("cgroup.controllers", "memory\n");
        t.file("s/memory.max", "max\n");
        t.file("s/memory.high", "6442450944\n");
        t.file("s/memory.current", "100\n");
        t.file("s/memory.stat", "inactive_file 1\nactive_file 2\n");
        t.file("s/j/memory.max", "2147483648\n");
        t.file("s/j/memory.high", "max\n");
        t.file("s/j/memory.current", "50\n");
        let (levels, _) = cgroup_levels(&t.mount(), "/s/j", false);
        let summary: Vec<_> = levels
            .iter()
            .map(|l| (l.path.as_str(), l.limit_file, l.limit_bytes, l.file_bytes))
            .collect();
        assert_eq!(
            summary,
            [
                ("/s/j", LimitFile::V2Max, 2 << 30, 0),
                ("/s", LimitFile::V2High, 6 << 30, 3),
            ]
        );
        // A path that is not there (a cgroup namespace): the mount's root.
        let (levels, _) = cgroup_levels(&t.mount(), "/elsewhere", false);
        assert!(levels.is_empty());
    }

    #[test]
    fn this_process_can_be_sampled() {
        let (sample, psi_file) = Sampler::new().sample().unwrap();
        assert!(sample.mem_total_bytes > 0);
        assert!(sample.mem_available_bytes <= sample.mem_total_bytes);
        assert!(psi_file.is_absolute());
    }
}
