//! `wb bench dontcache`: uncached buffered writes (Linux's RWF_DONTCACHE)
//! through the kernel and through the engine, next to plain buffered and
//! O_DIRECT writes.
//!
//! Every run writes `--size` bytes sequentially, 1 MiB per call, into a new
//! file, then makes it durable with one fdatasync (`sync_data` for the
//! engine), which is part of the throughput time: a buffered writer cannot
//! look fast by leaving its data dirty. Each write call is timed on its
//! own. While a run lasts a thread samples every 20 ms how much data is
//! dirty or under writeback (the kernel: `Dirty` + `Writeback` of
//! /proc/meminfo, machine-wide; the engine: its stats), and after the sync
//! the bench counts what the writer left cached (the kernel: the file's
//! resident pages by mmap + mincore; the engine: its cached pages).
//!
//! Configurations, in this order in every round (rounds repeat them all):
//!
//! - `kernel-buffered`: `pwrite` into the page cache;
//! - `kernel-dontcache`: `pwritev2(RWF_DONTCACHE)`;
//! - `kernel-direct`: O_DIRECT `pwrite` from 4 KiB-aligned buffers;
//! - `engine-buffered`: `File::write_at` through a [`Cache`];
//! - `engine-dontcache`: `File::write_at_with(WriteFlags::DONTCACHE)`,
//!   the flusher kicked to write the pages (`dontcache_flush=kick`);
//! - `engine-dontcache-inline`: the same with `dontcache_flush=inline`
//!   (the writing call submits the pages itself).
//!
//! The kernel's dirty limits are the engine's (20% / 10% of its memory) for
//! the whole bench, so both sides write under the same limits.
//!
//! The files: [`runs`] (one run: the writers, the sampler), [`report`]
//! (medians, the table, JSON); what the kernel's page cache holds is read
//! by [`crate::bench::pagecache`].

mod report;
mod runs;

use super::cleanup::TempFile;
use super::harness::{self, Experiment, Notes, Output, Report, Turn};
use super::kernel_write::{self, Mode};
use super::pagecache::read_meminfo_level;
use super::sysctl::{self, engine_dirty_limits, DirtyLimitsGuard};
use super::table;
use super::{check_room, parse_repeat, parse_size, prepare_dir, progress, BenchError};
use crate::html_file::HtmlFile;
use clap::Args;
use report::RunResult;
use runs::EngineMode;
use std::path::{Path, PathBuf};
use std::time::Instant;
use wb_engine::units::format_bytes;

/// Bytes per write call.
const CHUNK: u64 = 1 << 20;
/// Smallest --size: below it a run is over before writeback even starts.
const MIN_SIZE: u64 = 64 << 20;
/// Free space left untouched on the filesystem of --dir.
const SPACE_MARGIN: u64 = 256 << 20;
/// The file every run writes (in --dir; removed after every run).
const DATA_FILE: &str = "wb-bench-dontcache.dat";
const DEFAULT_DIR: &str = "wb-data/bench";

#[derive(Args)]
#[command(after_help = "\
Writes --size bytes sequentially, 1 MiB per call, into a new file in --dir, then one fdatasync
(sync_data for the engine), once per configuration and round; --repeat rounds each run every
configuration in this order, and medians over the rounds are reported:
  kernel-buffered          pwrite into the kernel's page cache
  kernel-dontcache         pwritev2(RWF_DONTCACHE): buffered, pages dropped once written back
  kernel-direct            O_DIRECT pwrite from 4 KiB-aligned buffers
  engine-buffered          the writeback library: File::write_at through a Cache of --memory
  engine-dontcache         File::write_at_with(WriteFlags::DONTCACHE), dontcache_flush=kick
  engine-dontcache-inline  the same with dontcache_flush=inline
Reported per configuration: MiB/s (size / (writes + the final fdatasync)); the latency of
each write call (p50, p99, p99.9, max, in microseconds; the fdatasync is not one of them);
dirty peak (the most dirty + writeback data seen in samples every 20 ms during the writes
and the sync, above the level just before the run: the kernel's Dirty + Writeback from
/proc/meminfo, machine-wide; the engine's dirty + writeback pages); and cached at end (after
the sync: the file's pages resident in the kernel's page cache, by mmap + mincore; for the
engine its cached pages).

