//! `wb bench cached`: the cost of 4 KiB reads and writes of data that is
//! already cached, through the engine (`File::read_at` / `write_at`) and
//! through the kernel's page cache (`pread` / `pwrite`), with 1 and 2
//! threads.
//!
//! Both files are 64 MiB, written and then read once so every page is
//! cached. The engine's cache has 256 MiB, so nothing is evicted, and its
//! background threshold is raised to 40% (102 MiB) so that even with the
//! whole file dirty no background writeback starts during the runs; the
//! kernel's own thresholds (GiBs on most machines) are far above 64 MiB.
//! Both are checked and reported: writeback the engine did (its stats) and
//! pages the kernel wrote (`nr_written` in /proc/vmstat, machine-wide).

mod measure;
mod report;

use super::cleanup::TempFile;
use super::harness::{self, median_of, Experiment, Notes, Output, Report, Turn};
use super::{parse_repeat, parse_seconds, prepare_dir, progress, table, BenchError};
use crate::html_file::HtmlFile;
use clap::Args;
use measure::{device_pages_read, fill_engine, fill_kernel, measure, nr_written};
use report::Writeback;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::Duration;
use writeback::Cache;

pub(super) const FILE_SIZE: u64 = 64 << 20;
pub(super) const BLOCK: usize = 4096;
pub(super) const FILL_CHUNK: usize = 1 << 20;
pub(super) const MEMORY: &str = "256MiB";
/// Raised so a fully dirty file (25% of memory) stays under it.
pub(super) const BACKGROUND_RATIO: &str = "40";
const DIRTY_RATIO: &str = "50";
pub(super) const SEED: u64 = 0x00c0_ffee;
/// Operations between two looks at the clock.
pub(super) const CLOCK_EVERY: u64 = 64;

#[derive(Args)]
#[command(after_help = "\
Runs, for --seconds each and --repeat times (medians reported): kernel-pread, engine-read,
kernel-pwrite, engine-write, with 1 and 2 threads, 4 KiB at random 4 KiB-aligned offsets
(fixed seed) of a 64 MiB file that is fully cached (engine: memory 256MiB,
dirty_background_ratio 40 so no background writeback starts; kernel: the file's pages in the
page cache).

Exit status: 0 on success, 1 if a run failed, 2 for bad arguments or an unusable --dir.")]
pub struct CachedArgs {
    /// Directory for the benchmark's files (created if missing; they are removed at the end).
    #[arg(long, default_value = "wb-data/bench")]
    pub dir: PathBuf,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Seconds each measurement runs.
    #[arg(long, default_value = "3", value_parser = parse_seconds, value_name = "S")]
    pub seconds: u64,
    /// Runs of each measurement (interleaved); medians are reported.
    #[arg(long, default_value = "3", value_parser = parse_repeat)]
    pub repeat: usize,
    /// Also run the engine with a trace being recorded (Cache::start_trace,
    /// as `wb run --trace` does): rows engine-read-traced and
    /// engine-write-traced, with their ratio to the engine untraced.
    #[arg(long)]
    pub traced: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Op {
    Read,
    Write,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Side {
    Kernel,
    Engine,
    /// The engine with a trace being recorded (`--traced`).
    EngineTraced,
}

pub fn name(side: Side, op: Op) -> &'static str {
    match (side, op) {
        (Side::Kernel, Op::Read) => "kernel-pread",
        (Side::Engine, Op::Read) => "engine-read",
        (Side::Kernel, Op::Write) => "kernel-pwrite",
        (Side::Engine, Op::Write) => "engine-write",
        (Side::EngineTraced, Op::Read) => "engine-read-traced",
        (Side::EngineTraced, Op::Write) => "engine-write-traced",
    }
}

/// A configuration: who does which operation, on how many threads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Case {
    pub side: Side,
    pub op: Op,
    pub threads: usize,
}

/// A configuration's ops/s (a run's, or the median of its runs).
pub struct Measurement {
    pub side: Side,
    pub op: Op,
    pub threads: usize,
    pub ops_s: f64,
}

