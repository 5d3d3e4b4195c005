//! `wb bench cpu`: the CPU cost of the library's write path, in CPU seconds
//! (user + sys) per GiB written.
//!
//! Each run is a child process (this binary re-executed through
//! `/proc/self/exe` with the hidden `--child FILE`) that builds a [`Cache`]
//! of `--memory`, writes `--size` bytes sequentially into one new file with
//! [`writeback::File::write_at`] calls of `--block-size`, calls `sync_data`
//! and exits. With the defaults (4 GiB through a 1 GiB cache) the writer is
//! throttled and the data written back while it runs, so the child's CPU
//! time covers the whole write path: page tracking, the copy into the
//! cache, dirty throttling, building and submitting the O_DIRECT writeback
//! I/O and handling its completions.
//!
//! The parent reads the child's CPU time from the kernel's accounting of
//! reaped children (`getrusage(RUSAGE_CHILDREN)` before and after it waits
//! for the child), so none of its own work is counted. The child times its
//! write + sync itself (wall time, MiB/s) and reports it in a small JSON
//! file that stands in for its standard output.

use super::cleanup::{ChildGuard, TempFile};
use super::doc::Doc;
use super::table::Table;
use super::{
    free_bytes, human_bytes, median, parse_repeat, parse_size, prepare_dir, progress, BenchError,
    SplitMix64, MIB,
};
use crate::html_file::HtmlFile;
use clap::Args;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;
use writeback::{Cache, OpenOptions, Writeout};

const GIB: f64 = 1024.0 * MIB;
/// The file each run writes (in --dir; removed after every run).
const DATA_FILE: &str = "wb-bench-cpu.dat";
/// Where a child writes its report (its standard output).
const REPORT_FILE: &str = "wb-bench-cpu.report.json";
/// Largest --block-size: the child allocates one buffer of it.
const MAX_BLOCK: u64 = 1 << 30;
/// Free space left untouched on the filesystem of --dir.
const SPACE_MARGIN: u64 = 256 << 20;
const SEED: u64 = 0x0c9b_e1c4;

#[derive(Args)]
#[command(after_help = "\
What is measured: the CPU cost of the writeback library's write path. One run is a child
process (this binary, re-executed) that builds a Cache with --memory, writes --size bytes
sequentially into one new file in --dir with File::write_at calls of --block-size, then calls
File::sync_data and exits. The run's CPU time is the child's user + sys time as the kernel
accounts it for the reaped child (getrusage RUSAGE_CHILDREN), so nothing of this parent
process is counted; it includes the child's start and the cache's setup and teardown (some
tens of ms, little next to GiBs of writes). Wall time and MiB/s cover the first write to the
end of the sync, timed in the child.

Why: the library sits on every write of the programs using it. With a file larger than the
cache (4 GiB through 1 GiB by default) the writer is throttled and the data written back
while it runs, so the CPU seconds per GiB cover page tracking, the copy into the cache,
dirty throttling, building and submitting the O_DIRECT writeback I/O (io_uring or the thread
pool) and handling its completions: the overhead to watch when the write path changes. It
depends much less on the disk than wall time and MiB/s do.

Each of --repeat runs is reported, and the medians. The file is removed after every run
(also on errors and Ctrl-C). --dir must be on a filesystem with O_DIRECT (checked first)
and have room for --size. Before the first run the device of --dir is calibrated once (about
3 s the first time, then remembered in --data-dir), so that children only read the
remembered profile; --no-calibrate skips that, and the automatic wbt target then assumes
1 ms reads.

Quick run: wb bench cpu --size 1GiB --memory 256MiB --repeat 1

Exit status: 0 on success, 1 if a run failed, 2 for bad arguments or an unusable --dir;
130 on Ctrl-C.")]
pub struct CpuArgs {
    /// Directory for the benchmark's file (created if missing; the file is removed after each run).
    #[arg(long, default_value = "wb-data/bench")]
    pub dir: PathBuf,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Bytes each run writes into its file.
    #[arg(long, default_value = "4GiB", value_parser = parse_size, value_name = "SIZE")]
    pub size: u64,
    /// Bytes per write_at call (any size from 1 byte to 1GiB, at most --size).
    #[arg(long, default_value = "1MiB", value_parser = parse_size, value_name = "SIZE")]
    pub block_size: u64,
    /// The cache's memory budget (its dirty limits are 20% / 10% of it).
    #[arg(long, default_value = "1GiB", value_parser = parse_size, value_name = "SIZE")]
    pub memory: u64,
    /// Runs, each in a new child process; each is reported, and the medians.
    #[arg(long, default_value = "3", value_parser = parse_repeat)]
    pub repeat: usize,
    /// Where the engine remembers device calibrations.
    #[arg(long, default_value = "wb-data", value_name = "DIR")]
    pub data_dir: PathBuf,
    /// Do not measure the device; the automatic wbt target assumes 1 ms idle reads.
    #[arg(long)]
    pub no_calibrate: bool,
    /// Internal: be the child of a run, writing FILE (set by `wb bench cpu` itself).
    /// How writeback hands pages to the device: zero-copy (from the
    /// cache's frames) or copy (each page copied into an I/O buffer first,
    /// the path before zero-copy writeout).
    #[arg(long, default_value = "zero-copy", value_parser = parse_writeout)]
    pub writeout: Writeout,
    #[arg(long, hide = true, value_name = "FILE")]
    pub child: Option<PathBuf>,
}

