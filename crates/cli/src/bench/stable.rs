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

use super::cleanup::TempFile;
use super::cpu::own_cpu;
use super::doc::Doc;
use super::table::Table;
use super::{
    median, parse_repeat, parse_seconds, prepare_dir, progress, BenchError, SplitMix64, MIB,
};
use crate::html_file::HtmlFile;
use clap::Args;
use hdrhistogram::Histogram;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use serde_json::json;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use writeback::{Cache, File, OpenOptions, Writeout};

/// (name, stable_writes, writeout) of each configuration.
const CONFIGS: [(&str, &str, Writeout); 4] = [
    ("wait", "wait", Writeout::ZeroCopy),
    ("none", "none", Writeout::ZeroCopy),
    ("snapshot", "snapshot", Writeout::ZeroCopy),
    ("always-copy", "none", Writeout::Copy),
];
const FILES: usize = 8;
const FILE_BYTES: usize = 256 << 10;
const BLOCK: usize = 4096;
const READ_EVERY: u64 = 4;
const FLUSH_EVERY: u64 = 50;
const LATENCY_MAX_NS: u64 = 600_000_000_000;
const MAX_CLIENTS: usize = 64;
const GIB: f64 = 1024.0 * MIB;

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
    /// Where the engine remembers device calibrations.
    #[arg(long, default_value = "wb-data")]
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
struct RunResult {
    p50_us: f64,
    p99_us: f64,
    p99_9_us: f64,
    max_us: f64,
    mib_s: f64,
    /// None when nothing was written back during the run.
    cpu_s_per_gib: Option<f64>,
    /// CPU seconds of the process during the run, and MiB written back.
    cpu_s: f64,
    back_mib: f64,
    stable_waits: u64,
    snapshot_pages: u64,
}

pub fn run(args: StableArgs, html: Option<HtmlFile>) -> Result<(), BenchError> {
    // A bad --memory is refused before anything is created.
    wb_engine::Config::default()
        .set("memory", &args.memory)
        .map_err(|e| BenchError::BadInput(format!("--memory: {e}")))?;
    let dir = prepare_dir(&args.dir)?;
    let mut runs: Vec<Vec<RunResult>> = vec![Vec::new(); CONFIGS.len()];
    for round in 0..args.repeat {
        for (m, config) in CONFIGS.iter().enumerate() {
            progress!(
                "round {}/{}: {}, {} s",
                round + 1,
                args.repeat,
                config.0,
                args.seconds
            );
            let r = run_one(&args, &dir, config)?;
            progress!(
                "  write p99.9 {:.0} us, max {:.0} us, {:.1} MiB/s; {:.0} MiB written back, {:.2} CPU s",
                r.p99_9_us,
                r.max_us,
                r.mib_s,
                r.back_mib,
                r.cpu_s
            );
            runs[m].push(r);
        }
    }
    let results: Vec<RunResult> = runs.iter().map(|r| medians(r)).collect();
    let doc = render(&args, &results);
    if args.json {
        print_json(&args, &results);
    } else {
        print!("{doc}");
    }
    super::write_html(html, "wb bench stable", &doc)
}

fn medians(runs: &[RunResult]) -> RunResult {
    let m = |f: fn(&RunResult) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
    let cpu: Vec<f64> = runs.iter().filter_map(|r| r.cpu_s_per_gib).collect();
    RunResult {
        p50_us: m(|r| r.p50_us),
        p99_us: m(|r| r.p99_us),
        p99_9_us: m(|r| r.p99_9_us),
        max_us: m(|r| r.max_us),
        mib_s: m(|r| r.mib_s),
        cpu_s_per_gib: (!cpu.is_empty()).then(|| median(&cpu)),
        cpu_s: m(|r| r.cpu_s),
        back_mib: m(|r| r.back_mib),
        stable_waits: m(|r| r.stable_waits as f64) as u64,
        snapshot_pages: m(|r| r.snapshot_pages as f64) as u64,
    }
}

