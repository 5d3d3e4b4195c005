//! The library as the writer of the engine's configurations: a thread
//! writing the file sequentially in 1 MiB `write_at` calls through a
//! [`Cache`] for a time (over the file again from its start each time it
//! reaches the end), then `sync_data`.

use super::sweep::SweepPoint;
use super::{Interference, CHUNK};
use crate::bench::kernel_write::WriteSpan;
use crate::bench::{BenchError, SplitMix64, MIB};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use wb_engine::units::format_bytes;
use writeback::{Cache, CacheBuilder, OpenOptions, WriteFlags};

/// What the engine writer did.
pub struct EngineOutcome {
    bytes: u64,
    /// From the first write_at to the return of sync_data.
    elapsed: Duration,
    stats: writeback::Stats,
}

impl EngineOutcome {
    pub fn mib_s(&self) -> f64 {
        self.bytes as f64 / MIB / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// What the engine did while it wrote: throttling, wbt, writes, dirty peak.
    pub fn describe(&self) -> String {
        let d = self.stats.devices.first();
        format!(
            "engine: {} dirty-throttle pauses ({:.0} ms in all), wbt {} \
             (target {:.1} ms, {} scale-downs, {} ups, depth {}..{}), \
             {} writes of {:.0} KiB on average, dirty peak {}",
            d.map_or(0, |d| d.throttle.count),
            d.map_or(0.0, |d| d.throttle.total_ns as f64 / 1e6),
            if d.is_some_and(|d| d.wbt_enabled) {
                "on"
            } else {
                "off"
            },
            d.map_or(0.0, |d| d.wbt_target_ns as f64 / 1e6),
            d.map_or(0, |d| d.wbt_scale_downs),
            d.map_or(0, |d| d.wbt_scale_ups),
            d.map_or(0, |d| d.wbt_max_depth_min),
            d.map_or(0, |d| d.wbt_max_depth_max),
            d.map_or(0, |d| d.writes),
            d.map_or(0.0, |d| (d.pages_written * wb_engine::PAGE_SIZE) as f64
                / 1024.0
                / d.writes.max(1) as f64),
            format_bytes(self.stats.dirty_peak_pages * wb_engine::PAGE_SIZE)
        )
    }
}

/// The writer on its thread. Dropping it early (on an error elsewhere)
/// stops the writer and waits for it.
pub struct EngineWriter {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<EngineOutcome, String>>>,
}

impl EngineWriter {
    /// The writer with wbt automatic or off, then the --sweep knob's
    /// value `point` (which may set wbt_lat_usec after that).
    pub fn start(
        exp: &Interference,
        wbt_auto: bool,
        point: Option<&SweepPoint>,
        flags: WriteFlags,
        runtime: Duration,
    ) -> Result<EngineWriter, BenchError> {
        let cache = build_cache(exp, wbt_auto, point)?;
        // Opening the first file of a device calibrates it (once; remembered in data_dir).
        let file = cache
            .open(&exp.writer_file, OpenOptions { create: true })
            .map_err(|e| BenchError::failed("opening the engine writer's file", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let span = WriteSpan {
            size: exp.writer_size,
            chunk: CHUNK,
            runtime: Some(runtime),
        };
        let stop_flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("wb-bench-writer".into())
            .spawn(move || write(cache, file, span, flags, &stop_flag))
            .map_err(|e| BenchError::failed("starting the engine writer thread", e))?;
        Ok(EngineWriter {
            stop,
            thread: Some(thread),
        })
    }

    pub fn has_finished(&self) -> bool {
        match &self.thread {
            Some(t) => t.is_finished(),
            None => true,
        }
    }

    pub fn finish(mut self) -> Result<EngineOutcome, BenchError> {
        let thread = self
            .thread
            .take()
            .ok_or_else(|| BenchError::Failed("engine writer already joined".into()))?;
        match thread.join() {
            Ok(result) => result.map_err(BenchError::Failed),
            Err(_) => Err(BenchError::Failed(
                "the engine writer thread panicked".into(),
            )),
        }
    }
}

impl Drop for EngineWriter {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.store(true, Ordering::Relaxed);
            let _ = t.join();
        }
    }
}

/// The writer's cache: the engine's memory, the --engine-set knobs, wbt
/// automatic or off, then the --sweep knob's value `point`.
fn build_cache(
    exp: &Interference,
    wbt_auto: bool,
    point: Option<&SweepPoint>,
) -> Result<Cache, BenchError> {
    let set = |builder: CacheBuilder, knob: &str, value: &str, what: &str| {
        if wb_engine::Config::KNOBS.contains(&knob) {
            builder.knob(knob, value)
        } else {
            builder.device_knob(knob, value)
        }
        .map_err(|e| BenchError::BadInput(format!("{what}: {e}")))
    };
    let mut builder = set(
        Cache::builder(),
        "memory",
        &exp.memory.to_string(),
        "--memory",
    )?;
    for (knob, value) in &exp.engine_sets {
        builder = set(builder, knob, value, "--engine-set")?;
    }
    let wbt = if wbt_auto { "-1" } else { "0" };
    builder = set(builder, "wbt_lat_usec", wbt, "wbt_lat_usec")?;
    if let Some(p) = point {
        builder = set(builder, &p.knob, &p.value, "--sweep")?;
    }
    builder
        .data_dir(&exp.data_dir)
        .calibrate(true)
        .build()
        .map_err(|e| BenchError::failed("starting the cache", e))
}

/// The writer's thread: writes `span` through `file`, then sync_data.
fn write(
    cache: Cache,
    file: writeback::File,
    span: WriteSpan,
    flags: WriteFlags,
    stop: &AtomicBool,
) -> Result<EngineOutcome, String> {
    let mut buf = vec![0u8; CHUNK];
    SplitMix64::seed_from_u64(0xb0b).fill_bytes(&mut buf);
    let start = Instant::now();
    let (mut offset, mut bytes) = (0u64, 0u64);
    while let Some((at, len)) = span.next(offset, start) {
        if stop.load(Ordering::Relaxed) {
            return Err("stopped".into());
        }
        buf[..8].copy_from_slice(&at.to_ne_bytes());
        file.write_at_with(&buf[..len], at, flags)
            .map_err(|e| format!("engine writer: write at {at}: {e}"))?;
        offset = at + len as u64;
        bytes += len as u64;
    }
    file.sync_data()
        .map_err(|e| format!("engine writer: sync_data: {e}"))?;
    let elapsed = start.elapsed();
    let stats = cache.stats();
    drop(file);
    drop(cache);
    Ok(EngineOutcome {
        bytes,
        elapsed,
        stats,
    })
}
