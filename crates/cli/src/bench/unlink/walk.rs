//! The walker: removes a tree as `rm -rf` does (list a directory,
//! unlinkat each name, then the directory), timing every unlinkat and
//! keeping the slowest.

use crate::bench::BenchError;
use hdrhistogram::Histogram;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Instant;

/// Largest latency recorded (longer ones are clamped): 10 minutes.
const LATENCY_MAX_NS: u64 = 600_000_000_000;

/// The walker's measurements.
pub struct Walk {
    pub hist: Histogram<u64>,
    pub big_max_ns: u64,
    pub walk_s: f64,
    /// The slowest unlinks: (ns, which one, seconds into the walk).
    pub slowest: Vec<(u64, String, f64)>,
    start: Instant,
}

/// Slowest unlinks named in the progress lines.
const SLOWEST_KEPT: usize = 5;

impl Walk {
    pub fn new() -> Result<Walk, BenchError> {
        let hist = Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3)
            .map_err(|e| BenchError::Failed(format!("latency histogram: {e}")))?;
        Ok(Walk {
            hist,
            big_max_ns: 0,
            walk_s: 0.0,
            slowest: Vec::new(),
            start: Instant::now(),
        })
    }

    fn record(&mut self, ns: u64, big: bool, what: impl FnOnce() -> String) {
        self.hist.saturating_record(ns.clamp(1, LATENCY_MAX_NS));
        if big {
            self.big_max_ns = self.big_max_ns.max(ns);
        }
        let kept_min = self.slowest.last().map_or(0, |s| s.0);
        if self.slowest.len() < SLOWEST_KEPT || ns > kept_min {
            let at_s = self.start.elapsed().as_secs_f64();
            self.slowest.push((ns, what(), at_s));
            self.slowest.sort_by_key(|s| std::cmp::Reverse(s.0));
            self.slowest.truncate(SLOWEST_KEPT);
        }
    }
}

/// Removes the tree at `root` as `rm -rf` does: list a directory, unlinkat
/// each entry (a directory after its contents), then the directory itself.
pub fn remove_tree(root: &Path, walk: &mut Walk) -> Result<(), BenchError> {
    walk.start = Instant::now();
    remove_contents(root, walk)?;
    let parent = root.parent().unwrap_or(Path::new("/"));
    let name = root.file_name().unwrap_or_default();
    let dir = open_dir(parent)?;
    timed_unlinkat(&dir, root, name, true, walk, false)
        .map_err(|e| BenchError::failed(root.display(), e))
}

fn remove_contents(dir_path: &Path, walk: &mut Walk) -> Result<(), BenchError> {
    let mut dir = open_dir(dir_path)?;
    let mut entries = Vec::new();
    for entry in dir.iter() {
        let entry = entry.map_err(|e| BenchError::failed(dir_path.display(), e))?;
        let name = std::ffi::OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        let is_dir = entry.file_type() == Some(nix::dir::Type::Directory);
        entries.push((name.to_os_string(), is_dir));
    }
    for (name, is_dir) in entries {
        if is_dir {
            remove_contents(&dir_path.join(&name), walk)?;
        }
        let big = name.as_encoded_bytes().starts_with(b"big-");
        timed_unlinkat(&dir, dir_path, &name, is_dir, walk, big)
            .map_err(|e| BenchError::failed(dir_path.join(&name).display(), e))?;
    }
    Ok(())
}

fn open_dir(path: &Path) -> Result<nix::dir::Dir, BenchError> {
    use nix::fcntl::OFlag;
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    nix::dir::Dir::open(path, flags, nix::sys::stat::Mode::empty())
        .map_err(|e| BenchError::failed(path.display(), e))
}

fn timed_unlinkat(
    dir: &nix::dir::Dir,
    dir_path: &Path,
    name: &std::ffi::OsStr,
    is_dir: bool,
    walk: &mut Walk,
    big: bool,
) -> nix::Result<()> {
    let flag = if is_dir {
        nix::unistd::UnlinkatFlags::RemoveDir
    } else {
        nix::unistd::UnlinkatFlags::NoRemoveDir
    };
    let start = Instant::now();
    nix::unistd::unlinkat(dir.as_fd(), name, flag)?;
    walk.record(start.elapsed().as_nanos() as u64, big, || {
        dir_path.join(name).display().to_string()
    });
    Ok(())
}
