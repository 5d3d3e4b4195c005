//! `wb bench stable`: what writers pay for pages under writeback, with the
//! library in each `stable_writes` mode (wait, none, snapshot), on real
//! files: Wong 2013's dbench experiment, for real.
//!
//! Each run builds a [`Cache`] in one configuration and lets `--clients` threads
//! run a dbench-like load for `--seconds`: each rewrites random 4 KiB
//! blocks of eight shared 256 KiB files, reads back the block it wrote
//! last every fourth operation and fsyncs (sync_data) the file it wrote
//! last every fiftieth. The files are shared (dbench's clients each have
//! their own) so that one client's flush puts under writeback pages the
//! others are rewriting: on a fast device a writeback lasts only tens of
//! microseconds, and the collisions Wong measured on a laptop disk would
//! otherwise be rare. The flusher also writes back what is older than 1 s
//! every 0.5 s. Every
//! write call is timed; the process's CPU time (user + sys, all threads:
//! getrusage RUSAGE_SELF) is divided by the bytes the cache wrote back
//! during the run. Writeback lends the cache's frames to the device
//! (zero-copy); the "always-copy" configuration copies every page into an
//! I/O buffer first, as writeback did before, to measure that against.

mod load;
mod report;

use super::harness::{self, median_of, median_some, Experiment, Notes, Output, Report, Turn};
use super::{parse_repeat, parse_seconds, prepare_dir, BenchError};
use crate::html_file::HtmlFile;
use clap::Args;
use std::path::PathBuf;
use writeback::Writeout;

/// (name, stable_writes, writeout) of each configuration.
const CONFIGS: [(&str, &str, Writeout); 4] = [
    ("wait", "wait", Writeout::ZeroCopy),
    ("none", "none", Writeout::ZeroCopy),
    ("snapshot", "snapshot", Writeout::ZeroCopy),
    ("always-copy", "none", Writeout::Copy),
];
const MAX_CLIENTS: usize = 64;

#[derive(Args)]
#[command(after_help = "\
Configurations, each run once per round (--repeat rounds, medians reported):
  wait      a writer of a page under writeback waits for that writeback (Linux 3.0-3.8)
  none      it modifies the page in place; the page is written again
  snapshot  it gets a copy of the page; the write in flight keeps the old one
  always-copy  as none, but writeback copies each page into an I/O buffer first (the
            path before zero-copy writeout; every page snapshotted, whatever the device)
The first three write back from the cache's own memory (zero-copy).
The load (per client thread): random 4 KiB rewrites of eight 256 KiB files shared by the
clients, a read of the block written last every 4th operation, sync_data of the file
written last every 50th, for --seconds (shared files: one client's flush puts under
writeback pages the others rewrite). The cache (--memory) writes back what is older than 1 s every 0.5 s,
so rewrites meet pages under writeback.

Reported per configuration: write-call latency (p50, p99, p99.9, max, microseconds); MiB/s
written by the clients; CPU seconds (user + sys of this whole process) per GiB the cache
wrote back during the run; the writers' waits for stable pages and the pages copied.
Ratios: each mode against wait (latency, MiB/s); CPU per GiB of none against always-copy.

Quick run: wb bench stable --seconds 3 --repeat 1

Exit status: 0 on success, 1 if a run failed, 2 for bad arguments or an unusable --dir;
130 on Ctrl-C.")]
pub struct StableArgs {
    /// Directory for the clients' files (created if missing; removed after each run).
    #[arg(long, default_value = "wb-data/bench")]
    pub dir: PathBuf,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Seconds each run lasts.
    #[arg(long, default_value = "10", value_parser = parse_seconds)]
    pub seconds: u64,
    /// Rounds; each runs every configuration once.
    #[arg(long, default_value = "3", value_parser = parse_repeat)]
    pub repeat: usize,
    /// Client threads (1 to 64).
    #[arg(long, default_value = "4", value_parser = parse_clients)]
    pub clients: usize,
    /// The cache's memory budget.
    #[arg(long, default_value = "64MiB")]
    pub memory: String,
    /// State directory: where the engine remembers device calibrations.
    /// Default: $STATE_DIRECTORY (its first path), else /var/lib/wb as root,
    /// else $XDG_STATE_HOME/wb, else $HOME/.local/state/wb.
    #[arg(long, value_name = "DIR", default_value_os_t = crate::state_dir::clap_default().into())]
    pub data_dir: PathBuf,
    /// Do not measure the device; the automatic wbt target assumes 1 ms reads.
    #[arg(long)]
    pub no_calibrate: bool,
}