fn build_cache(args: &StableArgs, mode: &str, writeout: Writeout) -> Result<Cache, BenchError> {
    let bad = |e: writeback::Error| BenchError::BadInput(e.to_string());
    Cache::builder()
        .knob("memory", &args.memory)
        .map_err(bad)?
        .knob("dirty_expire_centisecs", "100")
        .map_err(bad)?
        .knob("dirty_writeback_centisecs", "50")
        .map_err(bad)?
        .device_knob("stable_writes", mode)
        .map_err(bad)?
        .data_dir(&args.data_dir)
        .calibrate(!args.no_calibrate)
        .writeout(writeout)
        .build()
        .map_err(|e| BenchError::failed("building the cache", e))
}

/// The shared files, written whole and synced before the clock starts;
/// each client gets handles of its own.
fn create_files(
    cache: &Cache,
    dir: &Path,
    clients: usize,
) -> Result<(Vec<TempFile>, Vec<Vec<File>>), BenchError> {
    let data = vec![0x5a_u8; FILE_BYTES];
    let mut guards = Vec::new();
    for i in 0..FILES {
        let path = dir.join(format!("wb-bench-stable-{i}.dat"));
        guards.push(TempFile::new(path.clone()));
        let f = cache
            .open(&path, OpenOptions { create: true })
            .map_err(|e| BenchError::failed(path.display(), e))?;
        f.write_at(&data, 0)
            .and_then(|_| f.sync_data())
            .map_err(|e| BenchError::failed(path.display(), e))?;
    }
    let mut files = Vec::new();
    for _ in 0..clients {
        let mine = guards
            .iter()
            .map(|g| {
                cache
                    .open(g.path(), OpenOptions::default())
                    .map_err(|e| BenchError::failed(g.path().display(), e))
            })
            .collect::<Result<Vec<File>, BenchError>>()?;
        files.push(mine);
    }
    Ok((guards, files))
}

/// What one client did: its write latencies and bytes written.
fn client(files: &[File], seed: u64, deadline: Instant) -> Result<(Histogram<u64>, u64), String> {
    let mut hist = Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3).map_err(|e| e.to_string())?;
    let mut rng = SplitMix64::seed_from_u64(seed);
    let mut block = vec![0u8; BLOCK];
    let (mut last_file, mut last_at) = (0usize, 0u64);
    let mut written = 0u64;
    let mut n = 0u64;
    while Instant::now() < deadline {
        n += 1;
        if n.is_multiple_of(FLUSH_EVERY) {
            files[last_file].sync_data().map_err(|e| e.to_string())?;
        } else if n.is_multiple_of(READ_EVERY) {
            files[last_file]
                .read_at(&mut block, last_at)
                .map_err(|e| e.to_string())?;
        } else {
            last_file = (rng.next_u64() % files.len() as u64) as usize;
            last_at = rng.next_u64() % (FILE_BYTES / BLOCK) as u64 * BLOCK as u64;
            block.fill(n as u8);
            let start = Instant::now();
            files[last_file]
                .write_at(&block, last_at)
                .map_err(|e| e.to_string())?;
            hist.saturating_record(start.elapsed().as_nanos().max(1) as u64);
            written += BLOCK as u64;
        }
    }
    Ok((hist, written))
}

