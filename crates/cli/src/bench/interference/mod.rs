//! `wb bench interference`: how much a big sequential writer hurts a 4 KiB
//! O_DIRECT random reader on the same filesystem.
//!
//! Configurations, each repeated and reported as medians:
//!
//! - `floor`: the reader alone;
//! - `kernel`: fio's buffered writer, with the kernel's dirty limits set to
//!   the engine's (20% / 10% of the engine's memory) for the run;
//! - `kernel-dontcache`: the same writes with RWF_DONTCACHE, by our own
//!   pwritev2 writer ([`crate::bench::kernel_write`]; Debian's fio has no
//!   `uncached` option), if the filesystem takes them;
//! - `kernel-kyber` / `kernel-bfq`: `kernel` with the block scheduler of the
//!   device under the directory switched to kyber / bfq for the run;
//! - `kernel-bfq-idle`, `kernel-dirty64m`, `kernel-nocache`,
//!   `kernel-direct`, `kernel-blkio`: what people reach for instead of a
//!   writeback engine (an idle I/O class, small dirty limits, dropping the
//!   written pages, O_DIRECT, a blkio write limit), set up and put back by
//!   [`kernel_configs`];
//! - `engine-wbt-off` / `engine`: the writer is this library (wbt off / auto);
//! - `engine-dontcache`: `engine` with uncached writes (WriteFlags::DONTCACHE),
//!   beside `kernel-dontcache`.
//!
//! `--sweep KNOB=V1,V2,...` runs `engine` (`mount` with `--fuse`) once more
//! per value ([`sweep`]), each a row; with `--html` the report draws
//! the frontier, reader latency against writer MiB/s ([`frontier`]).
//!
//! The reader is always the same fio job, started about a second after the
//! writer, reading a file written once up front with O_DIRECT (so it is
//! never in the kernel's page cache). Besides the ratios to the floor and
//! to `kernel`, the report compares every other configuration with the best
//! kernel configuration at each figure (`best_kernel` in JSON).

//!
//! The files: [`args`] (the command line), [`rows`] (which configurations
//! run), [`settle`] (between two runs), [`one_run`] (one run of one row,
//! with [`engine_writer`] as the engine's writer), [`report`] and
//! [`best_kernel`] (medians, tables, JSON); the configurations themselves
//! in [`configs`], what the kernel's change in [`kernel_configs`] and
//! [`blkio`].

mod args;
mod best_kernel;
mod blkio;
pub mod configs;
mod engine_writer;
mod files;
mod frontier;
pub mod kernel_configs;
mod one_run;
mod report;
mod rows;
mod settle;
pub mod sweep;

pub use args::InterferenceArgs;

use super::cleanup::TempFile;
use super::fio::{self, Fio};
use super::harness::{self, Experiment, Notes, Output, Report, Turn};
use super::sysctl::{self, engine_dirty_limits};
use super::table;
use super::{prepare_dir, progress, BenchError};
use crate::html_file::HtmlFile;
use configs::ConfigSummary;
use kernel_configs::Machine;
use one_run::RunResult;
use rows::Row;
use std::path::{Path, PathBuf};
use std::time::Instant;
use wb_engine::units::format_bytes;

/// Chunk of the writers (fio's bs=1M, the engine writer's write_at size).
const CHUNK: usize = 1 << 20;
/// Free space left untouched on the filesystem.
const SPACE_MARGIN: u64 = 1 << 30;
/// Smallest writer worth running.
const MIN_WRITER: u64 = 256 << 20;
/// The reader's file, unless --reader-size says otherwise (without --fuse).
const DEFAULT_READER_SIZE: u64 = 1 << 30;

/// Everything a run needs.
pub struct Interference {
    fio: Fio,
    dir: PathBuf,
    reader_file: PathBuf,
    writer_file: PathBuf,
    seconds: u64,
    writer_size: u64,
    memory: u64,
    data_dir: PathBuf,
    /// The engine's dirty limits in bytes: (dirty, background).
    dirty_limits: (u64, u64),
    /// Extra engine knobs (--engine-set).
    engine_sets: Vec<(String, String)>,
    /// What the kernel configurations change, and on which device.
    machine: Machine,
}

impl Experiment for Interference {
    type Setup = Row;
    type Run = RunResult;

    fn name(&self, row: &Row) -> String {
        row.name()
    }

    fn prepare(&mut self, row: &Row, turn: Turn, notes: &mut Notes) -> Result<(), BenchError> {
        let settled = settle::settle(&self.fio, &self.dir, &self.reader_file)?;
        if let Some(why) = settled.busy() {
            notes.push(format!(
                "{} ({}): {why}; ran anyway",
                row.name(),
                turn.round
            ));
        }
        if !settled.trimmed {
            notes.push_once(format!(
                "fstrim {} failed: runs may start from different disk states",
                self.dir.display()
            ));
        }
        Ok(())
    }

    fn announce(&self, _row: &Row, label: &str) -> Option<String> {
        Some(format!("{label}: running"))
    }