fn parse_clients(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_CLIENTS).contains(&n) => Ok(n),
        _ => Err(format!(
            "'{text}' is not a number of clients from 1 to {MAX_CLIENTS}"
        )),
    }
}

/// One run, or the medians of a configuration's runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunResult {
    pub p50_us: f64,
    pub p99_us: f64,
    pub p99_9_us: f64,
    pub max_us: f64,
    pub mib_s: f64,
    /// None when nothing was written back during the run.
    pub cpu_s_per_gib: Option<f64>,
    /// CPU seconds of the process during the run, and MiB written back.
    pub cpu_s: f64,
    pub back_mib: f64,
    pub stable_waits: u64,
    pub snapshot_pages: u64,
}

/// The runs: each configuration once a round.
struct Stable<'a> {
    args: &'a StableArgs,
    dir: PathBuf,
}

/// A configuration: (name, stable_writes, writeout).
type Mode = &'static (&'static str, &'static str, Writeout);

impl Experiment for Stable<'_> {
    type Setup = Mode;
    type Run = RunResult;

    fn name(&self, config: &Mode) -> String {
        config.0.to_string()
    }

    fn label(&self, config: &Mode, turn: Turn) -> String {
        format!("round {}/{}: {}", turn.round, turn.rounds, config.0)
    }

    fn announce(&self, _: &Mode, label: &str) -> Option<String> {
        Some(format!("{label}, {} s", self.args.seconds))
    }

    fn run_once(&mut self, config: &Mode, _: &str, _: &mut Notes) -> Result<RunResult, BenchError> {
        load::run_one(self.args, &self.dir, config)
    }

    fn describe(&self, _: &str, r: &RunResult) -> Vec<String> {
        vec![format!(
            "  write p99.9 {:.0} us, max {:.0} us, {:.1} MiB/s; {:.0} MiB written back, {:.2} CPU s",
            r.p99_9_us, r.max_us, r.mib_s, r.back_mib, r.cpu_s
        )]
    }
}

pub fn run(args: StableArgs, html: Option<HtmlFile>) -> Result<(), BenchError> {
    crate::state_dir::ensure(&args.data_dir).map_err(|e| BenchError::BadInput(e.to_string()))?;
    // A bad --memory is refused before anything is created.
    wb_engine::Config::default()
        .set("memory", &args.memory)
        .map_err(|e| BenchError::BadInput(format!("--memory: {e}")))?;
    let dir = prepare_dir(&args.dir)?;
    let mut exp = Stable { args: &args, dir };
    let modes: Vec<Mode> = CONFIGS.iter().collect();
    let measured = harness::run(&mut exp, modes, args.repeat, &mut Notes::new())?;
    let results: Vec<RunResult> = measured.iter().map(|m| medians(&m.runs)).collect();
    let doc = report::render(&args, &results);
    let json = report::to_json(&args, &results);
    Output::new("wb bench stable", args.json, html).publish(Report::new(doc, json))
}

fn medians(runs: &[RunResult]) -> RunResult {
    let m = |f: fn(&RunResult) -> f64| median_of(runs, f);
    RunResult {
        p50_us: m(|r| r.p50_us),
        p99_us: m(|r| r.p99_us),
        p99_9_us: m(|r| r.p99_9_us),
        max_us: m(|r| r.max_us),
        mib_s: m(|r| r.mib_s),
        cpu_s_per_gib: median_some(runs, |r| r.cpu_s_per_gib),
        cpu_s: m(|r| r.cpu_s),
        back_mib: m(|r| r.back_mib),
        stable_waits: m(|r| r.stable_waits as f64) as u64,
        snapshot_pages: m(|r| r.snapshot_pages as f64) as u64,
    }
}
