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

mod backlog;
mod report;
mod tree;
mod walk;

use super::cleanup::TempFile;
use super::harness::{self, Experiment, Notes, Output, Report, Turn};
use super::mount::Mount;
use super::{drop_caches, free_bytes, parse_size, prepare_dir, progress, quiesce, BenchError};
use crate::html_file::HtmlFile;
use backlog::{read_backlog_pauses, wait_backlogs_empty};
use clap::Args;
use hdrhistogram::Histogram;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tree::{build_tree, syncfs};
use walk::{remove_tree, Walk};
use wb_engine::units::format_bytes;

/// Free space left untouched on the filesystem.
const SPACE_MARGIN: u64 = 1 << 30;
/// Small files a directory.
const DIR_FILES: u64 = 1000;
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
    pub configs: Vec<BenchConfig>,
    /// A knob for the mount's configurations (e.g. backlog_wait_ms=50);
    /// memory and backlog_throttle are set by --memory and the configuration.
    /// Repeatable.
    #[arg(long = "mount-set", value_name = "KNOB=VALUE", value_parser = super::parse_engine_set)]
    pub mount_sets: Vec<(String, String)>,
}

/// A configuration's name, as printed.
fn parse_config(text: &str) -> Result<BenchConfig, String> {
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
pub enum BenchConfig {
    Kernel,
    Mount,
    MountFlushAll,
}

const CONFIGS: [BenchConfig; 3] = [
    BenchConfig::Kernel,
    BenchConfig::Mount,
    BenchConfig::MountFlushAll,
];

impl BenchConfig {
    pub fn name(self) -> &'static str {
        match self {
            BenchConfig::Kernel => "kernel",
            BenchConfig::Mount => "mount",
            BenchConfig::MountFlushAll => "mount-flush-all",
        }
    }

    /// The mount's knobs, or None for the kernel.
    fn mount_sets(self, memory: u64) -> Option<Vec<(String, String)>> {
        let throttle = match self {
            BenchConfig::Kernel => return None,
            BenchConfig::Mount => "watermarks",
            BenchConfig::MountFlushAll => "flush-all",
        };
        Some(vec![
            ("memory".into(), memory.to_string()),
            ("backlog_throttle".into(), throttle.into()),
        ])
    }
}

/// One configuration's result.
pub struct Removal {
    pub config: BenchConfig,
    pub unlinks: u64,
    pub hist: Histogram<u64>,
    pub big_max_ns: u64,
    pub walk_s: f64,
    pub total_s: f64,
    /// The mount's backlog pauses (count, longest in us): what its
    /// unlinks waited for the backlog; None for the kernel.
    pub backlog_pauses: Option<(u64, u64)>,
    pub slowest: Vec<(u64, String, f64)>,
}

/// The configurations, one after the other, each on a tree of its own.
struct Unlink<'a> {
    args: &'a UnlinkArgs,
    dir: PathBuf,
}

impl Experiment for Unlink<'_> {
    type Setup = BenchConfig;
    type Run = Removal;

    fn name(&self, config: &BenchConfig) -> String {
        config.name().to_string()
    }

    /// One run each: the name alone.
    fn label(&self, config: &BenchConfig, _: Turn) -> String {
        self.name(config)
    }

    fn run_once(
        &mut self,
        &config: &BenchConfig,
        _: &str,
        _: &mut Notes,
    ) -> Result<Removal, BenchError> {
        run_config(self.args, &self.dir, config)
    }

    fn describe(&self, label: &str, removal: &Removal) -> Vec<String> {
        let mut lines = vec![format!(
            "{label}: {} unlinks, max {:.1} ms, large-file max {:.1} ms, walk {:.1} s, total {:.1} s",
            removal.unlinks,
            removal.hist.max() as f64 / 1e6,
            removal.big_max_ns as f64 / 1e6,
            removal.walk_s,
            removal.total_s
        )];
        for (ns, what, at_s) in &removal.slowest {
            lines.push(format!(
                "  slow: {:.1} ms, {at_s:.2} s into the walk, {what}",
                *ns as f64 / 1e6
            ));
        }
        lines
    }
}

pub fn run(args: UnlinkArgs, html: Option<HtmlFile>) -> Result<(), BenchError> {
    if args.files == 0 && args.big_files == 0 {
        return Err(BenchError::BadInput(
            "--files and --big-files are both 0: nothing to remove".into(),
        ));
    }
    let dir = prepare_dir(&args.dir)?;
    check_room(&args, &dir)?;
    progress!(
        "trees of {} files of {} and {} of {} in {}",
        args.files,
        wb_engine::units::format_bytes(args.file_size),
        args.big_files,
        format_bytes(args.big_file_size),
        dir.display()
    );
    let configs = if args.configs.is_empty() {
        CONFIGS.to_vec()
    } else {
        args.configs.clone()
    };
    let mut exp = Unlink { args: &args, dir };
    let measured = harness::run(&mut exp, configs, 1, &mut Notes::new())?;
    let results: Vec<Removal> = measured.into_iter().flat_map(|m| m.runs).collect();
    let report = Report::new(report::render(&results), report::to_json(&results));
    Output::new("wb bench unlink", args.json, html).publish(report)
}

/// Whether --dir has room for the tree.
fn check_room(args: &UnlinkArgs, dir: &Path) -> Result<(), BenchError> {
    let page = wb_engine::PAGE_SIZE;
    let tree_bytes =
        args.files * args.file_size.div_ceil(page) * page + args.big_files * args.big_file_size;
    let free = free_bytes(dir)?;
    if free < tree_bytes + SPACE_MARGIN {
        return Err(BenchError::Failed(format!(
            "not enough free space in {}: {} available, need {} (the tree) and {} margin; \
             lower --files, --big-files or --big-file-size, or pick another --dir",
            dir.display(),
            format_bytes(free),
            format_bytes(tree_bytes),
            format_bytes(SPACE_MARGIN)
        )));
    }
    Ok(())
}

/// Builds the tree, makes it durable, drops the page cache, removes it.
fn run_config(args: &UnlinkArgs, dir: &Path, config: BenchConfig) -> Result<Removal, BenchError> {
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