/// One run: its ops/s and what was written back meanwhile.
struct Sample {
    pub ops_s: f64,
    writeback: Writeback,
}

/// The two files, filled and cached, and the cache holding the engine's.
struct Cached {
    cache: Cache,
    engine_file: writeback::File,
    kernel_file: std::fs::File,
    engine_path: PathBuf,
    kernel_path: PathBuf,
    seconds: Duration,
}

impl Experiment for Cached {
    type Setup = Case;
    type Run = Sample;

    fn name(&self, case: &Case) -> String {
        format!("{} x{}", name(case.side, case.op), case.threads)
    }

    fn label(&self, case: &Case, turn: Turn) -> String {
        format!("{} ({}/{})", self.name(case), turn.round, turn.rounds)
    }

    /// Starts each round clean, so nothing dirtied in an earlier one
    /// reaches dirty_expire (30 s) and gets written back during this one.
    fn prepare(&mut self, _: &Case, turn: Turn, _: &mut Notes) -> Result<(), BenchError> {
        if turn.index > 0 {
            return Ok(());
        }
        self.engine_file
            .sync_data()
            .map_err(|e| BenchError::failed(self.engine_path.display(), e))?;
        self.kernel_file
            .sync_data()
            .map_err(|e| BenchError::failed(self.kernel_path.display(), e))
    }

    fn run_once(&mut self, case: &Case, _: &str, _: &mut Notes) -> Result<Sample, BenchError> {
        if case.side == Side::EngineTraced {
            self.cache.start_trace(wb_trace::DEFAULT_CAPACITY);
        }
        let before = self.cache.stats();
        let vm_before = nr_written();
        let ops_s = self
            .ops_s(case)
            .map_err(|e| BenchError::Failed(format!("{}: {e}", name(case.side, case.op))))?;
        let after = self.cache.stats();
        // The trace itself is not kept: only its cost is measured.
        drop(self.cache.stop_trace());
        let engine = |f: fn(&writeback::Stats) -> u64| match case.side {
            Side::Engine | Side::EngineTraced => f(&after).saturating_sub(f(&before)),
            Side::Kernel => 0,
        };
        let kernel_written_pages = match (case.side, case.op) {
            (Side::Kernel, Op::Write) => match (vm_before, nr_written()) {
                (Some(b), Some(a)) => Some(a.saturating_sub(b)),
                _ => None,
            },
            _ => Some(0),
        };
        let writeback = Writeback {
            engine_written_pages: engine(|s| s.written_pages),
            engine_reclaimed: engine(|s| s.reclaimed_pages),
            engine_device_reads: engine(device_pages_read),
            kernel_written_pages,
        };
        Ok(Sample { ops_s, writeback })
    }

    fn describe(&self, label: &str, s: &Sample) -> Vec<String> {
        vec![format!("{label}: {} ops/s", table::rate(s.ops_s))]
    }
}

impl Cached {
    /// Ops/s of `case` over --seconds.
    fn ops_s(&self, case: &Case) -> Result<f64, String> {
        let blocks = FILE_SIZE / BLOCK as u64;
        let (kernel, engine) = (&self.kernel_file, &self.engine_file);
        let Case { threads, .. } = *case;
        let seconds = self.seconds;
        match (case.side, case.op) {
            (Side::Kernel, Op::Read) => measure(threads, seconds, blocks, |off, buf| {
                kernel.read_exact_at(buf, off).map_err(|e| e.to_string())
            }),
            (Side::Kernel, Op::Write) => measure(threads, seconds, blocks, |off, buf| {
                kernel.write_all_at(buf, off).map_err(|e| e.to_string())
            }),
            (Side::Engine | Side::EngineTraced, Op::Read) => {
                measure(threads, seconds, blocks, |off, buf| {
                    match engine.read_at(buf, off) {
                        Ok(n) if n == buf.len() => Ok(()),
                        Ok(n) => Err(format!("short read: {n} bytes at {off}")),
                        Err(e) => Err(e.to_string()),
                    }
                })
            }
            (Side::Engine | Side::EngineTraced, Op::Write) => {
                measure(threads, seconds, blocks, |off, buf| {
                    engine.write_at(buf, off).map_err(|e| e.to_string())
                })
            }
        }
    }
}

