//! One run of one configuration: a new file written sequentially in
//! 1 MiB calls, each timed, then one fdatasync, while a thread samples how
//! much is dirty or under writeback; then what stayed cached.

use super::report::{Latency, RunResult};
use super::{Dontcache, CHUNK};
use crate::bench::kernel_write::{self, Mode};
use crate::bench::pagecache::{discard, read_meminfo_level, resident_bytes};
use crate::bench::{BenchError, SplitMix64, MIB};
use hdrhistogram::Histogram;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use writeback::{Cache, OpenOptions, WriteFlags};

/// How often dirty + writeback is sampled during a run.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(20);
/// Longest write call the latency histogram tells apart (10 minutes).
const LATENCY_MAX_NS: u64 = 600_000_000_000;
const SEED: u64 = 0xd0_4ca4e;

/// Clears the way for the next run: the previous run's file dropped from
/// the page cache and removed, everything synced, the free space trimmed
/// (so a loop device's image allocates anew in every run, not only in the
/// first). Returns whether the trim worked.
pub fn settle(exp: &Dontcache) -> bool {
    discard(&exp.file);
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    std::process::Command::new("fstrim")
        .arg(&exp.dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A histogram of write-call latencies in nanoseconds.
fn latency_histogram() -> Result<Histogram<u64>, BenchError> {
    Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3)
        .map_err(|e| BenchError::failed("latency histogram", e))
}

/// The run's buffer: 1 MiB of pseudo-random bytes, 4 KiB-aligned (for
/// O_DIRECT; the other writers do not mind).
fn fill_buffer() -> writeback::io::AlignedBuf {
    let mut buf = writeback::io::AlignedBuf::new(CHUNK as usize);
    assert!(
        (buf.as_slice().as_ptr() as usize).is_multiple_of(kernel_write::DIRECT_ALIGN),
        "AlignedBuf is page-aligned"
    );
    SplitMix64::seed_from_u64(SEED).fill_bytes(buf.as_mut_slice());
    buf
}

/// Writes `size` bytes in CHUNK calls of `write`, each timed into `hist`.
/// The first 8 bytes of every chunk hold its offset, so no two chunks are
/// alike (stamped outside the timed call).
fn write_loop(
    size: u64,
    buf: &mut [u8],
    hist: &mut Histogram<u64>,
    mut write: impl FnMut(&[u8], u64) -> Result<(), BenchError>,
) -> Result<(), BenchError> {
    let mut offset = 0;
    while offset < size {
        buf[..8].copy_from_slice(&offset.to_ne_bytes());
        let t = Instant::now();
        write(buf, offset)?;
        hist.saturating_record(t.elapsed().as_nanos().min(u64::MAX as u128) as u64);
        offset += CHUNK;
    }
    Ok(())
}

pub fn run_kernel(
    exp: &Dontcache,
    mode: Mode,
) -> Result<(RunResult, Option<&'static str>), BenchError> {
    let path = &exp.file;
    let fail = |e: io::Error| -> BenchError {
        if mode == Mode::Dontcache && kernel_write::is_unsupported(&e) {
            BenchError::Failed(kernel_write::unsupported_message(&exp.dir))
        } else {
            BenchError::failed(path.display(), e)
        }
    };
    let file = kernel_write::create(path, mode).map_err(fail)?;
    let mut buf = fill_buffer();
    let mut hist = latency_histogram()?;
    let level = || read_meminfo_level().unwrap_or(0);
    let (elapsed, dirty_peak) = sampled(&level, || -> Result<Duration, BenchError> {
        let start = Instant::now();
        write_loop(exp.size, buf.as_mut_slice(), &mut hist, |b, off| {
            kernel_write::write_all_at(&file, mode, b, off).map_err(fail)
        })?;
        file.sync_data().map_err(fail)?;
        Ok(start.elapsed())
    });
    let elapsed = elapsed?;
    drop(file);
    let cached = resident_bytes(path)
        .map_err(|e| BenchError::failed(format!("mincore of {}", path.display()), e))?;
    Ok((result(exp.size, elapsed, &hist, dirty_peak, cached), None))
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum EngineMode {
    Buffered,
    Dontcache,
    DontcacheInline,
}

pub fn run_engine(
    exp: &Dontcache,
    mode: EngineMode,
) -> Result<(RunResult, Option<&'static str>), BenchError> {
    let path = &exp.file;
    let flush = if mode == EngineMode::DontcacheInline {
        "inline"
    } else {
        "kick"
    };
    let cache = Cache::builder()
        .knob("memory", &exp.memory.to_string())
        .and_then(|b| b.knob("dontcache_flush", flush))
        .map_err(|e| BenchError::failed("configuring the cache", e))?
        .data_dir(&exp.data_dir)
        .calibrate(true)
        .build()
        .map_err(|e| BenchError::failed("starting the cache", e))?;
    let fail = |e: writeback::Error| BenchError::failed(path.display(), e);
    let file = cache
        .open(path, OpenOptions { create: true })
        .map_err(fail)?;
    let flags = match mode {
        EngineMode::Buffered => WriteFlags::default(),
        EngineMode::Dontcache | EngineMode::DontcacheInline => WriteFlags::DONTCACHE,
    };
    let mut buf = fill_buffer();
    let mut hist = latency_histogram()?;
    let level = || {
        let s = cache.stats();
        (s.dirty_pages + s.writeback_pages) * wb_engine::PAGE_SIZE
    };
    let (elapsed, dirty_peak) = sampled(&level, || -> Result<Duration, BenchError> {
        let start = Instant::now();
        write_loop(exp.size, buf.as_mut_slice(), &mut hist, |b, off| {
            file.write_at_with(b, off, flags).map_err(fail)
        })?;
        file.sync_data().map_err(fail)?;
        Ok(start.elapsed())
    });
    let elapsed = elapsed?;
    let cached = cache.stats().cached_pages * wb_engine::PAGE_SIZE;
    let backend = cache.io_backend();
    drop(file);
    drop(cache);
    Ok((
        result(exp.size, elapsed, &hist, dirty_peak, cached),
        Some(backend),
    ))
}

fn result(
    size: u64,
    elapsed: Duration,
    hist: &Histogram<u64>,
    dirty_peak: u64,
    cached: u64,
) -> RunResult {
    RunResult {
        mib_s: size as f64 / MIB / elapsed.as_secs_f64().max(1e-9),
        lat: Latency::of(hist),
        dirty_peak_mib: dirty_peak as f64 / MIB,
        cached_end_mib: cached as f64 / MIB,
    }
}

/// Runs `body` while a thread samples `level()` every SAMPLE_EVERY (and
/// once more as it ends). Returns what `body` returned and the highest
/// sample above the one taken just before `body` started (0 if none was).
pub fn sampled<T>(level: &(dyn Fn() -> u64 + Sync), body: impl FnOnce() -> T) -> (T, u64) {
    /// Stops the sampler however `body` ends (also by a panic, which
    /// would otherwise leave the scope waiting for it forever).
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = AtomicBool::new(false);
    let baseline = level();
    std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut peak = 0;
            loop {
                let done = stop.load(Ordering::Relaxed);
                peak = peak.max(level());
                if done {
                    return peak;
                }
                std::thread::sleep(SAMPLE_EVERY);
            }
        });
        let out = {
            let _stop = StopOnDrop(&stop);
            body()
        };
        let peak = sampler.join().unwrap_or(0);
        (out, peak.saturating_sub(baseline))
    })
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampler_reports_the_peak_above_the_baseline() {
        let value = std::sync::atomic::AtomicU64::new(100);
        let level = || value.load(Ordering::Relaxed);
        let (out, peak) = sampled(&level, || {
            value.store(180, Ordering::Relaxed);
            std::thread::sleep(SAMPLE_EVERY * 3);
            value.store(40, Ordering::Relaxed);
            7
        });
        assert_eq!((out, peak), (7, 80));
        // Below the baseline throughout: floored at 0.
        let (_, peak) = sampled(&level, || value.store(10, Ordering::Relaxed));
        assert_eq!(peak, 0);
    }
}