/// One run, as measured.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Run {
    user_s: f64,
    sys_s: f64,
    wall_s: f64,
}

impl Run {
    fn cpu_s(&self) -> f64 {
        self.user_s + self.sys_s
    }

    fn cpu_s_per_gib(&self, size: u64) -> f64 {
        self.cpu_s() / (size as f64 / GIB)
    }

    fn mib_s(&self, size: u64) -> f64 {
        if self.wall_s > 0.0 {
            size as f64 / MIB / self.wall_s
        } else {
            0.0
        }
    }
}

/// What every run shares.
#[derive(Clone, Copy, Debug)]
struct Setup {
    size: u64,
    block_size: u64,
    memory: u64,
}

pub fn run(args: CpuArgs, html: Option<HtmlFile>) -> Result<(), BenchError> {
    let setup = validate(args.size, args.block_size, args.memory)?;
    if let Some(file) = &args.child {
        return child(&args, setup, file);
    }
    let dir = prepare_dir(&args.dir)?;
    let free = free_bytes(&dir)?;
    if free < setup.size.saturating_add(SPACE_MARGIN) {
        return Err(BenchError::BadInput(format!(
            "--dir {}: not enough free space: {} available, a run needs --size {} plus {} \
             to spare; pick a smaller --size or another --dir",
            dir.display(),
            human_bytes(free),
            human_bytes(setup.size),
            human_bytes(SPACE_MARGIN)
        )));
    }
    if !args.no_calibrate {
        progress!(
            "device of {}: calibrating it if new (about 3 s, remembered in {})",
            dir.display(),
            args.data_dir.display()
        );
        writeback::io::calibrate(&dir, &args.data_dir, writeback::CALIBRATION_BUDGET).map_err(
            |e| BenchError::failed(format!("calibrating the device of {}", dir.display()), e),
        )?;
    }

    let mut runs = Vec::with_capacity(args.repeat);
    let mut backend = String::new();
    for i in 1..=args.repeat {
        progress!(
            "run {i}/{}: writing {} in {} writes through a {} cache, then sync_data",
            args.repeat,
            human_bytes(setup.size),
            exact_bytes(setup.block_size),
            exact_bytes(setup.memory)
        );
        let (run, report) = run_child(&args, setup, &dir)?;
        progress!(
            "run {i}/{}: cpu {:.2} s (user {:.2} s, sys {:.2} s), {:.3} cpu s/GiB, wall {:.1} s, \
             {:.0} MiB/s; {} written back ({} backend)",
            args.repeat,
            run.cpu_s(),
            run.user_s,
            run.sys_s,
            run.cpu_s_per_gib(setup.size),
            run.wall_s,
            run.mib_s(setup.size),
            human_bytes(report.written_bytes),
            report.io_backend
        );
        if report.written_bytes < setup.size {
            progress!(
                "run {i}: note: the engine counted only {} of {} written back",
                report.written_bytes,
                setup.size
            );
        }
        backend = report.io_backend;
        runs.push(run);
    }

    let doc = render(setup, &runs, &backend, args.writeout);
    if args.json {
        println!("{}", to_json(setup, &runs, args.writeout));
    } else {
        print!("{doc}");
    }
    super::write_html(html, "wb bench cpu", &doc)
}

