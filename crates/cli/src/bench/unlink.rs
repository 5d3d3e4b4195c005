//! `wb bench unlink`: removing a tree (`rm -rf`) through `wb mount`
//! against the kernel on the same directory (Chinner 2021: what a
//! producer of deferred work waits for).
//!
//! Per configuration: a tree of --files small files (1000 a directory)
//! and --big-files large ones is written (through the mount for the
//! mount's configurations) and made durable (the kernel: syncfs; the
//! mount: stopped, which writes everything back); the page cache is
//! dropped once the disks are quiet (what the build left to write back
//! must not land in the walk); then a walker removes the tree as `rm -rf`
//! does (list a directory, unlinkat each name, then the directory),
//! timing every unlinkat and naming the slowest. The mount's configurations remove it through a fresh mount
//! (`kernel` removes it directly):
//!
//! - `kernel`: unlinkat on the backing filesystem (ext4 frees a file's
//!   extents inside the unlink of its last name; XFS defers inactivation
//!   to its inodegc workers);
//! - `mount`: through `wb mount`, `backlog_throttle=watermarks`;
//! - `mount-flush-all`: through `wb mount`, `backlog_throttle=flush-all`.
//!
//! `total_s` runs until everything is freed: the kernel's after a syncfs,
//! the mount's once its backlogs are empty.

use super::cleanup::TempFile;
use super::doc::Doc;
use super::mount::Mount;
use super::table::Table;
use super::{
    drop_caches, free_bytes, human_bytes, parse_size, prepare_dir, progress, quiesce, BenchError,
    SplitMix64,
};
use crate::html_file::HtmlFile;
use clap::Args;
use hdrhistogram::Histogram;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use serde_json::json;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Free space left untouched on the filesystem.
const SPACE_MARGIN: u64 = 1 << 30;
/// Small files a directory.
const DIR_FILES: u64 = 1000;
/// Largest latency recorded (longer ones are clamped): 10 minutes.
const LATENCY_MAX_NS: u64 = 600_000_000_000;
/// Chunk of a large file's writes.
const CHUNK_BYTES: usize = 4 << 20;
/// How long the mount's backlogs may take to empty after the walk.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(1800);
/// Most small or large files (a limit on everything).
const MAX_FILES: u64 = 10_000_000;

