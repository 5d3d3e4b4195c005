//! `wb bench requests`: how many FUSE requests an operation costs through
//! `wb mount`, against the fewest it needs, and how fast the operations
//! run through the mount against the kernel on the same directory.
//!
//! Three workloads, each on files of its own:
//! - `read4k`: 4 KiB preads at random pages of a cached 64 MiB file
//!   opened once. Fewest: 1 (READ).
//! - `db`: a database's transaction on a 64 MiB file and a log, both
//!   opened once: two 4 KiB preads and two 4 KiB pwrites at random pages,
//!   a 4 KiB append to the log, fdatasync of the log. Fewest: 6 (2 READ,
//!   3 WRITE, 1 FSYNC).
//! - `files`: a small file's life, as dbench's clients live them: create
//!   and write 16 KiB in one write, close; stat; open, pread the 16 KiB,
//!   close; rename; unlink. Fewest: 5 (CREATE, WRITE, READ, RENAME,
//!   UNLINK): one request per call that moves data or changes a name;
//!   opens, closes and stats need none (the kernel may keep attributes,
//!   and needs no OPEN or RELEASE from a server without open state).
//!
//! The mount runs with its default transport (FUSE over io_uring when the
//! kernel has it on: /sys/module/fuse/parameters/enable_uring); the
//! report says what share of the requests came that way.
//!
//! The requests are the mount's `.writeback/stats` counts by opcode,
//! taken before and after the workload; what reading the stats file
//! itself costs (measured by reading it twice in a row) is taken off.

use super::doc::Doc;
use super::harness::{self, median_of, Experiment, Notes, Output, Report};
use super::mount::Mount;
use super::table::{rate, ratio, Table};
use super::{parse_repeat, prepare_dir, progress, BenchError, SplitMix64};
use crate::html_file::HtmlFile;
use clap::Args;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use serde_json::json;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Most operations a workload runs (a limit on everything).
const MAX_OPS: u64 = 10_000_000;
/// The files `read4k` and `db` work on.
const FILE_BYTES: u64 = 64 << 20;
const PAGE: u64 = 4096;
/// A small file's size in `files`.
const SMALL_FILE_BYTES: usize = 16 << 10;

#[derive(Args)]
#[command(after_help = "\
Configurations: kernel (in --dir directly), mount (through `wb mount --dir --uring off`) and,
when the kernel has FUSE over io_uring on, mount-uring (`--uring on`).
Workloads (each on files of its own):
  read4k   4 KiB preads at random pages of a cached 64 MiB file            fewest requests: 1
  db       2 reads, 2 writes of 4 KiB, a 4 KiB log append, fdatasync(log)  fewest requests: 6
  files    create+write 16 KiB, close, stat, open+pread, close, rename, unlink
                                                                           fewest requests: 5
For each: operations per second through the mount and directly (medians of --repeat), the
mount's requests per operation by opcode (from .writeback/stats) and their total over the
fewest. Needs root (mounting).

Exit status: 0 on success, 1 if a run failed, 2 for bad arguments.")]
pub struct RequestsArgs {
    /// Directory served by the mount and used directly by the kernel runs
    /// (created if missing; the files are removed at the end).
    #[arg(long, default_value = "wb-data/bench")]
    pub dir: PathBuf,
    /// Operations of `read4k`; `db` runs a tenth as many transactions and
    /// `files` a twentieth as many file lives.
    #[arg(long, default_value = "20000", value_parser = parse_ops)]
    pub ops: u64,
    /// Runs per configuration; rates are medians.
    #[arg(long, default_value = "3", value_parser = parse_repeat)]
    pub repeat: usize,
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    pub json: bool,
}

fn parse_ops(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(n) if (20..=MAX_OPS).contains(&n) => Ok(n),
        _ => Err(format!("'{text}' is not a count from 20 to {MAX_OPS}")),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Workload {
    Read4k,
    Db,
    Files,
}

impl Workload {
    const ALL: [Workload; 3] = [Workload::Read4k, Workload::Db, Workload::Files];

    fn name(self) -> &'static str {
        match self {
            Workload::Read4k => "read4k",
            Workload::Db => "db",
            Workload::Files => "files",
        }
    }

    /// The fewest requests one operation needs (the module's header).
    fn fewest(self) -> u64 {
        match self {
            Workload::Read4k => 1,
            Workload::Db => 6,
            Workload::Files => 5,
        }
    }

    fn ops(self, args: &RequestsArgs) -> u64 {
        match self {
            Workload::Read4k => args.ops,
            Workload::Db => args.ops / 10,
            Workload::Files => args.ops / 20,
        }
    }
}