/// Checks the sizes together (each alone is checked by clap): bad ones are
/// the user's to fix, so they are [`BenchError::BadInput`].
fn validate(size: u64, block_size: u64, memory: u64) -> Result<Setup, BenchError> {
    if size == 0 || block_size == 0 {
        return Err(BenchError::BadInput(
            "--size and --block-size must be more than 0".into(),
        ));
    }
    if block_size > MAX_BLOCK {
        return Err(BenchError::BadInput(format!(
            "--block-size {block_size}: at most {} (one buffer of it is allocated)",
            exact_bytes(MAX_BLOCK)
        )));
    }
    if size < block_size {
        return Err(BenchError::BadInput(format!(
            "--size {size} is smaller than --block-size {block_size}; \
             a run writes at least one block"
        )));
    }
    wb_engine::Config::default()
        .set("memory", &memory.to_string())
        .map_err(|e| BenchError::BadInput(format!("--memory: {e}")))?;
    Ok(Setup {
        size,
        block_size,
        memory,
    })
}

/// What a child reports on its standard output.
struct ChildReport {
    wall_s: f64,
    written_bytes: u64,
    io_backend: String,
}

/// One run: a child process writes the file; returns its measurement.
fn parse_writeout(text: &str) -> Result<Writeout, String> {
    match text {
        "zero-copy" => Ok(Writeout::ZeroCopy),
        "copy" => Ok(Writeout::Copy),
        _ => Err(format!("'{text}' is not a writeout (zero-copy or copy)")),
    }
}

fn writeout_name(writeout: Writeout) -> &'static str {
    match writeout {
        Writeout::ZeroCopy => "zero-copy",
        Writeout::Copy => "copy",
    }
}

fn run_child(args: &CpuArgs, setup: Setup, dir: &Path) -> Result<(Run, ChildReport), BenchError> {
    // Both files are removed when this returns, however it returns.
    let data = TempFile::new(dir.join(DATA_FILE));
    let report_file = TempFile::new(dir.join(REPORT_FILE));
    // A file left by a killed earlier run would not be new.
    match std::fs::remove_file(data.path()) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(BenchError::failed(data.path().display(), e))
        }
        _ => {}
    }
    let stdout = std::fs::File::create(report_file.path())
        .map_err(|e| BenchError::failed(report_file.path().display(), e))?;

    // This very binary, even if a rebuild has replaced the file since it started.
    let mut cmd = Command::new("/proc/self/exe");
    cmd.args(["bench", "cpu", "--child"])
        .arg(data.path())
        .arg("--size")
        .arg(setup.size.to_string())
        .arg("--block-size")
        .arg(setup.block_size.to_string())
        .arg("--memory")
        .arg(setup.memory.to_string())
        .arg("--data-dir")
        .arg(&args.data_dir)
        .arg("--writeout")
        .arg(writeout_name(args.writeout))
        .stdin(Stdio::null())
        .stdout(stdout);
    if args.no_calibrate {
        cmd.arg("--no-calibrate");
    }

    let before = children_cpu()?;
    let mut child =
        ChildGuard::spawn(&mut cmd).map_err(|e| BenchError::failed("starting the child run", e))?;
    let status = child
        .wait()
        .map_err(|e| BenchError::failed("waiting for the child run", e))?;
    let after = children_cpu()?;
    if !status.success() {
        return Err(BenchError::Failed(format!(
            "the child run failed ({status}); its messages are above"
        )));
    }
    let text = std::fs::read_to_string(report_file.path())
        .map_err(|e| BenchError::failed(report_file.path().display(), e))?;
    let report = parse_child_report(&text)
        .map_err(|e| BenchError::Failed(format!("the child run's report '{text}': {e}")))?;
    let run = Run {
        user_s: (after.0 - before.0).max(0.0),
        sys_s: (after.1 - before.1).max(0.0),
        wall_s: report.wall_s,
    };
    Ok((run, report))
}

/// User and system seconds of all reaped children of this process so far.
fn children_cpu() -> Result<(f64, f64), BenchError> {
    rusage_cpu(libc::RUSAGE_CHILDREN, "getrusage(RUSAGE_CHILDREN)")
}

/// User and system seconds of this process (all its threads) so far.
pub(crate) fn own_cpu() -> Result<(f64, f64), BenchError> {
    rusage_cpu(libc::RUSAGE_SELF, "getrusage(RUSAGE_SELF)")
}

fn rusage_cpu(who: libc::c_int, what: &str) -> Result<(f64, f64), BenchError> {
    // SAFETY: rusage is plain integers, for which all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes into the struct we pass, which outlives the call.
    let rc = unsafe { libc::getrusage(who, &mut usage) };
    if rc != 0 {
        return Err(BenchError::failed(what, std::io::Error::last_os_error()));
    }
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok((seconds(usage.ru_utime), seconds(usage.ru_stime)))
}