    fn run_once(
        &mut self,
        row: &Row,
        label: &str,
        notes: &mut Notes,
    ) -> Result<RunResult, BenchError> {
        self.run_row(row, label, notes)
    }

    fn describe(&self, label: &str, r: &RunResult) -> Vec<String> {
        vec![format!(
            "{label}: reader p50 {} ms, p99 {} ms, p99.9 {} ms, max {} ms, {} IOPS{}",
            table::ms(r.reader.p50_us),
            table::ms(r.reader.p99_us),
            table::ms(r.reader.p99_9_us),
            table::ms(r.reader.max_us),
            table::rate(r.reader.iops),
            r.writer_mib_s
                .map(|w| format!("; writer {} MiB/s", table::rate(w)))
                .unwrap_or_default()
        )]
    }

    /// The probe passed, but the writes, the scheduler switch or the
    /// cgroup may still fail for real: every kernel configuration but
    /// `kernel` is then left out.
    fn optional(&self, row: &Row) -> bool {
        row.config.optional()
    }
}

pub fn run(args: InterferenceArgs, html: Option<HtmlFile>) -> Result<(), BenchError> {
    crate::state_dir::ensure(&args.data_dir).map_err(|e| BenchError::BadInput(e.to_string()))?;
    let started = Instant::now();
    check(&args)?;
    let mut notes = Notes::new();
    let (mut exp, rows, files) = Interference::new(&args, &mut notes)?;
    // Repeats interleave the configurations, so slow drifts of the disk
    // (host caches filling, ...) spread over all of them.
    let measured = harness::run(&mut exp, rows, args.repeat, &mut notes)?;
    drop(files);
    let summaries: Vec<ConfigSummary> = measured
        .into_iter()
        .map(|m| report::summarize(m.setup, &m.runs))
        .collect();
    progress!("done in {:.0} s", started.elapsed().as_secs_f64());
    let doc = report::render(&summaries, &exp, args.repeat, &notes);
    let report = Report::new(doc, report::to_json(&summaries));
    Output::new("wb bench interference", args.json, html).publish_with_figures(report, || {
        frontier::figures(&summaries).map_err(|e| BenchError::failed("the frontier plot", e))
    })
}

/// The arguments that clap cannot check alone.
fn check(args: &InterferenceArgs) -> Result<(), BenchError> {
    if args.writer_size < CHUNK as u64 {
        return Err(BenchError::BadInput(
            "--writer-size must be at least 1MiB (the writers write 1 MiB at a time)".into(),
        ));
    }
    if let Some(sweep) = &args.sweep {
        sweep
            .check_with(&args.engine_sets)
            .map_err(BenchError::BadInput)?;
    }
    Ok(())
}

impl Interference {
    /// Checks the machine, chooses the rows and writes the reader's file:
    /// the experiment, its rows and its two files (removed when dropped).
    fn new(
        args: &InterferenceArgs,
        notes: &mut Notes,
    ) -> Result<(Interference, Vec<Row>, [TempFile; 2]), BenchError> {
        let fio = fio::find()?;
        let dir = prepare_dir(&args.dir)?;
        sysctl::check_writable(Path::new(sysctl::PROC_VM)).map_err(BenchError::BadInput)?;
        let dirty_limits = engine_dirty_limits(args.memory)?;
        progress!(
            "{}; files in {}; engine memory {}: dirty limits {} / background {}",
            fio.version,
            dir.display(),
            format_bytes(args.memory),
            format_bytes(dirty_limits.0),
            format_bytes(dirty_limits.1)
        );
        if let Some((dev, wbt)) = files::kernel_wbt(&dir) {
            progress!("kernel wbt on {dev}: wbt_lat_usec={wbt} (left as it is)");
        }
        // Whole 1 MiB writes, as both writers issue them.
        let wanted = args.writer_size / CHUNK as u64 * CHUNK as u64;
        let reader_size = args.reader_size.unwrap_or(if args.fuse {
            4 * args.memory
        } else {
            DEFAULT_READER_SIZE
        });
        let writer_size = files::fit_writer(&dir, reader_size, wanted)?;
        let machine = Machine::probe(&dir, args.blkio_write_limit);
        let rows = rows::choose_rows(args, &dir, &machine, notes);
        let reader = TempFile::new(dir.join("wb-bench-reader.dat"));
        progress!(
            "writing the reader's file ({}) with O_DIRECT",
            format_bytes(reader_size)
        );
        files::write_direct_file(reader.path(), reader_size)?;
        let writer = TempFile::new(dir.join("wb-bench-writer.dat"));
        let exp = Interference {
            fio,
            reader_file: reader.path().to_path_buf(),
            writer_file: writer.path().to_path_buf(),
            dir,
            seconds: args.seconds,
            writer_size,
            memory: args.memory,
            data_dir: args.data_dir.clone(),
            dirty_limits,
            engine_sets: args.engine_sets.clone(),
            machine,
        };
        Ok((exp, rows, [writer, reader]))
    }
}