/// One workload's run: its operations per second, and through the mount
/// the requests it cost by opcode.
struct Done {
    workload: Workload,
    ops: u64,
    ops_per_s: f64,
    /// Requests by opcode.
    requests: BTreeMap<String, u64>,
    /// How many of them came over io_uring.
    over_uring: u64,
}

struct Bench<'a> {
    args: &'a RequestsArgs,
    dir: PathBuf,
}

impl Experiment for Bench<'_> {
    /// "kernel", "mount" (over /dev/fuse) or "mount-uring".
    type Setup = &'static str;
    type Run = Vec<Done>;

    fn name(&self, config: &&'static str) -> String {
        config.to_string()
    }

    fn run_once(
        &mut self,
        &config: &&'static str,
        _: &str,
        _: &mut Notes,
    ) -> Result<Vec<Done>, BenchError> {
        let name = format!("wb-requests-{config}");
        let files = super::cleanup::TempFile::new(self.dir.join(&name));
        let _ = std::fs::remove_dir_all(files.path());
        if config != "kernel" {
            let uring = if config == "mount-uring" { "on" } else { "off" };
            let mount = Mount::start_args(&self.dir, &[], &["--uring", uring])?;
            let stats = mount.path().join(".writeback/stats");
            let result = run_all(&mount.path().join(&name), self.args, Some(&stats));
            mount.stop()?;
            result
        } else {
            run_all(files.path(), self.args, None)
        }
    }

    fn describe(&self, label: &str, runs: &Vec<Done>) -> Vec<String> {
        runs.iter()
            .map(|d| format!("{label}: {} {:.0} ops/s", d.workload.name(), d.ops_per_s))
            .collect()
    }
}

pub fn run(args: RequestsArgs, html: Option<HtmlFile>) -> Result<(), BenchError> {
    let dir = prepare_dir(&args.dir)?;
    progress!(
        "{} operations per workload run, in {}",
        args.ops,
        dir.display()
    );
    let mut exp = Bench { args: &args, dir };
    let mut configs = vec!["kernel", "mount"];
    match wb_fuse::uring_available() {
        Ok(()) => configs.push("mount-uring"),
        Err(why) => progress!("the mount over /dev/fuse only: {why}"),
    }
    let measured = harness::run(&mut exp, configs, args.repeat, &mut Notes::new())?;
    let Some((kernel, mounts)) = measured.split_first() else {
        return Err(BenchError::Failed("no configuration ran".into()));
    };
    let mut rows = Vec::new();
    for mount in mounts {
        for (i, &w) in Workload::ALL.iter().enumerate() {
            let last = mount.runs.last();
            rows.push(Row {
                config: mount.setup,
                workload: w,
                kernel_ops_per_s: median_of(&kernel.runs, |r| r[i].ops_per_s),
                mount_ops_per_s: median_of(&mount.runs, |r| r[i].ops_per_s),
                // The last run's counts (they hardly vary from run to run).
                per_op: last.map_or_else(BTreeMap::new, |r| per_op(&r[i])),
                over_uring: last.map_or(0.0, |r| over_uring(&r[i])),
            });
        }
    }
    let report = Report::new(render(&rows), to_json(&rows));
    Output::new("wb bench requests", args.json, html).publish(report)
}

/// A workload's figures for the report.
struct Row {
    /// "mount" or "mount-uring".
    config: &'static str,
    workload: Workload,
    kernel_ops_per_s: f64,
    mount_ops_per_s: f64,
    /// Requests per operation by opcode, without the zeros.
    per_op: BTreeMap<String, f64>,
    /// The share of the requests that came over io_uring.
    over_uring: f64,
}

fn over_uring(done: &Done) -> f64 {
    let all: u64 = done.requests.values().sum();
    done.over_uring as f64 / all.max(1) as f64
}

impl Row {
    fn total(&self) -> f64 {
        self.per_op.values().sum()
    }
}

fn per_op(done: &Done) -> BTreeMap<String, f64> {
    done.requests
        .iter()
        .filter(|(_, &n)| n > 0)
        .map(|(op, &n)| (op.clone(), n as f64 / done.ops.max(1) as f64))
        .collect()
}