fn parse_child_report(text: &str) -> Result<ChildReport, String> {
    let v: serde_json::Value = serde_json::from_str(text.trim()).map_err(|e| e.to_string())?;
    let wall_s = v["wall_s"]
        .as_f64()
        .filter(|w| w.is_finite() && *w >= 0.0)
        .ok_or("no wall_s")?;
    let written_bytes = v["written_bytes"].as_u64().ok_or("no written_bytes")?;
    let io_backend = v["io_backend"].as_str().unwrap_or("?").to_string();
    Ok(ChildReport {
        wall_s,
        written_bytes,
        io_backend,
    })
}

/// The child's side of a run: the write and the sync, measured, reported
/// as one JSON line on standard output. Nothing else is done here, as all
/// of this process's CPU time is counted.
fn child(args: &CpuArgs, setup: Setup, path: &Path) -> Result<(), BenchError> {
    let block = usize::try_from(setup.block_size)
        .map_err(|_| BenchError::BadInput("--block-size too large".into()))?;
    let cache = Cache::builder()
        .knob("memory", &setup.memory.to_string())
        .map_err(|e| BenchError::BadInput(format!("--memory: {e}")))?
        .data_dir(&args.data_dir)
        .calibrate(!args.no_calibrate)
        .writeout(args.writeout)
        .build()
        .map_err(|e| BenchError::failed("starting the cache", e))?;
    let fail = |e: writeback::Error| BenchError::failed(path.display(), e);
    let file = cache
        .open(path, OpenOptions { create: true })
        .map_err(fail)?;
    let mut buf = vec![0u8; block];
    SplitMix64::seed_from_u64(SEED).fill_bytes(&mut buf);

    let start = Instant::now();
    let mut offset = 0u64;
    while offset < setup.size {
        let len = (setup.size - offset).min(setup.block_size) as usize;
        // Every block distinct, so nothing below can deduplicate it.
        if len >= 8 {
            buf[..8].copy_from_slice(&offset.to_ne_bytes());
        }
        file.write_at(&buf[..len], offset).map_err(fail)?;
        offset += len as u64;
    }
    file.sync_data().map_err(fail)?;
    let wall_s = start.elapsed().as_secs_f64();

    let written_bytes = cache.stats().written_pages * wb_engine::PAGE_SIZE;
    let io_backend = cache.io_backend();
    drop(file);
    drop(cache);
    println!(
        "{}",
        json!({"wall_s": wall_s, "written_bytes": written_bytes, "io_backend": io_backend})
    );
    Ok(())
}

fn to_json(setup: Setup, runs: &[Run], writeout: Writeout) -> serde_json::Value {
    let list: Vec<_> = runs
        .iter()
        .map(|r| {
            json!({
                "cpu_s": r.cpu_s(),
                "user_s": r.user_s,
                "sys_s": r.sys_s,
                "wall_s": r.wall_s,
                "cpu_s_per_gib": r.cpu_s_per_gib(setup.size),
                "mib_s": r.mib_s(setup.size),
            })
        })
        .collect();
    json!({
        "size_bytes": setup.size,
        "block_size": setup.block_size,
        "memory_bytes": setup.memory,
        "writeout": writeout_name(writeout),
        "runs": list,
        "median_cpu_s_per_gib": median_of(runs, |r| r.cpu_s_per_gib(setup.size)),
        "median_mib_s": median_of(runs, |r| r.mib_s(setup.size)),
    })
}

fn median_of(runs: &[Run], f: impl Fn(&Run) -> f64) -> f64 {
    let values: Vec<f64> = runs.iter().map(f).collect();
    median(&values)
}

fn render(setup: Setup, runs: &[Run], backend: &str, writeout: Writeout) -> Doc {
    let mut t = Table::new(&[
        "run",
        "cpu s",
        "user s",
        "sys s",
        "wall s",
        "cpu s/GiB",
        "MiB/s",
    ]);
    for (i, r) in runs.iter().enumerate() {
        t.row(vec![
            (i + 1).to_string(),
            format!("{:.2}", r.cpu_s()),
            format!("{:.2}", r.user_s),
            format!("{:.2}", r.sys_s),
            format!("{:.2}", r.wall_s),
            format!("{:.3}", r.cpu_s_per_gib(setup.size)),
            format!("{:.0}", r.mib_s(setup.size)),
        ]);
    }
    t.row(vec![
        "median".into(),
        format!("{:.2}", median_of(runs, Run::cpu_s)),
        format!("{:.2}", median_of(runs, |r| r.user_s)),
        format!("{:.2}", median_of(runs, |r| r.sys_s)),
        format!("{:.2}", median_of(runs, |r| r.wall_s)),
        format!("{:.3}", median_of(runs, |r| r.cpu_s_per_gib(setup.size))),
        format!("{:.0}", median_of(runs, |r| r.mib_s(setup.size))),
    ]);
    let mut out = Doc::from(format!(
        "Sequential write of {} in {} write_at calls into one new file, then sync_data, \
         through a cache of {} ({backend} backend, {} writeout); CPU time (user + sys) of the child process \
         doing it, {} run{} (medians of each column).\n\n",
        human_bytes(setup.size),
        exact_bytes(setup.block_size),
        exact_bytes(setup.memory),
        writeout_name(writeout),
        runs.len(),
        if runs.len() == 1 { "" } else { "s" }
    ));
    out.table(t);
    out
}

