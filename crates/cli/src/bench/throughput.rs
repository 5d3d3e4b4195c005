//! `wb bench throughput --fuse`: bulk throughput through `wb mount`
//! against the kernel on the same directory, with fio.
//!
//! Per repeat (medians reported): sequential 1 MiB buffered writes of
//! --size with an fsync at the end, then cold sequential 1 MiB reads of
//! that file, then cold 4 KiB random reads of it for --seconds; first on
//! --dir directly (the kernel's page cache, dropped before each read run),
//! then through a mount of --dir (a fresh mount, so a cold cache, for each
//! run).

use super::cleanup::TempFile;
use super::doc::Doc;
use super::fio::{self, Fio};
use super::harness::{self, median_of, Experiment, Notes, Output, Report, Turn};
use super::mount::Mount;
use super::table::{self, Table};
use super::{
    drop_caches, free_bytes, parse_repeat, parse_seconds, parse_size, prepare_dir, progress,
    BenchError, MIB,
};
use crate::html_file::HtmlFile;
use clap::Args;
use serde_json::json;
use std::path::{Path, PathBuf};
use wb_engine::units::format_bytes;

/// Free space left untouched on the filesystem.
const SPACE_MARGIN: u64 = 1 << 30;

#[derive(Args)]
#[command(after_help = "\
Runs on the filesystem of --dir, --repeat times (medians reported), with fio:
  kernel-seq-write   1 MiB buffered sequential writes of --size to --dir, fsync at the end
  kernel-seq-read    1 MiB sequential reads of that file (page cache dropped first)
  kernel-rand-read   4 KiB random reads of it for --seconds (page cache dropped first)
  mount-*            the same through `wb mount --dir` on a temporary mountpoint
                     (memory --memory), mounted afresh for each run: a cold cache
The kernel keeps its own dirty limits here. Needs root (mounting, dropping caches).

Exit status: 0 on success, 1 if a run failed, 2 for bad arguments, no fio or no --fuse.")]
pub struct ThroughputArgs {
    /// Compare `wb mount` with the kernel (the only mode so far; required).
    #[arg(long)]
    pub fuse: bool,
    /// Directory served by the mount and written directly by the kernel runs
    /// (created if missing; the files are removed at the end).
    #[arg(long, default_value = "wb-data/bench")]
    pub dir: PathBuf,
    /// Bytes each sequential writer writes (and each sequential reader reads).
    #[arg(long, default_value = "4GiB", value_parser = parse_size, value_name = "SIZE")]
    pub size: u64,
    /// Seconds each random-read run lasts.
    #[arg(long, default_value = "10", value_parser = parse_seconds, value_name = "S")]
    pub seconds: u64,
    /// Runs of each measurement; medians are reported.
    #[arg(long, default_value = "3", value_parser = parse_repeat)]
    pub repeat: usize,
    /// The mount's memory.
    #[arg(long, default_value = "1GiB", value_parser = parse_size, value_name = "SIZE")]
    pub memory: u64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Kernel,
    Mount,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    SeqWrite,
    SeqRead,
    RandRead,
}

const KINDS: [Kind; 3] = [Kind::SeqWrite, Kind::SeqRead, Kind::RandRead];

fn name(side: Side, kind: Kind) -> String {
    let side = match side {
        Side::Kernel => "kernel",
        Side::Mount => "mount",
    };
    let kind = match kind {
        Kind::SeqWrite => "seq-write",
        Kind::SeqRead => "seq-read",
        Kind::RandRead => "rand-read",
    };
    format!("{side}-{kind}")
}

/// Everything a run needs; the file of the side under way.
struct Throughput {
    fio: Fio,
    dir: PathBuf,
    size: u64,
    seconds: u64,
    memory: u64,
    /// Written by a side's seq-write, read by its reads, removed after them.
    file: Option<TempFile>,
}

impl Experiment for Throughput {
    type Setup = (Side, Kind);
    type Run = f64;

    fn name(&self, &(side, kind): &(Side, Kind)) -> String {
        name(side, kind)
    }

    fn prepare(
        &mut self,
        &(side, kind): &(Side, Kind),
        _: Turn,
        _: &mut Notes,
    ) -> Result<(), BenchError> {
        if kind == Kind::SeqWrite {
            self.file = None;
            let path = self
                .dir
                .join(format!("wb-throughput-{}.dat", name(side, Kind::SeqWrite)));
            self.file = Some(TempFile::new(path));
        }
        Ok(())
    }

    fn run_once(
        &mut self,
        &(side, kind): &(Side, Kind),
        _: &str,
        _: &mut Notes,
    ) -> Result<f64, BenchError> {
        let file = self
            .file
            .as_ref()
            .map(|f| f.path().to_path_buf())
            .ok_or_else(|| BenchError::Failed("a read ran before its side's write".into()))?;
        run_one(self, side, kind, &file)
    }

    fn restore(&mut self, &(_, kind): &(Side, Kind)) -> Result<(), BenchError> {
        if kind == Kind::RandRead {
            self.file = None;
        }
        Ok(())
    }