/// Runs every workload in `dir`; with `stats` (through the mount),
/// counts each one's requests.
fn run_all(dir: &Path, args: &RequestsArgs, stats: Option<&Path>) -> Result<Vec<Done>, BenchError> {
    std::fs::create_dir_all(dir).map_err(|e| BenchError::failed(dir.display(), e))?;
    let mut done = Vec::new();
    for w in Workload::ALL {
        let ops = w.ops(args);
        let mut state = Prepared::new(w, dir)?;
        let counts = stats.map(RequestCounter::start).transpose()?;
        let started = Instant::now();
        state.run(ops)?;
        let secs = started.elapsed().as_secs_f64();
        let mut requests = counts.map(|c| c.finish()).transpose()?.unwrap_or_default();
        let over_uring = requests.remove(OVER_URING).unwrap_or(0);
        done.push(Done {
            workload: w,
            ops,
            ops_per_s: ops as f64 / secs.max(1e-9),
            requests,
            over_uring,
        });
    }
    Ok(done)
}

/// The key under which a reading of the stats keeps how many requests
/// came over io_uring (taken out of the opcodes once counted: `run_all`).
const OVER_URING: &str = "(over io_uring)";

/// `.writeback/stats`' request counts by opcode, and under `OVER_URING`
/// how many came over io_uring.
fn request_counts(stats: &Path) -> Result<BTreeMap<String, u64>, BenchError> {
    let text =
        std::fs::read_to_string(stats).map_err(|e| BenchError::failed(stats.display(), e))?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter_map(|(k, v)| {
            let op = match k {
                "fuse_requests_over_uring_count" => OVER_URING,
                _ => k.strip_prefix("fuse_request_")?.strip_suffix("_count")?,
            };
            Some((op.to_string(), v.parse().ok()?))
        })
        .collect())
}

/// Counts a workload's requests: a reading before it, and what one
/// reading of the stats costs, to take off the difference.
struct RequestCounter<'a> {
    stats: &'a Path,
    before: BTreeMap<String, u64>,
    reading: BTreeMap<String, u64>,
}

impl<'a> RequestCounter<'a> {
    fn start(stats: &'a Path) -> Result<RequestCounter<'a>, BenchError> {
        let first = request_counts(stats)?;
        let before = request_counts(stats)?;
        let reading = diff(&before, &first, &BTreeMap::new());
        Ok(RequestCounter {
            stats,
            before,
            reading,
        })
    }

    fn finish(self) -> Result<BTreeMap<String, u64>, BenchError> {
        Ok(diff(
            &request_counts(self.stats)?,
            &self.before,
            &self.reading,
        ))
    }
}

/// `after - before - cost`, by opcode (never below zero).
fn diff(
    after: &BTreeMap<String, u64>,
    before: &BTreeMap<String, u64>,
    cost: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    let get = |m: &BTreeMap<String, u64>, k: &str| m.get(k).copied().unwrap_or(0);
    after
        .iter()
        .map(|(k, &a)| (k.clone(), a.saturating_sub(get(before, k) + get(cost, k))))
        .collect()
}

/// A workload's files, made before it is timed.
struct Prepared {
    workload: Workload,
    dir: PathBuf,
    data: Option<File>,
    log: Option<File>,
    rng: SplitMix64,
}

impl Prepared {
    fn new(workload: Workload, dir: &Path) -> Result<Prepared, BenchError> {
        let rng = SplitMix64::seed_from_u64(1);
        let (mut data, mut log) = (None, None);
        if workload != Workload::Files {
            let path = dir.join(format!("{}.data", workload.name()));
            let file = fill(&path)?;
            data = Some(file);
        }
        if workload == Workload::Db {
            let path = dir.join("db.log");
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| BenchError::failed(path.display(), e))?;
            log = Some(file);
        }
        Ok(Prepared {
            workload,
            dir: dir.to_path_buf(),
            data,
            log,
            rng,
        })
    }

    fn run(&mut self, ops: u64) -> Result<(), BenchError> {
        let fail = |what: &str, e: std::io::Error| BenchError::failed(what, e);
        let mut page = vec![0u8; PAGE as usize];
        let pages = FILE_BYTES / PAGE;
        for i in 0..ops {
            match (self.workload, &self.data, &self.log) {
                (Workload::Read4k, Some(data), _) => {
                    let at = self.rng.next_u64() % pages * PAGE;
                    data.read_exact_at(&mut page, at)
                        .map_err(|e| fail("pread", e))?;
                }
                (Workload::Db, Some(data), Some(log)) => {
                    for _ in 0..2 {
                        let at = self.rng.next_u64() % pages * PAGE;
                        data.read_exact_at(&mut page, at)
                            .map_err(|e| fail("pread", e))?;
                    }
                    for _ in 0..2 {
                        let at = self.rng.next_u64() % pages * PAGE;
                        data.write_all_at(&page, at)
                            .map_err(|e| fail("pwrite", e))?;
                    }
                    (&*log)
                        .write_all(&page)
                        .map_err(|e| fail("log append", e))?;
                    log.sync_data().map_err(|e| fail("fdatasync", e))?;
                }
                (Workload::Files, _, _) => self.file_life(i)?,
                _ => return Err(BenchError::Failed("a workload without its files".into())),
            }
        }
        Ok(())
    }