/// "1 MiB", "12 KiB", "4097 bytes": a size exactly, in the largest unit that divides it.
fn exact_bytes(bytes: u64) -> String {
    for (unit, name) in [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{} {name}", bytes / unit);
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB_U: u64 = 1 << 30;

    #[test]
    fn validate_rejects_what_cannot_run_and_accepts_odd_blocks() {
        for (size, block, memory) in [
            (0, 4096, GIB_U),              // nothing to write
            (GIB_U, 0, GIB_U),             // no block
            (4096, 8192, GIB_U),           // size smaller than a block
            (4 * GIB_U, 2 * GIB_U, GIB_U), // block over the cap
            (GIB_U, 4096, 1 << 20),        // memory under the engine's minimum
        ] {
            let err = validate(size, block, memory).expect_err("invalid");
            assert!(matches!(err, BenchError::BadInput(_)), "{err}");
        }
        let ok = validate(GIB_U, 1000, 64 << 20).expect("any block of at least a byte");
        assert_eq!((ok.size, ok.block_size, ok.memory), (GIB_U, 1000, 64 << 20));
        assert!(validate(1, 1, GIB_U).is_ok());
    }

    #[test]
    fn json_has_runs_and_medians() {
        let setup = Setup {
            size: 2 * GIB_U,
            block_size: 1 << 20,
            memory: GIB_U,
        };
        let runs = [
            Run {
                user_s: 1.0,
                sys_s: 3.0,
                wall_s: 4.0,
            },
            Run {
                user_s: 0.5,
                sys_s: 1.5,
                wall_s: 8.0,
            },
            Run {
                user_s: 1.0,
                sys_s: 2.0,
                wall_s: 2.0,
            },
        ];
        let v = to_json(setup, &runs, Writeout::ZeroCopy);
        assert_eq!(v["writeout"], "zero-copy");
        assert_eq!(v["size_bytes"], 2 * GIB_U);
        assert_eq!(v["block_size"], 1 << 20);
        assert_eq!(v["memory_bytes"], GIB_U);
        let list = v["runs"].as_array().expect("runs");
        assert_eq!(list.len(), 3);
        assert_eq!(list[0]["cpu_s"], 4.0);
        assert_eq!(list[0]["user_s"], 1.0);
        assert_eq!(list[0]["sys_s"], 3.0);
        assert_eq!(list[0]["wall_s"], 4.0);
        assert_eq!(list[0]["cpu_s_per_gib"], 2.0);
        assert_eq!(list[0]["mib_s"], 512.0);
        // cpu s/GiB: 2.0, 1.0, 1.5; MiB/s: 512, 256, 1024.
        assert_eq!(v["median_cpu_s_per_gib"], 1.5);
        assert_eq!(v["median_mib_s"], 512.0);
        let text = render(setup, &runs, "io_uring", Writeout::Copy).to_string();
        assert!(text.contains("(io_uring backend, copy writeout)"), "{text}");
        assert!(text.contains("median"), "{text}");
        assert!(text.contains("1.500"), "{text}");
    }

    #[test]
    fn child_report_parses_or_explains() {
        let r = parse_child_report(
            "{\"wall_s\": 1.5, \"written_bytes\": 4096, \"io_backend\": \"threads\"}\n",
        )
        .expect("a report");
        assert_eq!((r.wall_s, r.written_bytes), (1.5, 4096));
        assert_eq!(r.io_backend, "threads");
        assert!(parse_child_report("").is_err());
        assert!(parse_child_report("{\"wall_s\": -1, \"written_bytes\": 0}").is_err());
    }

    #[test]
    fn exact_bytes_picks_the_unit_that_divides() {
        assert_eq!(exact_bytes(1 << 20), "1 MiB");
        assert_eq!(exact_bytes(12 << 10), "12 KiB");
        assert_eq!(exact_bytes(4097), "4097 bytes");
        assert_eq!(exact_bytes(3 << 30), "3 GiB");
    }
}
