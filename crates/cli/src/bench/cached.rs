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

use super::cleanup::TempFile;
use super::doc::Doc;
use super::table::{self, Table};
use super::{median, parse_repeat, parse_seconds, prepare_dir, progress, BenchError, SplitMix64};
use crate::html_file::HtmlFile;
use clap::Args;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use serde_json::json;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::{Duration, Instant};
use writeback::{Cache, OpenOptions};

const FILE_SIZE: u64 = 64 << 20;
const BLOCK: usize = 4096;
const FILL_CHUNK: usize = 1 << 20;
const MEMORY: &str = "256MiB";
/// Raised so a fully dirty file (25% of memory) stays under it.
const BACKGROUND_RATIO: &str = "40";
const DIRTY_RATIO: &str = "50";
const SEED: u64 = 0x00c0_ffee;
/// Operations between two looks at the clock.
const CLOCK_EVERY: u64 = 64;

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
enum Op {
    Read,
    Write,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Kernel,
    Engine,
    /// The engine with a trace being recorded (`--traced`).
    EngineTraced,
}

fn name(side: Side, op: Op) -> &'static str {
    match (side, op) {
        (Side::Kernel, Op::Read) => "kernel-pread",
        (Side::Engine, Op::Read) => "engine-read",
        (Side::Kernel, Op::Write) => "kernel-pwrite",
        (Side::Engine, Op::Write) => "engine-write",
        (Side::EngineTraced, Op::Read) => "engine-read-traced",
        (Side::EngineTraced, Op::Write) => "engine-write-traced",
    }
}

struct Measurement {
    side: Side,
    op: Op,
    threads: usize,
    ops_s: f64,
}