#[derive(Args)]
#[command(after_help = "\
Configurations, one after the other, each on a tree of its own:
  kernel            the tree written to --dir and removed there
  mount             written and removed through `wb mount --dir` (backlog_throttle=watermarks)
  mount-flush-all   the same with backlog_throttle=flush-all (XFS 2021's throttle)
The walker removes a tree as rm -rf does and times every unlinkat. Per configuration:
unlink p50, p99, p99.9 and max; the slowest unlink of a large file; the walk's
time and the total until everything is freed. Needs root (mounting, dropping caches).

Exit status: 0 on success, 1 if a run failed, 2 for bad arguments.")]
pub struct UnlinkArgs {
    /// Directory served by the mount and written directly by the kernel run
    /// (created if missing; the trees are removed at the end).
    #[arg(long, default_value = "wb-data/bench")]
    pub dir: PathBuf,
    /// Small files in the tree.
    #[arg(long, default_value = "100000", value_parser = parse_count)]
    pub files: u64,
    /// Size of each small file.
    #[arg(long, default_value = "4KiB", value_parser = parse_size, value_name = "SIZE")]
    pub file_size: u64,
    /// Large files in the tree.
    #[arg(long, default_value = "20", value_parser = parse_count)]
    pub big_files: u64,
    /// Size of each large file.
    #[arg(long, default_value = "1GiB", value_parser = parse_size, value_name = "SIZE")]
    pub big_file_size: u64,
    /// The mount's memory.
    #[arg(long, default_value = "1GiB", value_parser = parse_size, value_name = "SIZE")]
    pub memory: u64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Only these configurations, comma-separated (for experiments).
    #[arg(long, value_name = "NAMES", value_delimiter = ',', value_parser = parse_config)]
    pub configs: Vec<Config>,
    /// A knob for the mount's configurations (e.g. backlog_wait_ms=50);
    /// memory and backlog_throttle are set by --memory and the configuration.
    /// Repeatable.
    #[arg(long = "mount-set", value_name = "KNOB=VALUE", value_parser = super::parse_engine_set)]
    pub mount_sets: Vec<(String, String)>,
}

/// A configuration's name, as printed.
fn parse_config(text: &str) -> Result<Config, String> {
    CONFIGS
        .into_iter()
        .find(|c| c.name() == text)
        .ok_or_else(|| {
            let names: Vec<_> = CONFIGS.iter().map(|c| c.name()).collect();
            format!("'{text}' is not a configuration ({})", names.join(", "))
        })
}

fn parse_count(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(n) if n <= MAX_FILES => Ok(n),
        _ => Err(format!("'{text}' is not a count from 0 to {MAX_FILES}")),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Config {
    Kernel,
    Mount,
    MountFlushAll,
}

const CONFIGS: [Config; 3] = [Config::Kernel, Config::Mount, Config::MountFlushAll];

impl Config {
    fn name(self) -> &'static str {
        match self {
            Config::Kernel => "kernel",
            Config::Mount => "mount",
            Config::MountFlushAll => "mount-flush-all",
        }
    }

    /// The mount's knobs, or None for the kernel.
    fn mount_sets(self, memory: u64) -> Option<Vec<(String, String)>> {
        let throttle = match self {
            Config::Kernel => return None,
            Config::Mount => "watermarks",
            Config::MountFlushAll => "flush-all",
        };
        Some(vec![
            ("memory".into(), memory.to_string()),
            ("backlog_throttle".into(), throttle.into()),
        ])
    }
}

/// One configuration's result.
struct Removal {
    config: Config,
    unlinks: u64,
    hist: Histogram<u64>,
    big_max_ns: u64,
    walk_s: f64,
    total_s: f64,
    /// The mount's backlog pauses (count, longest in us): what its
    /// unlinks waited for the backlog; None for the kernel.
    backlog_pauses: Option<(u64, u64)>,
    slowest: Vec<(u64, String, f64)>,
}

pub fn run(args: UnlinkArgs, html: Option<HtmlFile>) -> Result<(), BenchError> {
    if args.files == 0 && args.big_files == 0 {
        return Err(BenchError::BadInput(
            "--files and --big-files are both 0: nothing to remove".into(),
        ));
    }
    let dir = prepare_dir(&args.dir)?;
    let page = wb_engine::PAGE_SIZE;
    let tree_bytes =
        args.files * args.file_size.div_ceil(page) * page + args.big_files * args.big_file_size;
    let free = free_bytes(&dir)?;
    if free < tree_bytes + SPACE_MARGIN {
        return Err(BenchError::Failed(format!(
            "not enough free space in {}: {} available, need {} (the tree) and {} margin; \
             lower --files, --big-files or --big-file-size, or pick another --dir",
            dir.display(),
            human_bytes(free),
            human_bytes(tree_bytes),
            human_bytes(SPACE_MARGIN)
        )));
    }
    progress!(
        "trees of {} files of {} and {} of {} in {}",
        args.files,
        wb_engine::units::format_bytes(args.file_size),
        args.big_files,
        human_bytes(args.big_file_size),
        dir.display()
    );
    let mut results = Vec::new();
    let configs = if args.configs.is_empty() {
        CONFIGS.to_vec()
    } else {
        args.configs.clone()
    };
    for config in configs {
        let removal = run_config(&args, &dir, config)?;
        progress!(
            "{}: {} unlinks, max {:.1} ms, large-file max {:.1} ms, walk {:.1} s, total {:.1} s",
            config.name(),
            removal.unlinks,
            removal.hist.max() as f64 / 1e6,
            removal.big_max_ns as f64 / 1e6,
            removal.walk_s,
            removal.total_s
        );
        for (ns, what, at_s) in &removal.slowest {
            progress!(
                "  slow: {:.1} ms, {at_s:.2} s into the walk, {what}",
                *ns as f64 / 1e6
            );
        }
        results.push(removal);
    }
    let doc = render(&results);
    if args.json {
        println!("{}", to_json(&results));
    } else {
        print!("{doc}");
    }
    super::write_html(html, "wb bench unlink", &doc)
}

/// Builds the tree, makes it durable, drops the page cache, removes it.
fn run_config(args: &UnlinkArgs, dir: &Path, config: Config) -> Result<Removal, BenchError> {
    let name = format!("wb-unlink-{}", config.name());
    let tree = TempFile::new(dir.join(&name));
    let _ = std::fs::remove_dir_all(tree.path());
    let sets = config.mount_sets(args.memory).map(|mut sets| {
        sets.extend(args.mount_sets.iter().cloned());
        sets
    });
    progress!("{}: writing the tree", config.name());
    match &sets {
        Some(sets) => {
            let mount = Mount::start(dir, sets)?;
            build_tree(&mount.path().join(&name), args)?;
            // Stopping writes every dirty page back.
            mount.stop()?;
        }
        None => {
            build_tree(tree.path(), args)?;
            syncfs(dir)?;
        }
    }
    let quiet_s = quiesce()?;
    drop_caches()?;
    progress!(
        "{}: removing it (the disks quiet after {quiet_s:.0} s)",
        config.name()
    );
    let mut walk = Walk::new()?;
    let mut backlog_pauses = None;
    let start = Instant::now();
    let total_s = match &sets {
        Some(sets) => {
            let mount = Mount::start(dir, sets)?;
            remove_tree(&mount.path().join(&name), &mut walk)?;
            let walk_s = start.elapsed().as_secs_f64();
            wait_backlogs_empty(mount.path())?;
            let total_s = start.elapsed().as_secs_f64();
            backlog_pauses = Some(read_backlog_pauses(mount.path())?);
            mount.stop()?;
            walk.walk_s = walk_s;
            total_s
        }
        None => {
            remove_tree(tree.path(), &mut walk)?;
            walk.walk_s = start.elapsed().as_secs_f64();
            syncfs(dir)?;
            start.elapsed().as_secs_f64()
        }
    };
    Ok(Removal {
        config,
        unlinks: walk.hist.len(),
        hist: walk.hist,
        big_max_ns: walk.big_max_ns,
        walk_s: walk.walk_s,
        total_s,
        backlog_pauses,
        slowest: walk.slowest,
    })
}

/// Writes the tree under `root`: directories `d-NNN` of [`DIR_FILES`]
/// small files `fNNNNN` each, the large files `big-NN` spread among them
/// (so a walker meets them among the small ones, as in a real tree).
fn build_tree(root: &Path, args: &UnlinkArgs) -> Result<(), BenchError> {
    let mkdir =
        |p: &Path| std::fs::create_dir_all(p).map_err(|e| BenchError::failed(p.display(), e));
    let dirs = args.files.div_ceil(DIR_FILES).max(1);
    let sub = |d: u64| root.join(format!("d-{d:03}"));
    for d in 0..dirs {
        mkdir(&sub(d))?;
    }
    let mut rng = SplitMix64::seed_from_u64(0x5eed);
    let mut small = vec![0u8; args.file_size as usize];
    rng.fill_bytes(&mut small);
    for i in 0..args.files {
        let path = sub(i / DIR_FILES).join(format!("f{:05}", i % DIR_FILES));
        std::fs::write(&path, &small).map_err(|e| BenchError::failed(path.display(), e))?;
        if (i + 1) % 20_000 == 0 {
            progress!("  {} small files written", i + 1);
        }
    }
    let mut chunk = vec![0u8; CHUNK_BYTES];
    rng.fill_bytes(&mut chunk);
    for i in 0..args.big_files {
        let path = sub(i * dirs / args.big_files).join(format!("big-{i:02}"));
        let mut f =
            std::fs::File::create(&path).map_err(|e| BenchError::failed(path.display(), e))?;
        let mut left = args.big_file_size;
        while left > 0 {
            let n = left.min(CHUNK_BYTES as u64) as usize;
            f.write_all(&chunk[..n])
                .map_err(|e| BenchError::failed(path.display(), e))?;
            left -= n as u64;
        }
        progress!("  large file {}/{} written", i + 1, args.big_files);
    }
    Ok(())
}

/// The walker's measurements.
struct Walk {
    hist: Histogram<u64>,
    big_max_ns: u64,
    walk_s: f64,
    /// The slowest unlinks: (ns, which one, seconds into the walk).
    slowest: Vec<(u64, String, f64)>,
    start: Instant,
}

/// Slowest unlinks named in the progress lines.
const SLOWEST_KEPT: usize = 5;

impl Walk {
    fn new() -> Result<Walk, BenchError> {
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
fn remove_tree(root: &Path, walk: &mut Walk) -> Result<(), BenchError> {
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

/// syncfs(2) on the filesystem of `dir`: the kernel's frees done (XFS
/// flushes its inodegc queue there).
fn syncfs(dir: &Path) -> Result<(), BenchError> {
    let f = std::fs::File::open(dir).map_err(|e| BenchError::failed(dir.display(), e))?;
    nix::unistd::syncfs(f.as_fd())
        .map_err(|e| BenchError::failed(format!("syncfs {}", dir.display()), e))
}

/// The sum of the mount's `.writeback/stats` lines whose names pass `pick`.
fn mount_stat(mnt: &Path, pick: impl Fn(&str) -> bool) -> Result<u64, BenchError> {
    let path = mnt.join(wb_fuse::CONTROL_DIR).join("stats");
    let stats =
        std::fs::read_to_string(&path).map_err(|e| BenchError::failed(path.display(), e))?;
    Ok(stats
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(name, _)| pick(name))
        .filter_map(|(_, v)| v.parse::<u64>().ok())
        .sum())
}

/// The mount's backlog pauses so far: (count, longest in us).
fn read_backlog_pauses(mnt: &Path) -> Result<(u64, u64), BenchError> {
    Ok((
        mount_stat(mnt, |n| n == "pause_backlog_count")?,
        mount_stat(mnt, |n| n == "pause_backlog_max_us")?,
    ))
}

/// Waits until the mount's backlogs hold nothing (every removed file freed).
fn wait_backlogs_empty(mnt: &Path) -> Result<(), BenchError> {
    let start = Instant::now();
    loop {
        let queued = mount_stat(mnt, |n| n.ends_with(".backlog_items"))?;
        if queued == 0 {
            return Ok(());
        }
        if start.elapsed() > SETTLE_TIMEOUT {
            return Err(BenchError::Failed(format!(
                "the mount's backlogs still hold {queued} files after {} s",
                SETTLE_TIMEOUT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn to_json(results: &[Removal]) -> serde_json::Value {
    let configs: Vec<_> = results
        .iter()
        .map(|r| {
            json!({
                "name": r.config.name(),
                "unlinks": r.unlinks,
                "unlink_us": {
                    "p50": us(r.hist.value_at_quantile(0.50)),
                    "p99": us(r.hist.value_at_quantile(0.99)),
                    "p99_9": us(r.hist.value_at_quantile(0.999)),
                    "max": us(r.hist.max()),
                },
                "walk_s": r.walk_s,
                "total_s": r.total_s,
                "big_file_unlink_max_us": us(r.big_max_ns),
                "backlog_pauses": r.backlog_pauses.map(|p| p.0),
                "backlog_pause_max_us": r.backlog_pauses.map(|p| p.1),
            })
        })
        .collect();
    json!({ "configs": configs })
}

fn render(results: &[Removal]) -> Doc {
    let mut t = Table::new(&[
        "config",
        "unlinks",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "max ms",
        "large-file max ms",
        "walk s",
        "total s",
    ]);
    for r in results {
        t.row(vec![
            r.config.name().into(),
            r.unlinks.to_string(),
            format!("{:.1}", us(r.hist.value_at_quantile(0.50))),
            format!("{:.1}", us(r.hist.value_at_quantile(0.99))),
            format!("{:.1}", us(r.hist.value_at_quantile(0.999))),
            format!("{:.2}", r.hist.max() as f64 / 1e6),
            format!("{:.2}", r.big_max_ns as f64 / 1e6),
            format!("{:.2}", r.walk_s),
            format!("{:.2}", r.total_s),
        ]);
    }
    let mut out = Doc::from(
        "rm -rf of the same tree: directly on the filesystem, and through wb mount \
         (backlog_throttle watermarks, flush-all).\n\n",
    );
    out.table(t);
    let kernel = results.iter().find(|r| r.config == Config::Kernel);
    let mount = results.iter().find(|r| r.config == Config::Mount);
    if let (Some(k), Some(m)) = (kernel, mount) {
        let ratio = |a: u64, b: u64| {
            if b == 0 {
                f64::NAN
            } else {
                a as f64 / b as f64
            }
        };
        out.push_str(&format!(
            "\nmount / kernel: unlink max {:.3}x, large-file unlink max {:.3}x, total {:.2}x\n",
            ratio(m.hist.max(), k.hist.max()),
            ratio(m.big_max_ns, k.big_max_ns),
            m.total_s / k.total_s
        ));
    }
    out
}
