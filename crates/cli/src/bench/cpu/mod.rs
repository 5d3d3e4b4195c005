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

mod child;
mod report;

pub use child::own_cpu;

use super::harness::{self, Experiment, Notes, Output, Report, Turn};
use super::{check_room, parse_repeat, parse_size, prepare_dir, progress, BenchError, MIB};
use crate::html_file::HtmlFile;
use child::ChildReport;
use clap::Args;
use report::exact_bytes;
use std::path::PathBuf;
use wb_engine::units::format_bytes;
use writeback::Writeout;

const GIB: f64 = 1024.0 * MIB;
/// The file each run writes (in --dir; removed after every run).
pub(super) const DATA_FILE: &str = "wb-bench-cpu.dat";
/// Where a child writes its report (its standard output).
pub(super) const REPORT_FILE: &str = "wb-bench-cpu.report.json";
/// Largest --block-size: the child allocates one buffer of it.
const MAX_BLOCK: u64 = 1 << 30;
/// Free space left untouched on the filesystem of --dir.
const SPACE_MARGIN: u64 = 256 << 20;
pub(super) const SEED: u64 = 0x0c9b_e1c4;

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
    /// State directory: where the engine remembers device calibrations.
    /// Default: $STATE_DIRECTORY (its first path), else /var/lib/wb as root,
    /// else $XDG_STATE_HOME/wb, else $HOME/.local/state/wb.
    #[arg(long, value_name = "DIR", default_value_os_t = crate::state_dir::clap_default().into())]
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
pub struct Run {
    pub user_s: f64,
    pub sys_s: f64,
    pub wall_s: f64,
}

impl Run {
    pub fn cpu_s(&self) -> f64 {
        self.user_s + self.sys_s
    }

    pub fn cpu_s_per_gib(&self, size: u64) -> f64 {
        self.cpu_s() / (size as f64 / GIB)
    }

    pub fn mib_s(&self, size: u64) -> f64 {
        if self.wall_s > 0.0 {
            size as f64 / MIB / self.wall_s
        } else {
            0.0
        }
    }
}

/// The sizes every run writes with.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    pub size: u64,
    pub block_size: u64,
    pub memory: u64,
}

/// The runs: one configuration, run --repeat times, each in a child.
struct Cpu<'a> {
    args: &'a CpuArgs,
    sizes: Sizes,
    dir: PathBuf,
    /// The run under way (from 1).
    round: usize,
}

impl Experiment for Cpu<'_> {
    /// The one configuration there is.
    type Setup = ();
    type Run = (Run, ChildReport);

    fn name(&self, _: &()) -> String {
        "run".into()
    }

    fn label(&self, _: &(), turn: Turn) -> String {
        format!("run {}/{}", turn.round, turn.rounds)
    }

    fn prepare(&mut self, _: &(), turn: Turn, _: &mut Notes) -> Result<(), BenchError> {
        self.round = turn.round;
        Ok(())
    }

    fn announce(&self, _: &(), label: &str) -> Option<String> {
        Some(format!(
            "{label}: writing {} in {} writes through a {} cache, then sync_data",
            format_bytes(self.sizes.size),
            exact_bytes(self.sizes.block_size),
            exact_bytes(self.sizes.memory)
        ))
    }

    fn run_once(&mut self, _: &(), _: &str, _: &mut Notes) -> Result<Self::Run, BenchError> {
        child::run_child(self.args, self.sizes, &self.dir)
    }

    fn describe(&self, label: &str, (run, report): &Self::Run) -> Vec<String> {
        let size = self.sizes.size;
        let mut lines = vec![format!(
            "{label}: cpu {:.2} s (user {:.2} s, sys {:.2} s), {:.3} cpu s/GiB, wall {:.1} s, \
             {:.0} MiB/s; {} written back ({} backend)",
            run.cpu_s(),
            run.user_s,
            run.sys_s,
            run.cpu_s_per_gib(size),
            run.wall_s,
            run.mib_s(size),
            format_bytes(report.written_bytes),
            report.io_backend
        )];
        if report.written_bytes < size {
            lines.push(format!(
                "run {}: note: the engine counted only {} of {size} written back",
                self.round, report.written_bytes
            ));
        }
        lines
    }
}

pub fn run(args: CpuArgs, html: Option<HtmlFile>) -> Result<(), BenchError> {
    crate::state_dir::ensure(&args.data_dir).map_err(|e| BenchError::BadInput(e.to_string()))?;
    let sizes = validate(args.size, args.block_size, args.memory)?;
    if let Some(file) = &args.child {
        return child::child(&args, sizes, file);
    }
    let dir = prepare_dir(&args.dir)?;
    check_room(&dir, sizes.size, SPACE_MARGIN)?;
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
    let mut exp = Cpu {
        args: &args,
        sizes,
        dir,
        round: 0,
    };
    let measured = harness::run(&mut exp, vec![()], args.repeat, &mut Notes::new())?;
    let all = measured.into_iter().flat_map(|m| m.runs);
    let (runs, reports): (Vec<Run>, Vec<ChildReport>) = all.unzip();
    let backend = reports.last().map_or("", |r| r.io_backend.as_str());
    let doc = report::render(sizes, &runs, backend, args.writeout);
    let json = report::to_json(sizes, &runs, args.writeout);
    Output::new("wb bench cpu", args.json, html).publish(Report::new(doc, json))
}

/// Checks the sizes together (each alone is checked by clap): bad ones are
/// the user's to fix, so they are [`BenchError::BadInput`].
fn validate(size: u64, block_size: u64, memory: u64) -> Result<Sizes, BenchError> {
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
    Ok(Sizes {
        size,
        block_size,
        memory,
    })
}

fn parse_writeout(text: &str) -> Result<Writeout, String> {
    match text {
        "zero-copy" => Ok(Writeout::ZeroCopy),
        "copy" => Ok(Writeout::Copy),
        _ => Err(format!("'{text}' is not a writeout (zero-copy or copy)")),
    }
}

pub(super) fn writeout_name(writeout: Writeout) -> &'static str {
    match writeout {
        Writeout::ZeroCopy => "zero-copy",
        Writeout::Copy => "copy",
    }
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
}