fn run_one(
    args: &StableArgs,
    dir: &Path,
    &(name, mode, writeout): &(&str, &str, Writeout),
) -> Result<RunResult, BenchError> {
    let cache = build_cache(args, mode, writeout)?;
    let (_guards, files) = create_files(&cache, dir, args.clients)?;
    let written_back =
        |c: &Cache| -> u64 { c.stats().devices.iter().map(|d| d.pages_written).sum() };
    let stats0 = cache.stats();
    let back0 = written_back(&cache);
    let cpu0 = own_cpu()?;
    let start = Instant::now();
    let deadline = start + Duration::from_secs(args.seconds);
    let outcomes: Vec<Result<(Histogram<u64>, u64), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = files
            .iter()
            .enumerate()
            .map(|(c, mine)| s.spawn(move || client(mine, 0x57ab_1e00 + c as u64, deadline)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a client thread panicked".into()))
            })
            .collect()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let cpu1 = own_cpu()?;
    let back = written_back(&cache) - back0;
    let stats = cache.stats();
    let mut hist = Histogram::<u64>::new_with_bounds(1, LATENCY_MAX_NS, 3)
        .map_err(|e| BenchError::failed("latency histogram", e))?;
    let mut bytes = 0;
    for outcome in outcomes {
        let (h, b) = outcome.map_err(|e| BenchError::failed(format!("{name} client"), e))?;
        hist.add(&h)
            .map_err(|e| BenchError::failed("latency histogram", e))?;
        bytes += b;
    }
    let cpu_s = (cpu1.0 - cpu0.0) + (cpu1.1 - cpu0.1);
    let back_gib = (back * wb_engine::PAGE_SIZE) as f64 / GIB;
    let us = |ns: u64| ns as f64 / 1000.0;
    let stable = wb_engine::StallReason::StablePage;
    Ok(RunResult {
        p50_us: us(hist.value_at_quantile(0.5)),
        p99_us: us(hist.value_at_quantile(0.99)),
        p99_9_us: us(hist.value_at_quantile(0.999)),
        max_us: us(hist.max()),
        mib_s: bytes as f64 / MIB / elapsed,
        cpu_s_per_gib: (back_gib > 0.0).then(|| cpu_s / back_gib),
        cpu_s,
        back_mib: back_gib * 1024.0,
        stable_waits: stats.stall(stable).count - stats0.stall(stable).count,
        snapshot_pages: stats.devices.iter().map(|d| d.snapshot_pages).sum::<u64>()
            - stats0.devices.iter().map(|d| d.snapshot_pages).sum::<u64>(),
    })
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}x", a / b)
    } else {
        "-".to_string()
    }
}

fn render(args: &StableArgs, results: &[RunResult]) -> Doc {
    let mut out = Doc::new();
    writeln!(
        out,
        "dbench-like rewrites: {} clients sharing {} files of 256 KiB, 4 KiB writes, {} s per run, \
         cache {}, medians of {} rounds; zero-copy writeout but for always-copy\n",
        args.clients, FILES, args.seconds, args.memory, args.repeat
    )
    .expect("a Doc takes any text");
    let mut t = Table::new(&[
        "config",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "max us",
        "MiB/s",
        "cpu s/GiB",
        "stable waits",
        "pages copied",
    ]);
    for ((name, _, _), r) in CONFIGS.iter().zip(results) {
        t.row(vec![
            name.to_string(),
            format!("{:.1}", r.p50_us),
            format!("{:.1}", r.p99_us),
            format!("{:.1}", r.p99_9_us),
            format!("{:.1}", r.max_us),
            format!("{:.1}", r.mib_s),
            r.cpu_s_per_gib.map_or("-".into(), |c| format!("{c:.2}")),
            r.stable_waits.to_string(),
            r.snapshot_pages.to_string(),
        ]);
    }
    out.table(t);
    let wait = results[0];
    for ((name, _, _), r) in CONFIGS.iter().zip(results).skip(1) {
        writeln!(
            out,
            "{name} / wait: p99.9 {}, max {}, MiB/s {}",
            ratio(r.p99_9_us, wait.p99_9_us),
            ratio(r.max_us, wait.max_us),
            ratio(r.mib_s, wait.mib_s)
        )
        .expect("a Doc takes any text");
    }
    let cpu = |i: usize| results[i].cpu_s_per_gib.unwrap_or(0.0);
    writeln!(
        out,
        "none (zero-copy) / always-copy: CPU per GiB written back {}",
        ratio(cpu(1), cpu(3))
    )
    .expect("a Doc takes any text");
    out
}

fn print_json(args: &StableArgs, results: &[RunResult]) {
    let configs: Vec<_> = CONFIGS
        .iter()
        .zip(results)
        .map(|((name, _, _), r)| {
            json!({
                "name": name,
                "write_lat_us": {"p50": r.p50_us, "p99": r.p99_us, "p99_9": r.p99_9_us, "max": r.max_us},
                "mib_s": r.mib_s,
                "cpu_s_per_gib": r.cpu_s_per_gib,
                "stable_waits": r.stable_waits,
                "snapshot_pages": r.snapshot_pages,
            })
        })
        .collect();
    let out = json!({
        "clients": args.clients,
        "seconds": args.seconds,
        "repeat": args.repeat,
        "memory": args.memory,
        "configs": configs,
    });
    println!("{out}");
}