The engine runs with its defaults (dirty_ratio 20, dirty_background_ratio 10 of --memory).
For the whole bench vm.dirty_bytes / vm.dirty_background_bytes are set to the engine's
limits in bytes (20% / 10% of --memory), so the kernel writes under the same dirty limits
(and so does any page cache under the filesystem, such as a buffered loop device's); they
are restored afterwards, also on errors and Ctrl-C. This needs root.

Before every run the previous file is dropped from the page cache and removed, everything
is synced and the free space of --dir trimmed (fstrim), so each run starts from the same
disk state. --dir must exist, be writable, support O_DIRECT and RWF_DONTCACHE (Linux 6.14+
and a filesystem implementing it; checked first, the filesystem is named if not), and have
room for --size.

With --json the table goes to standard error, after the progress lines.

Quick run: wb bench dontcache --dir /var/tmp --size 256MiB --repeat 1

Exit status: 0 on success, 1 if a run failed, 2 for bad arguments, an unusable --dir or no
permission to change the dirty limits; 130 on Ctrl-C.")]
pub struct DontcacheArgs {
    /// Directory for the benchmark's file (must exist; default wb-data/bench, created if
    /// missing). The file is removed after every run.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Rounds; each runs every configuration once, and medians are reported.
    #[arg(long, default_value = "3", value_parser = parse_repeat)]
    pub repeat: usize,
    /// Bytes each run writes: a multiple of 1 MiB, at least 64 MiB.
    #[arg(long, default_value = "4GiB", value_parser = parse_size, value_name = "SIZE")]
    pub size: u64,
    /// The engine's memory; the kernel's dirty limits are set to 20% / 10% of it.
    #[arg(long, default_value = "1GiB", value_parser = parse_size, value_name = "SIZE")]
    pub memory: u64,
    /// State directory: where the engine remembers device calibrations.
    /// Default: $STATE_DIRECTORY (its first path), else /var/lib/wb as root,
    /// else $XDG_STATE_HOME/wb, else $HOME/.local/state/wb.
    #[arg(long, value_name = "DIR", default_value_os_t = crate::state_dir::clap_default().into())]
    pub data_dir: PathBuf,
}

/// A configuration: how the file is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchConfig {
    KernelBuffered,
    KernelDontcache,
    KernelDirect,
    EngineBuffered,
    EngineDontcache,
    EngineDontcacheInline,
}

impl BenchConfig {
    pub const ALL: [BenchConfig; 6] = [
        BenchConfig::KernelBuffered,
        BenchConfig::KernelDontcache,
        BenchConfig::KernelDirect,
        BenchConfig::EngineBuffered,
        BenchConfig::EngineDontcache,
        BenchConfig::EngineDontcacheInline,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BenchConfig::KernelBuffered => "kernel-buffered",
            BenchConfig::KernelDontcache => "kernel-dontcache",
            BenchConfig::KernelDirect => "kernel-direct",
            BenchConfig::EngineBuffered => "engine-buffered",
            BenchConfig::EngineDontcache => "engine-dontcache",
            BenchConfig::EngineDontcacheInline => "engine-dontcache-inline",
        }
    }
}

/// What every run shares.
pub struct Dontcache {
    dir: PathBuf,
    fs: String,
    file: PathBuf,
    size: u64,
    memory: u64,
    data_dir: PathBuf,
    /// The engine's dirty limits in bytes, also the kernel's for the bench.
    dirty_limits: (u64, u64),
    /// The engine's I/O backend, once an engine configuration has run.
    io_backend: &'static str,
}

impl Experiment for Dontcache {
    type Setup = BenchConfig;
    type Run = RunResult;

    fn name(&self, config: &BenchConfig) -> String {
        config.name().to_string()
    }

    fn prepare(&mut self, _: &BenchConfig, _: Turn, notes: &mut Notes) -> Result<(), BenchError> {
        if !runs::settle(self) {
            notes.push_once(format!(
                "fstrim {} failed: runs may start from different disk states",
                self.dir.display()
            ));
        }
        Ok(())
    }

    fn run_once(
        &mut self,
        config: &BenchConfig,
        _: &str,
        _: &mut Notes,
    ) -> Result<RunResult, BenchError> {
        let (r, backend) = match config {
            BenchConfig::KernelBuffered => runs::run_kernel(self, Mode::Buffered),
            BenchConfig::KernelDontcache => runs::run_kernel(self, Mode::Dontcache),
            BenchConfig::KernelDirect => runs::run_kernel(self, Mode::Direct),
            BenchConfig::EngineBuffered => runs::run_engine(self, EngineMode::Buffered),
            BenchConfig::EngineDontcache => runs::run_engine(self, EngineMode::Dontcache),
            BenchConfig::EngineDontcacheInline => {
                runs::run_engine(self, EngineMode::DontcacheInline)
            }
        }?;
        self.io_backend = backend.unwrap_or(self.io_backend);
        Ok(r)
    }

    fn describe(&self, label: &str, r: &RunResult) -> Vec<String> {
        vec![format!(
            "{label}: {} MiB/s; write p50 {} us, p99 {} us, p99.9 {} us, max {} us; \
             dirty peak {:.0} MiB; cached at end {:.1} MiB",
            table::rate(r.mib_s),
            report::us(r.lat.p50_us),
            report::us(r.lat.p99_us),
            report::us(r.lat.p99_9_us),
            report::us(r.lat.max_us),
            r.dirty_peak_mib,
            r.cached_end_mib
        )]
    }
}