pub fn run(args: CachedArgs, html: Option<HtmlFile>) -> Result<(), BenchError> {
    let dir = prepare_dir(&args.dir)?;
    let seconds = Duration::from_secs(args.seconds);

    // Temp files first: dropped last, after the handles and the cache.
    let engine_path = TempFile::new(dir.join("wb-bench-cached-engine.dat"));
    let kernel_path = TempFile::new(dir.join("wb-bench-cached-kernel.dat"));

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

    let blocks = FILE_SIZE / BLOCK as u64;
    let mut samples: Vec<Measurement> = Vec::new();
    let mut engine_written_pages = 0;
    let mut engine_device_reads = 0;
    let mut engine_reclaimed = 0;
    let mut kernel_written_pages: Option<u64> = Some(0);
    for repeat in 1..=args.repeat {
        // Start each repeat clean, so nothing dirtied in an earlier one
        // reaches dirty_expire (30 s) and gets written back during this one.
        engine_file
            .sync_data()
            .map_err(|e| BenchError::failed(engine_path.path().display(), e))?;
        kernel_file
            .sync_data()
            .map_err(|e| BenchError::failed(kernel_path.path().display(), e))?;
        for op in [Op::Read, Op::Write] {
            for threads in [1, 2] {
                let sides: &[Side] = if args.traced {
                    &[Side::Kernel, Side::Engine, Side::EngineTraced]
                } else {
                    &[Side::Kernel, Side::Engine]
                };
                for &side in sides {
                    if side == Side::EngineTraced {
                        cache.start_trace(wb_trace::DEFAULT_CAPACITY);
                    }
                    let before = cache.stats();
                    let vm_before = nr_written();
                    let ops_s = match (side, op) {
                        (Side::Kernel, Op::Read) => {
                            measure(threads, seconds, blocks, |off, buf| {
                                kernel_file
                                    .read_exact_at(buf, off)
                                    .map_err(|e| e.to_string())
                            })
                        }
                        (Side::Kernel, Op::Write) => {
                            measure(threads, seconds, blocks, |off, buf| {
                                kernel_file
                                    .write_all_at(buf, off)
                                    .map_err(|e| e.to_string())
                            })
                        }
                        (Side::Engine | Side::EngineTraced, Op::Read) => {
                            measure(threads, seconds, blocks, |off, buf| {
                                match engine_file.read_at(buf, off) {
                                    Ok(n) if n == buf.len() => Ok(()),
                                    Ok(n) => Err(format!("short read: {n} bytes at {off}")),
                                    Err(e) => Err(e.to_string()),
                                }
                            })
                        }
                        (Side::Engine | Side::EngineTraced, Op::Write) => {
                            measure(threads, seconds, blocks, |off, buf| {
                                engine_file.write_at(buf, off).map_err(|e| e.to_string())
                            })
                        }
                    }
                    .map_err(|e| BenchError::Failed(format!("{}: {e}", name(side, op))))?;
                    let after = cache.stats();
                    // The trace itself is not kept: only its cost is measured.
                    drop(cache.stop_trace());
                    match side {
                        Side::Engine | Side::EngineTraced => {
                            engine_written_pages +=
                                after.written_pages.saturating_sub(before.written_pages);
                            engine_reclaimed +=
                                after.reclaimed_pages.saturating_sub(before.reclaimed_pages);
                            engine_device_reads += device_pages_read(&after)
                                .saturating_sub(device_pages_read(&before));
                        }
                        Side::Kernel if op == Op::Write => {
                            kernel_written_pages =
                                match (kernel_written_pages, vm_before, nr_written()) {
                                    (Some(sum), Some(b), Some(a)) => {
                                        Some(sum + a.saturating_sub(b))
                                    }
                                    _ => None,
                                };
                        }
                        Side::Kernel => {}
                    }
                    progress!(
                        "{} x{threads} ({repeat}/{}): {} ops/s",
                        name(side, op),
                        args.repeat,
                        table::rate(ops_s)
                    );
                    samples.push(Measurement {
                        side,
                        op,
                        threads,
                        ops_s,
                    });
                }
            }
        }
    }
    let results = medians(&samples);

    let page = wb_engine::PAGE_SIZE;
    let checks = vec![
        format!(
            "engine: {} MiB written back during the runs (expected 0: a fully dirty file stays \
             under the 40% background threshold), {} pages reclaimed, {} pages read from the device",
            (engine_written_pages * page) >> 20,
            engine_reclaimed,
            engine_device_reads
        ),
        match kernel_written_pages {
            Some(p) => format!(
                "kernel: {} MiB written machine-wide during the pwrite runs (/proc/vmstat nr_written; \
                 expected about 0: 64 MiB is under the kernel's background threshold)",
                (p * page) >> 20
            ),
            None => "kernel: /proc/vmstat unreadable, writeback during the pwrite runs unknown"
                .into(),
        },
    ];
    drop(engine_file);
    drop(cache);
    drop(kernel_file);

    let doc = render(&results, args.seconds, args.repeat, &checks);
    if args.json {
        let list: Vec<_> = results
            .iter()
            .map(|m| json!({"name": name(m.side, m.op), "threads": m.threads, "ops_s": m.ops_s}))
            .collect();
        for c in &checks {
            progress!("{c}");
        }
        println!("{}", json!({ "results": list }));
    } else {
        print!("{doc}");
    }
    super::write_html(html, "wb bench cached", &doc)
}

/// One measurement per (side, op, threads): the median of its samples.
fn medians(samples: &[Measurement]) -> Vec<Measurement> {
    let mut out: Vec<Measurement> = Vec::new();
    for m in samples {
        if out
            .iter()
            .any(|o| o.side == m.side && o.op == m.op && o.threads == m.threads)
        {
            continue;
        }
        let values: Vec<f64> = samples
            .iter()
            .filter(|o| o.side == m.side && o.op == m.op && o.threads == m.threads)
            .map(|o| o.ops_s)
            .collect();
        out.push(Measurement {
            side: m.side,
            op: m.op,
            threads: m.threads,
            ops_s: median(&values),
        });
    }
    out
}

fn device_pages_read(s: &writeback::Stats) -> u64 {
    s.devices.iter().map(|d| d.pages_read).sum()
}

/// Pages written by the kernel so far (machine-wide), from /proc/vmstat.
fn nr_written() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/vmstat").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("nr_written "))
        .and_then(|v| v.trim().parse().ok())
}

fn fill_engine(cache: &Cache, path: &Path) -> Result<writeback::File, BenchError> {
    let fail = |e: writeback::Error| BenchError::failed(path.display(), e);
    let file = cache
        .open(path, OpenOptions { create: true })
        .map_err(fail)?;
    file.set_len(0).map_err(fail)?;
    let mut buf = vec![0u8; FILL_CHUNK];
    SplitMix64::seed_from_u64(SEED).fill_bytes(&mut buf);
    for off in (0..FILE_SIZE).step_by(FILL_CHUNK) {
        file.write_at(&buf, off).map_err(fail)?;
    }
    file.sync_data().map_err(fail)?;
    for off in (0..FILE_SIZE).step_by(FILL_CHUNK) {
        file.read_at(&mut buf, off).map_err(fail)?;
    }
    Ok(file)
}