/// The configurations of a round, in order: reads then writes, one then
/// two threads, the kernel then the engine (then the engine traced).
fn cases(traced: bool) -> Vec<Case> {
    let sides: &[Side] = if traced {
        &[Side::Kernel, Side::Engine, Side::EngineTraced]
    } else {
        &[Side::Kernel, Side::Engine]
    };
    let mut cases = Vec::new();
    for op in [Op::Read, Op::Write] {
        for threads in [1, 2] {
            for &side in sides {
                cases.push(Case { side, op, threads });
            }
        }
    }
    cases
}

pub fn run(args: CachedArgs, html: Option<HtmlFile>) -> Result<(), BenchError> {
    let dir = prepare_dir(&args.dir)?;
    // Temp files first: dropped last, after the handles and the cache.
    let engine_path = TempFile::new(dir.join("wb-bench-cached-engine.dat"));
    let kernel_path = TempFile::new(dir.join("wb-bench-cached-kernel.dat"));
    let mut exp = fill(
        &engine_path,
        &kernel_path,
        Duration::from_secs(args.seconds),
    )?;
    let measured = harness::run(&mut exp, cases(args.traced), args.repeat, &mut Notes::new())?;
    let written = measured
        .iter()
        .flat_map(|m| &m.runs)
        .fold(Writeback::NONE, |sum, s| sum.plus(&s.writeback));
    let checks = report::checks(&written);
    let Cached {
        cache,
        engine_file,
        kernel_file,
        ..
    } = exp;
    drop(engine_file);
    drop(cache);
    drop(kernel_file);
    let results: Vec<Measurement> = measured
        .iter()
        .map(|m| Measurement {
            side: m.setup.side,
            op: m.setup.op,
            threads: m.setup.threads,
            ops_s: median_of(&m.runs, |s| s.ops_s),
        })
        .collect();
    let doc = report::render(&results, args.seconds, args.repeat, &checks);
    let mut report = Report::new(doc, report::to_json(&results));
    report.stderr_with_json = Some(checks.iter().map(|c| format!("wb bench: {c}\n")).collect());
    Output::new("wb bench cached", args.json, html).publish(report)
}

/// The cache and both files, filled and read once so every page is cached.
fn fill(
    engine_path: &TempFile,
    kernel_path: &TempFile,
    seconds: Duration,
) -> Result<Cached, BenchError> {
    let cache = Cache::builder()
        .knob("memory", MEMORY)
        .and_then(|b| b.knob("dirty_ratio", DIRTY_RATIO))
        .and_then(|b| b.knob("dirty_background_ratio", BACKGROUND_RATIO))
        .map_err(|e| BenchError::failed("configuring the cache", e))?
        // The device's read latency only tunes wbt, which cached I/O never meets.
        .calibrate(false)
        .build()
        .map_err(|e| BenchError::failed("starting the cache", e))?;
    progress!(
        "filling {} through the engine ({} backend) and {} through the page cache",
        engine_path.path().display(),
        cache.io_backend(),
        kernel_path.path().display()
    );
    let engine_file = fill_engine(&cache, engine_path.path())?;
    let kernel_file = fill_kernel(kernel_path.path())?;
    let filled = cache.stats();
    if filled.cached_pages * wb_engine::PAGE_SIZE < FILE_SIZE {
        return Err(BenchError::Failed(format!(
            "the engine holds only {} of the {} MiB file after filling it",
            (filled.cached_pages * wb_engine::PAGE_SIZE) >> 20,
            FILE_SIZE >> 20
        )));
    }
    Ok(Cached {
        cache,
        engine_file,
        kernel_file,
        engine_path: engine_path.path().to_path_buf(),
        kernel_path: kernel_path.path().to_path_buf(),
        seconds,
    })
}
