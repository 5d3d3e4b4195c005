//! The load of one run: the shared files, and the clients that rewrite
//! them (dbench-like), timed; the CPU time and the bytes written back
//! around them.

use super::{RunResult, StableArgs};
use crate::bench::cleanup::TempFile;
use crate::bench::cpu::own_cpu;
use crate::bench::{BenchError, SplitMix64, MIB};
use hdrhistogram::Histogram;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use std::path::Path;
use std::time::{Duration, Instant};
use writeback::{Cache, File, OpenOptions, Writeout};

pub const FILES: usize = 8;
const FILE_BYTES: usize = 256 << 10;
const BLOCK: usize = 4096;
const READ_EVERY: u64 = 4;
const FLUSH_EVERY: u64 = 50;
const LATENCY_MAX_NS: u64 = 600_000_000_000;
const GIB: f64 = 1024.0 * MIB;

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

pub fn run_one(
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
