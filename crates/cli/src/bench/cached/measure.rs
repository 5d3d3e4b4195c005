//! Filling the two files so every page is cached, and timing 4 KiB
//! operations at random offsets of them on one or more threads.

use super::{BLOCK, CLOCK_EVERY, FILE_SIZE, FILL_CHUNK, SEED};
use crate::bench::{BenchError, SplitMix64};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Barrier;
use std::time::{Duration, Instant};
use writeback::{Cache, OpenOptions};

pub fn device_pages_read(s: &writeback::Stats) -> u64 {
    s.devices.iter().map(|d| d.pages_read).sum()
}

/// Pages written by the kernel so far (machine-wide), from /proc/vmstat.
pub fn nr_written() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/vmstat").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("nr_written "))
        .and_then(|v| v.trim().parse().ok())
}

pub fn fill_engine(cache: &Cache, path: &Path) -> Result<writeback::File, BenchError> {
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

pub fn fill_kernel(path: &Path) -> Result<std::fs::File, BenchError> {
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
pub fn measure<F>(threads: usize, duration: Duration, blocks: u64, op: F) -> Result<f64, String>
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