pub fn run(args: DontcacheArgs, html: Option<HtmlFile>) -> Result<(), BenchError> {
    crate::state_dir::ensure(&args.data_dir).map_err(|e| BenchError::BadInput(e.to_string()))?;
    let started = Instant::now();
    let dir = check(&args)?;
    let fs = kernel_write::fs_type(&dir).unwrap_or_else(|| "unknown".into());
    let dirty_limits = engine_dirty_limits(args.memory)?;
    introduce(&args, &dir, &fs, dirty_limits)?;
    let data = TempFile::new(dir.join(DATA_FILE));
    let mut exp = Dontcache {
        dir: dir.clone(),
        fs,
        file: data.path().to_path_buf(),
        size: args.size,
        memory: args.memory,
        data_dir: args.data_dir.clone(),
        dirty_limits,
        io_backend: "?",
    };
    let limits =
        DirtyLimitsGuard::apply(Path::new(sysctl::PROC_VM), dirty_limits.0, dirty_limits.1)
            .map_err(BenchError::Failed)?;
    let mut notes = Notes::new();
    // Rounds interleave the configurations, so slow drifts of the disk
    // spread over all of them.
    let measured = harness::run(&mut exp, BenchConfig::ALL.to_vec(), args.repeat, &mut notes)?;
    limits.restore().map_err(BenchError::Failed)?;
    drop(data);
    let summaries: Vec<(BenchConfig, RunResult)> = measured
        .iter()
        .map(|m| (m.setup, report::summarize(&m.runs)))
        .collect();
    progress!("done in {:.0} s", started.elapsed().as_secs_f64());
    let doc = report::render(&summaries, &exp, args.repeat, exp.io_backend, &notes);
    let json = report::to_json(&summaries, &exp, args.repeat, exp.io_backend);
    let mut report = Report::new(doc, json);
    // The table too, for whoever watches: a run takes minutes.
    report.stderr_with_json = Some(report.doc.to_string());
    Output::new("wb bench dontcache", args.json, html).publish(report)
}

/// Checks the arguments and the machine before anything is changed;
/// returns the directory.
fn check(args: &DontcacheArgs) -> Result<PathBuf, BenchError> {
    validate_size(args.size)?;
    wb_engine::Config::default()
        .set("memory", &args.memory.to_string())
        .map_err(|e| BenchError::BadInput(format!("--memory: {e}")))?;
    let dir = match &args.dir {
        Some(dir) if !dir.is_dir() => {
            return Err(BenchError::BadInput(format!(
                "--dir {}: {}",
                dir.display(),
                if dir.exists() {
                    "not a directory"
                } else {
                    "does not exist; create it first"
                }
            )))
        }
        Some(dir) => prepare_dir(dir)?,
        None => prepare_dir(Path::new(DEFAULT_DIR))?,
    };
    check_room(&dir, args.size, SPACE_MARGIN)?;
    kernel_write::check_dontcache(&dir).map_err(BenchError::BadInput)?;
    sysctl::check_writable(Path::new(sysctl::PROC_VM)).map_err(BenchError::BadInput)?;
    read_meminfo_level().map_err(|e| BenchError::failed("/proc/meminfo", e))?;
    Ok(dir)
}

/// Says what will run, and calibrates the device of `dir` if it is new.
fn introduce(
    args: &DontcacheArgs,
    dir: &Path,
    fs: &str,
    dirty_limits: (u64, u64),
) -> Result<(), BenchError> {
    progress!(
        "files in {} ({fs}, kernel {}); {} per run in 1 MiB writes; engine memory {}",
        dir.display(),
        kernel_write::kernel_release(),
        format_bytes(args.size),
        format_bytes(args.memory)
    );
    progress!(
        "vm.dirty_bytes={} vm.dirty_background_bytes={} (the engine's limits, 20% / 10%) \
         until the end",
        dirty_limits.0,
        dirty_limits.1
    );
    progress!(
        "device of {}: calibrating it if new (about 3 s, remembered in {})",
        dir.display(),
        args.data_dir.display()
    );
    writeback::io::calibrate(dir, &args.data_dir, writeback::CALIBRATION_BUDGET).map_err(|e| {
        BenchError::failed(format!("calibrating the device of {}", dir.display()), e)
    })?;
    Ok(())
}

/// --size must be whole 1 MiB writes and at least MIN_SIZE.
fn validate_size(size: u64) -> Result<(), BenchError> {
    if !size.is_multiple_of(CHUNK) || size < MIN_SIZE {
        return Err(BenchError::BadInput(format!(
            "--size {size} ({}): must be a multiple of 1 MiB (the writes are 1 MiB each) \
             and at least {} MiB",
            format_bytes(size),
            MIN_SIZE >> 20
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_must_be_whole_mib_and_not_too_small() {
        for bad in [1 << 20, (64 << 20) + 4096, 32 << 20] {
            let err = validate_size(bad).expect_err("bad size");
            assert!(matches!(err, BenchError::BadInput(_)), "{err}");
            assert!(err.to_string().contains("--size"), "{err}");
        }
        assert!(validate_size(64 << 20).is_ok());
        assert!(validate_size(4 << 30).is_ok());
    }
}