fn fill_kernel(path: &Path) -> Result<std::fs::File, BenchError> {
    let fail = |e: std::io::Error| BenchError::failed(path.display(), e);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(fail)?;
    let mut buf = vec![0u8; FILL_CHUNK];
    SplitMix64::seed_from_u64(SEED).fill_bytes(&mut buf);
    for off in (0..FILE_SIZE).step_by(FILL_CHUNK) {
        file.write_all_at(&buf, off).map_err(fail)?;
    }
    file.sync_data().map_err(fail)?;
    for off in (0..FILE_SIZE).step_by(FILL_CHUNK) {
        file.read_exact_at(&mut buf, off).map_err(fail)?;
    }
    Ok(file)
}

/// Runs `op` on `threads` threads for `duration`, each at random block
/// offsets from its own fixed-seed PRNG; returns operations per second
/// (the sum of each thread's rate).
fn measure<F>(threads: usize, duration: Duration, blocks: u64, op: F) -> Result<f64, String>
where
    F: Fn(u64, &mut [u8]) -> Result<(), String> + Sync,
{
    let barrier = Barrier::new(threads);
    let results: Vec<Result<f64, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (op, barrier) = (&op, &barrier);
                s.spawn(move || -> Result<f64, String> {
                    let mut rng = SplitMix64::seed_from_u64(SEED + t as u64);
                    let mut buf = vec![0u8; BLOCK];
                    rng.fill_bytes(&mut buf);
                    barrier.wait();
                    let start = Instant::now();
                    let mut ops = 0u64;
                    loop {
                        for _ in 0..CLOCK_EVERY {
                            let offset = (rng.next_u64() % blocks) * BLOCK as u64;
                            op(offset, &mut buf)?;
                        }
                        ops += CLOCK_EVERY;
                        if start.elapsed() >= duration {
                            break;
                        }
                    }
                    Ok(ops as f64 / start.elapsed().as_secs_f64())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".into())))
            .collect()
    });
    results.into_iter().sum()
}

fn render(results: &[Measurement], seconds: u64, repeat: usize, checks: &[String]) -> Doc {
    let find = |side: Side, op: Op, threads: usize| {
        results
            .iter()
            .find(|m| m.side == side && m.op == op && m.threads == threads)
            .map(|m| m.ops_s)
    };
    let mut t = Table::new(&["name", "threads", "ops/s", "engine/kernel", "2 threads/1"]);
    for op in [Op::Read, Op::Write] {
        for side in [Side::Kernel, Side::Engine, Side::EngineTraced] {
            for threads in [1, 2] {
                let ops = find(side, op, threads);
                if ops.is_none() && side == Side::EngineTraced {
                    continue;
                }
                t.row(vec![
                    name(side, op).into(),
                    threads.to_string(),
                    ops.map_or("-".into(), table::rate),
                    match side {
                        Side::Engine => table::ratio(ops, find(Side::Kernel, op, threads)),
                        // Traced: against the engine untraced.
                        Side::EngineTraced => table::ratio(ops, find(Side::Engine, op, threads)),
                        Side::Kernel => String::new(),
                    },
                    if threads == 2 {
                        table::ratio(ops, find(side, op, 1))
                    } else {
                        String::new()
                    },
                ]);
            }
        }
    }
    let mut out = Doc::from(format!(
        "4 KiB ops at random offsets of a fully cached 64 MiB file, {seconds} s each, \
         median of {repeat} run{} \
         (engine: memory {MEMORY}, background threshold raised to {BACKGROUND_RATIO}% so no \
         writeback runs).\n\n",
        if repeat == 1 { "" } else { "s" }
    ));
    out.table(t);
    out.push('\n');
    if results.iter().any(|m| m.side == Side::EngineTraced) {
        out.push_str("engine-*-traced rows: the ratio is to the engine without a trace.\n");
    }
    for c in checks {
        out.push_str(c);
        out.push('\n');
    }
    out
}