    fn describe(&self, label: &str, mib_s: &f64) -> Vec<String> {
        vec![format!("{label}: {} MiB/s", table::rate(*mib_s))]
    }
}

pub fn run(args: ThroughputArgs, html: Option<HtmlFile>) -> Result<(), BenchError> {
    if !args.fuse {
        return Err(BenchError::BadInput(
            "wb bench throughput compares `wb mount` with the kernel: pass --fuse".into(),
        ));
    }
    let fio = fio::find()?;
    let dir = prepare_dir(&args.dir)?;
    let free = free_bytes(&dir)?;
    if free < 2 * args.size + SPACE_MARGIN {
        return Err(BenchError::Failed(format!(
            "not enough free space in {}: {} available, need {} (two files of --size and {} \
             margin); lower --size or pick another --dir",
            dir.display(),
            format_bytes(free),
            format_bytes(2 * args.size + SPACE_MARGIN),
            format_bytes(SPACE_MARGIN)
        )));
    }
    progress!("{}; files in {}", fio.version, dir.display());
    let mut exp = Throughput {
        fio,
        dir,
        size: args.size,
        seconds: args.seconds,
        memory: args.memory,
        file: None,
    };
    let runs: Vec<(Side, Kind)> = [Side::Kernel, Side::Mount]
        .into_iter()
        .flat_map(|side| KINDS.map(|kind| (side, kind)))
        .collect();
    let measured = harness::run(&mut exp, runs, args.repeat, &mut Notes::new())?;
    let medians: Vec<(String, f64)> = measured
        .iter()
        .map(|m| (name(m.setup.0, m.setup.1), median_of(&m.runs, |&x| x)))
        .collect();
    let doc = render(&medians, &exp, args.repeat);
    let results: Vec<_> = medians
        .iter()
        .map(|(n, v)| json!({ "name": n, "mib_s": v }))
        .collect();
    let report = Report::new(doc, json!({ "results": results }));
    Output::new("wb bench throughput", args.json, html).publish(report)
}

/// One measurement; returns MiB/s.
fn run_one(exp: &Throughput, side: Side, kind: Kind, file: &Path) -> Result<f64, BenchError> {
    if kind == Kind::SeqWrite {
        let _ = std::fs::remove_file(file);
    }
    // Both sides read from the same state: the write's aftermath synced
    // and the kernel's caches dropped (the mount's own cache is cold: a
    // fresh mount). Without the sync the mount's reads met the writeback
    // of the filesystem's metadata the write left behind, and ran at half
    // speed (550 against 1,230 MiB/s in the same sequence with it).
    if kind != Kind::SeqWrite {
        drop_caches()?;
    }
    let mount = match side {
        Side::Mount => Some(Mount::start(
            &exp.dir,
            &[("memory".to_string(), exp.memory.to_string())],
        )?),
        Side::Kernel => None,
    };
    let target = match &mount {
        Some(m) => m.path().join(file.file_name().unwrap_or_default()),
        None => file.to_path_buf(),
    };
    let args = match kind {
        Kind::SeqWrite => fio::writer_args(&target, exp.size),
        Kind::SeqRead => fio::seq_reader_args(&target),
        Kind::RandRead => fio::buffered_random_reader_args(&target, exp.seconds),
    };
    let report = exp.fio.spawn(&exp.dir, "throughput", &args)?.finish()?;
    let bytes_s = match kind {
        Kind::SeqWrite => fio::parse_writer(&report).map(|w| w.bw_bytes_s),
        Kind::SeqRead | Kind::RandRead => fio::parse_read_bw(&report),
    }
    .map_err(BenchError::Failed)?;
    if let Some(mount) = mount {
        mount.stop()?;
    }
    Ok(bytes_s / MIB)
}

fn render(medians: &[(String, f64)], exp: &Throughput, repeat: usize) -> Doc {
    let mut out = Doc::from(format!(
        "fio, 1 MiB sequential writes and reads of {}, 4 KiB random reads for {} s; \
         mount memory {}; medians of {repeat} run{}.\n\n",
        format_bytes(exp.size),
        exp.seconds,
        format_bytes(exp.memory),
        if repeat == 1 { "" } else { "s" },
    ));
    let get = |n: String| medians.iter().find(|(m, _)| *m == n).map(|(_, v)| *v);
    let mut t = Table::new(&["workload", "kernel MiB/s", "mount MiB/s", "mount/kernel"]);
    for kind in KINDS {
        let kernel = get(name(Side::Kernel, kind));
        let mount = get(name(Side::Mount, kind));
        let workload = name(Side::Kernel, kind)
            .trim_start_matches("kernel-")
            .to_string();
        t.row(vec![
            workload,
            kernel.map_or("-".into(), table::rate),
            mount.map_or("-".into(), table::rate),
            table::ratio(mount, kernel),
        ]);
    }
    out.table(t);
    out
}
