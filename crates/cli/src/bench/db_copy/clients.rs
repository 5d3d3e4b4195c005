//! The database's clients: threads running transactions (three random
//! 8 KiB reads, one write, fdatasync) on the hot file, each timed, for a
//! time or while the copy runs.

use super::files::write_copy;
use super::{DbCopy, PAGE_BYTES};
use crate::bench::table;
use crate::bench::{BenchError, SplitMix64};
use hdrhistogram::Histogram;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use serde_json::json;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Reads in a transaction, before its one write and the commit.
const READS_PER_TXN: usize = 3;

/// Transactions of one phase.
pub struct Phase {
    pub txns: u64,
    pub seconds: f64,
    pub lat_us: Histogram<u64>,
    /// Where a transaction's time went: its reads, its write, its commit.
    pub parts_us: Parts,
}

/// Latencies of a transaction's parts, in microseconds.
pub struct Parts {
    pub reads: Histogram<u64>,
    pub write: Histogram<u64>,
    pub commit: Histogram<u64>,
}

impl Parts {
    fn new() -> Result<Parts, hdrhistogram::CreationError> {
        Ok(Parts {
            reads: latency_histogram()?,
            write: latency_histogram()?,
            commit: latency_histogram()?,
        })
    }

    fn add(&mut self, other: &Parts) -> Result<(), hdrhistogram::AdditionError> {
        self.reads.add(&other.reads)?;
        self.write.add(&other.write)?;
        self.commit.add(&other.commit)
    }

    /// "reads p99 X ms, write p99 Y ms, commit p99 Z ms".
    pub fn p99s(&self) -> String {
        let p99 = |h: &Histogram<u64>| table::ms(h.value_at_quantile(0.99) as f64);
        format!(
            "reads p99 {} ms, write p99 {} ms, commit p99 {} ms",
            p99(&self.reads),
            p99(&self.write),
            p99(&self.commit)
        )
    }
}

impl Phase {
    pub fn tps(&self) -> f64 {
        self.txns as f64 / self.seconds.max(1e-9)
    }

    pub fn p99_us(&self) -> f64 {
        self.lat_us.value_at_quantile(0.99) as f64
    }

    pub fn json(&self) -> serde_json::Value {
        json!({
            "tps": self.tps(),
            "lat_us": {
                "p50": self.lat_us.value_at_quantile(0.5),
                "p90": self.lat_us.value_at_quantile(0.9),
                "p99": self.lat_us.value_at_quantile(0.99),
                "max": self.lat_us.max(),
            },
        })
    }
}

/// Runs the clients for `length`.
pub fn clients_for(exp: &DbCopy, hot: &Path, length: Duration) -> Result<Phase, BenchError> {
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let threads = spawn_clients(exp, hot, &stop)?;
    std::thread::sleep(length);
    stop.store(true, Ordering::Relaxed);
    collect(threads, started.elapsed().as_secs_f64())
}

/// Runs the clients while the copy runs; returns their phase and the
/// copy's seconds (writes and the fsync).
pub fn clients_during_copy(
    exp: &DbCopy,
    hot: &Path,
    copy: &Path,
) -> Result<(Phase, f64), BenchError> {
    let stop = Arc::new(AtomicBool::new(false));
    let threads = spawn_clients(exp, hot, &stop)?;
    let started = Instant::now();
    let copied = write_copy(copy, exp.copy_size);
    let copy_s = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let phase = collect(threads, copy_s)?;
    copied?;
    Ok((phase, copy_s))
}

type Client = std::thread::JoinHandle<Result<(u64, Histogram<u64>, Parts), String>>;

fn spawn_clients(
    exp: &DbCopy,
    hot: &Path,
    stop: &Arc<AtomicBool>,
) -> Result<Vec<Client>, BenchError> {
    let pages = exp.hot_size / PAGE_BYTES;
    (0..exp.clients)
        .map(|i| {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(hot)
                .map_err(|e| BenchError::failed(hot.display(), e))?;
            let stop = Arc::clone(stop);
            let seed = 0x5eed + i as u64;
            Ok(std::thread::spawn(move || {
                client(&file, pages, seed, &stop)
            }))
        })
        .collect()
}

/// One client: transactions until `stop`; returns how many, their
/// latencies and their parts' latencies, in microseconds.
fn client(
    file: &File,
    pages: u64,
    seed: u64,
    stop: &AtomicBool,
) -> Result<(u64, Histogram<u64>, Parts), String> {
    let mut lat = latency_histogram().map_err(|e| e.to_string())?;
    let mut parts = Parts::new().map_err(|e| e.to_string())?;
    let us = |since: Instant| since.elapsed().as_micros() as u64;
    let mut rng = SplitMix64::seed_from_u64(seed);
    let mut buf = vec![0u8; PAGE_BYTES as usize];
    let mut txns = 0;
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        for _ in 0..READS_PER_TXN {
            let off = rng.next_u64() % pages * PAGE_BYTES;
            file.read_exact_at(&mut buf, off)
                .map_err(|e| format!("read at {off}: {e}"))?;
        }
        parts.reads.saturating_record(us(t));
        let off = rng.next_u64() % pages * PAGE_BYTES;
        rng.fill_bytes(&mut buf[..64]);
        let w = Instant::now();
        file.write_all_at(&buf, off)
            .map_err(|e| format!("write at {off}: {e}"))?;
        parts.write.saturating_record(us(w));
        let c = Instant::now();
        file.sync_data().map_err(|e| format!("fdatasync: {e}"))?;
        parts.commit.saturating_record(us(c));
        lat.saturating_record(us(t));
        txns += 1;
    }
    Ok((txns, lat, parts))
}

/// Microseconds from 1 to 10 minutes, 3 significant digits (a longer
/// transaction counts as 10 minutes).
fn latency_histogram() -> Result<Histogram<u64>, hdrhistogram::CreationError> {
    Histogram::new_with_bounds(1, 600_000_000, 3)
}

fn collect(threads: Vec<Client>, seconds: f64) -> Result<Phase, BenchError> {
    let mut phase = Phase {
        txns: 0,
        seconds,
        lat_us: latency_histogram().map_err(|e| BenchError::Failed(e.to_string()))?,
        parts_us: Parts::new().map_err(|e| BenchError::Failed(e.to_string()))?,
    };
    for t in threads {
        let (txns, lat, parts) = t
            .join()
            .map_err(|_| BenchError::Failed("a client panicked".into()))?
            .map_err(|e| BenchError::Failed(format!("a client failed: {e}")))?;
        phase.txns += txns;
        phase
            .lat_us
            .add(&lat)
            .map_err(|e| BenchError::Failed(e.to_string()))?;
        phase
            .parts_us
            .add(&parts)
            .map_err(|e| BenchError::Failed(e.to_string()))?;
    }
    Ok(phase)
}