    /// One small file's life (the module's header).
    fn file_life(&mut self, i: u64) -> Result<(), BenchError> {
        let path = self.dir.join(format!("f{i}"));
        let moved = self.dir.join(format!("g{i}"));
        let fail = |what: &str, e: std::io::Error| {
            BenchError::failed(format!("{}: {what}", path.display()), e)
        };
        let mut content = vec![0u8; SMALL_FILE_BYTES];
        self.rng.fill_bytes(&mut content);
        File::create(&path)
            .and_then(|mut f| f.write_all(&content))
            .map_err(|e| fail("create and write", e))?;
        std::fs::metadata(&path).map_err(|e| fail("stat", e))?;
        File::open(&path)
            .and_then(|f| f.read_exact_at(&mut content, 0))
            .map_err(|e| fail("open and read", e))?;
        std::fs::rename(&path, &moved).map_err(|e| fail("rename", e))?;
        std::fs::remove_file(&moved).map_err(|e| fail("unlink", e))
    }
}

/// A file of `FILE_BYTES` of random data, written, synced and read twice
/// (cached), opened for reading and writing.
fn fill(path: &Path) -> Result<File, BenchError> {
    super::db_copy::files::make_hot(path, FILE_BYTES)?;
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| BenchError::failed(path.display(), e))
}

fn render(rows: &[Row]) -> Doc {
    let mut rates = Table::new(&[
        "config",
        "workload",
        "kernel ops/s",
        "mount ops/s",
        "mount/kernel",
    ]);
    let mut requests = Table::new(&[
        "config",
        "workload",
        "requests/op",
        "fewest",
        "over fewest",
        "over io_uring",
        "by opcode",
    ]);
    for r in rows {
        rates.row(vec![
            r.config.to_string(),
            r.workload.name().to_string(),
            rate(r.kernel_ops_per_s),
            rate(r.mount_ops_per_s),
            ratio(Some(r.mount_ops_per_s), Some(r.kernel_ops_per_s)),
        ]);
        let by_op: Vec<String> = r
            .per_op
            .iter()
            .map(|(op, n)| format!("{op} {n:.2}"))
            .collect();
        requests.row(vec![
            r.config.to_string(),
            r.workload.name().to_string(),
            format!("{:.2}", r.total()),
            r.workload.fewest().to_string(),
            ratio(Some(r.total()), Some(r.workload.fewest() as f64)),
            format!("{:.0}%", 100.0 * r.over_uring),
            by_op.join(", "),
        ]);
    }
    let mut doc = Doc::new();
    doc.push_str("operations per second (medians)\n");
    doc.table(rates);
    doc.push_str("\nthe mount's FUSE requests per operation\n");
    doc.table(requests);
    doc
}

fn to_json(rows: &[Row]) -> serde_json::Value {
    let workloads: Vec<_> = rows
        .iter()
        .map(|r| {
            json!({
                "config": r.config,
                "workload": r.workload.name(),
                "kernel_ops_per_s": r.kernel_ops_per_s,
                "mount_ops_per_s": r.mount_ops_per_s,
                "requests_per_op": r.total(),
                "fewest_requests_per_op": r.workload.fewest(),
                "requests_per_op_by_opcode": r.per_op,
                "share_over_uring": r.over_uring,
            })
        })
        .collect();
    json!({ "bench": "requests", "workloads": workloads })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_difference_takes_off_the_reading_and_never_goes_below_zero() {
        let m = |pairs: &[(&str, u64)]| -> BTreeMap<String, u64> {
            pairs.iter().map(|&(k, v)| (k.to_string(), v)).collect()
        };
        let before = m(&[("read", 10), ("open", 4), ("write", 0)]);
        let after = m(&[("read", 31), ("open", 5), ("write", 7)]);
        let reading = m(&[("read", 1), ("open", 1), ("release", 1)]);
        assert_eq!(
            diff(&after, &before, &reading),
            m(&[("read", 20), ("open", 0), ("write", 7)])
        );
    }
}
