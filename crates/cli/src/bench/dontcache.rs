//! `wb bench dontcache`: uncached buffered writes (Linux's RWF_DONTCACHE)
//! through the kernel and through the engine, next to plain buffered and
//! O_DIRECT writes.
//!
//! Every run writes `--size` bytes sequentially, 1 MiB per call, into a new
//! file, then makes it durable with one fdatasync (`sync_data` for the
//! engine), which is part of the throughput time: a buffered writer cannot
//! look fast by leaving its data dirty. Each write call is timed on its
//! own. While a run lasts a thread samples every 20 ms how much data is
//! dirty or under writeback (the kernel: `Dirty` + `Writeback` of
//! /proc/meminfo, machine-wide; the engine: its stats), and after the sync
//! the bench counts what the writer left cached (the kernel: the file's
//! resident pages by mmap + mincore; the engine: its cached pages).
//!
//! Configurations, in this order in every round (rounds repeat them all):
//!
//! - `kernel-buffered`: `pwrite` into the page cache;
//! - `kernel-dontcache`: `pwritev2(RWF_DONTCACHE)`;
//! - `kernel-direct`: O_DIRECT `pwrite` from 4 KiB-aligned buffers;
//! - `engine-buffered`: `File::write_at` through a [`Cache`];
//! - `engine-dontcache`: `File::write_at_with(WriteFlags::DONTCACHE)`,
//!   the flusher kicked to write the pages (`dontcache_flush=kick`);
//! - `engine-dontcache-inline`: the same with `dontcache_flush=inline`
//!   (the writing call submits the pages itself).
//!
//! The kernel's dirty limits are the engine's (20% / 10% of its memory) for
//! the whole bench, so both sides write under the same limits.

use super::cleanup::TempFile;
use super::doc::Doc;
use super::kernel_write::{self, Mode};
use super::sysctl::{self, engine_dirty_limits, DirtyLimitsGuard};
use super::table::{self, Table};
use super::{
    free_bytes, human_bytes, median, parse_repeat, parse_size, prepare_dir, progress, BenchError,
    SplitMix64, MIB,
};
use crate::html_file::HtmlFile;
use clap::Args;
use hdrhistogram::Histogram;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use serde_json::json;
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use writeback::{Cache, OpenOptions, WriteFlags};

/// Bytes per write call.
const CHUNK: u64 = 1 << 20;
/// Smallest --size: below it a run is over before writeback even starts.
const MIN_SIZE: u64 = 64 << 20;
/// How often dirty + writeback is sampled during a run.
const SAMPLE_EVERY: Duration = Duration::from_millis(20);
/// Free space left untouched on the filesystem of --dir.
const SPACE_MARGIN: u64 = 256 << 20;
/// Longest write call the latency histogram tells apart (10 minutes).
const LATENCY_MAX_NS: u64 = 600_000_000_000;
/// The file every run writes (in --dir; removed after every run).
const DATA_FILE: &str = "wb-bench-dontcache.dat";
const SEED: u64 = 0xd0_4ca4e;
const DEFAULT_DIR: &str = "wb-data/bench";

#[derive(Args)]
#[command(after_help = "\
Writes --size bytes sequentially, 1 MiB per call, into a new file in --dir, then one fdatasync
(sync_data for the engine), once per configuration and round; --repeat rounds each run every
configuration in this order, and medians over the rounds are reported:
  kernel-buffered          pwrite into the kernel's page cache
  kernel-dontcache         pwritev2(RWF_DONTCACHE): buffered, pages dropped once written back
  kernel-direct            O_DIRECT pwrite from 4 KiB-aligned buffers
  engine-buffered          the writeback library: File::write_at through a Cache of --memory
  engine-dontcache         File::write_at_with(WriteFlags::DONTCACHE), dontcache_flush=kick
  engine-dontcache-inline  the same with dontcache_flush=inline
Reported per configuration: MiB/s (size / (writes + the final fdatasync)); the latency of
each write call (p50, p99, p99.9, max, in microseconds; the fdatasync is not one of them);
dirty peak (the most dirty + writeback data seen in samples every 20 ms during the writes
and the sync, above the level just before the run: the kernel's Dirty + Writeback from
/proc/meminfo, machine-wide; the engine's dirty + writeback pages); and cached at end (after
the sync: the file's pages resident in the kernel's page cache, by mmap + mincore; for the
engine its cached pages).

The engine runs with its defaults (dirty_ratio 20, dirty_background_ratio 10 of --memory).
For the whole bench vm.dirty_bytes / vm.dirty_background_bytes are set to the engine's
limits in bytes (20% / 10% of --memory), so the kernel writes under the same dirty limits
(and so does any page cache under the filesystem, such as a buffered loop device's); they
are restored afterwards, also on errors and Ctrl-C. This needs root.

Before every run the previous file is dropped from the page cache and removed, everything
is synced and the free space of --dir trimmed (fstrim), so each run starts from the same
disk state. --dir must exist, be writable, support O_DIRECT and RWF_DONTCACHE (Linux 6.14+
and a filesystem implementing it; checked first, the filesystem is named if not), and have
room for --size.

With --json the table goes to standard error, after the progress lines.

Quick run: wb bench dontcache --dir /var/tmp --size 256MiB --repeat 1

Exit status: 0 on success, 1 if a run failed, 2 for bad arguments, an unusable --dir or no
permission to change the dirty limits; 130 on Ctrl-C.")]
pub struct DontcacheArgs {
    /// Directory for the benchmark's file (must exist; default wb-data/bench, created if
    /// missing). The file is removed after every run.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Rounds; each runs every configuration once, and medians are reported.
    #[arg(long, default_value = "3", value_parser = parse_repeat)]
    pub repeat: usize,
    /// Bytes each run writes: a multiple of 1 MiB, at least 64 MiB.
    #[arg(long, default_value = "4GiB", value_parser = parse_size, value_name = "SIZE")]
    pub size: u64,
    /// The engine's memory; the kernel's dirty limits are set to 20% / 10% of it.
    #[arg(long, default_value = "1GiB", value_parser = parse_size, value_name = "SIZE")]
    pub memory: u64,
    /// Where the engine remembers device calibrations.
    #[arg(long, default_value = "wb-data", value_name = "DIR")]
    pub data_dir: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Config {
    KernelBuffered,
    KernelDontcache,
    KernelDirect,
    EngineBuffered,
    EngineDontcache,
    EngineDontcacheInline,
}

impl Config {
    const ALL: [Config; 6] = [
        Config::KernelBuffered,
        Config::KernelDontcache,
        Config::KernelDirect,
        Config::EngineBuffered,
        Config::EngineDontcache,
        Config::EngineDontcacheInline,
    ];

    fn name(self) -> &'static str {
        match self {
            Config::KernelBuffered => "kernel-buffered",
            Config::KernelDontcache => "kernel-dontcache",
            Config::KernelDirect => "kernel-direct",
            Config::EngineBuffered => "engine-buffered",
            Config::EngineDontcache => "engine-dontcache",
            Config::EngineDontcacheInline => "engine-dontcache-inline",
        }
    }
}

/// Write latencies of a run (or their medians), in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Latency {
    p50_us: f64,
    p99_us: f64,
    p99_9_us: f64,
    max_us: f64,
}

impl Latency {
    fn of(hist: &Histogram<u64>) -> Latency {
        let us = |ns: u64| ns as f64 / 1000.0;
        Latency {
            p50_us: us(hist.value_at_quantile(0.5)),
            p99_us: us(hist.value_at_quantile(0.99)),
            p99_9_us: us(hist.value_at_quantile(0.999)),
            max_us: us(hist.max()),
        }
    }
}

/// One run of one configuration, or the medians of a configuration's runs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct RunResult {
    mib_s: f64,
    lat: Latency,
    dirty_peak_mib: f64,
    cached_end_mib: f64,
}

/// What every run shares.
struct Setup {
    dir: PathBuf,
    fs: String,
    file: PathBuf,
    size: u64,
    memory: u64,
    data_dir: PathBuf,
    /// The engine's dirty limits in bytes, also the kernel's for the bench.
    dirty_limits: (u64, u64),
}

pub fn run(args: DontcacheArgs, html: Option<HtmlFile>) -> Result<(), BenchError> {
    let started = Instant::now();
    validate_size(args.size)?;
    wb_engine::Config::default()
        .set("memory", &args.memory.to_string())
        .map_err(|e| BenchError::BadInput(format!("--memory: {e}")))?;
    let dir = match &args.dir {
        Some(dir) if !dir.is_dir() => {
            return Err(BenchError::BadInput(format!(
                "--dir {}: {}",
                dir.display(),
                if dir.exists() {
                    "not a directory"
                } else {
                    "does not exist; create it first"
                }
            )))
        }
        Some(dir) => prepare_dir(dir)?,
        None => prepare_dir(Path::new(DEFAULT_DIR))?,
    };
    check_room(&dir, args.size)?;
    kernel_write::check_dontcache(&dir).map_err(BenchError::BadInput)?;
    sysctl::check_writable(Path::new(sysctl::PROC_VM)).map_err(BenchError::BadInput)?;
    read_meminfo_level().map_err(|e| BenchError::failed("/proc/meminfo", e))?;
    let fs = kernel_write::fs_type(&dir).unwrap_or_else(|| "unknown".into());
    let dirty_limits = engine_dirty_limits(args.memory)?;
    progress!(
        "files in {} ({fs}, kernel {}); {} per run in 1 MiB writes; engine memory {}",
        dir.display(),
        kernel_write::kernel_release(),
        human_bytes(args.size),
        human_bytes(args.memory)
    );
    progress!(
        "vm.dirty_bytes={} vm.dirty_background_bytes={} (the engine's limits, 20% / 10%) \
         until the end",
        dirty_limits.0,
        dirty_limits.1
    );
    progress!(
        "device of {}: calibrating it if new (about 3 s, remembered in {})",
        dir.display(),
        args.data_dir.display()
    );
    writeback::io::calibrate(&dir, &args.data_dir, writeback::CALIBRATION_BUDGET).map_err(|e| {
        BenchError::failed(format!("calibrating the device of {}", dir.display()), e)
    })?;

    let data = TempFile::new(dir.join(DATA_FILE));
    let setup = Setup {
        dir: dir.clone(),
        fs,
        file: data.path().to_path_buf(),
        size: args.size,
        memory: args.memory,
        data_dir: args.data_dir.clone(),
        dirty_limits,
    };
    let limits =
        DirtyLimitsGuard::apply(Path::new(sysctl::PROC_VM), dirty_limits.0, dirty_limits.1)
            .map_err(BenchError::Failed)?;

    let mut runs: Vec<(Config, Vec<RunResult>)> =
        Config::ALL.iter().map(|&c| (c, Vec::new())).collect();
    let mut notes = Vec::new();
    let mut io_backend = "?";
    // Rounds interleave the configurations, so slow drifts of the disk
    // spread over all of them.
    for round in 1..=args.repeat {
        for (config, results) in runs.iter_mut() {
            if !settle(&setup) && !notes.iter().any(|n: &String| n.starts_with("fstrim")) {
                let note = format!(
                    "fstrim {} failed: runs may start from different disk states",
                    setup.dir.display()
                );
                progress!("{note}");
                notes.push(note);
            }
            let label = format!("{} ({round}/{})", config.name(), args.repeat);
            let r = match config {
                Config::KernelBuffered => run_kernel(&setup, Mode::Buffered),
                Config::KernelDontcache => run_kernel(&setup, Mode::Dontcache),
                Config::KernelDirect => run_kernel(&setup, Mode::Direct),
                Config::EngineBuffered => run_engine(&setup, EngineMode::Buffered),
                Config::EngineDontcache => run_engine(&setup, EngineMode::Dontcache),
                Config::EngineDontcacheInline => run_engine(&setup, EngineMode::DontcacheInline),
            };
            let (r, backend) = r?;
            io_backend = backend.unwrap_or(io_backend);
            progress!(
                "{label}: {} MiB/s; write p50 {} us, p99 {} us, p99.9 {} us, max {} us; \
                 dirty peak {:.0} MiB; cached at end {:.1} MiB",
                table::rate(r.mib_s),
                us(r.lat.p50_us),
                us(r.lat.p99_us),
                us(r.lat.p99_9_us),
                us(r.lat.max_us),
                r.dirty_peak_mib,
                r.cached_end_mib
            );
            results.push(r);
        }
    }
    limits.restore().map_err(BenchError::Failed)?;
    drop(data);

    let summaries: Vec<(Config, RunResult)> = runs
        .iter()
        .map(|(config, results)| (*config, summarize(results)))
        .collect();
    progress!("done in {:.0} s", started.elapsed().as_secs_f64());
    let report = render(&summaries, &setup, args.repeat, io_backend, &notes);
    if args.json {
        // The table too, for whoever watches: a run takes minutes.
        eprint!("{report}");
        println!("{}", to_json(&summaries, &setup, args.repeat, io_backend));
    } else {
        print!("{report}");
    }
    super::write_html(html, "wb bench dontcache", &report)
}

/// --size must be whole 1 MiB writes and at least MIN_SIZE.
fn validate_size(size: u64) -> Result<(), BenchError> {
    if !size.is_multiple_of(CHUNK) || size < MIN_SIZE {
        return Err(BenchError::BadInput(format!(
            "--size {size} ({}): must be a multiple of 1 MiB (the writes are 1 MiB each) \
             and at least {} MiB",
            human_bytes(size),
            MIN_SIZE >> 20
        )));
    }
    Ok(())
}

fn check_room(dir: &Path, size: u64) -> Result<(), BenchError> {
    let free = free_bytes(dir)?;
    if free < size.saturating_add(SPACE_MARGIN) {
        return Err(BenchError::BadInput(format!(
            "--dir {}: not enough free space: {} available, a run needs --size {} plus {} \
             to spare; pick a smaller --size or another --dir",
            dir.display(),
            human_bytes(free),
            human_bytes(size),
            human_bytes(SPACE_MARGIN)
        )));
    }
    Ok(())
}

/// Clears the way for the next run: the previous run's file dropped from
/// the page cache and removed, everything synced, the free space trimmed
/// (so a loop device's image allocates anew in every run, not only in the
/// first). Returns whether the trim worked.
fn settle(setup: &Setup) -> bool {
    discard(&setup.file);
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    std::process::Command::new("fstrim")
        .arg(&setup.dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Drops `path`'s pages from the kernel's page cache and removes it.
fn discard(path: &Path) {
    if let Ok(file) = std::fs::File::open(path) {
        let _ = file.sync_data();
        // SAFETY: posix_fadvise only takes the fd (open for the call) and numbers.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
    let _ = std::fs::remove_file(path);
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

fn run_kernel(setup: &Setup, mode: Mode) -> Result<(RunResult, Option<&'static str>), BenchError> {
    let path = &setup.file;
    let fail = |e: io::Error| -> BenchError {
        if mode == Mode::Dontcache && kernel_write::is_unsupported(&e) {
            BenchError::Failed(kernel_write::unsupported_message(&setup.dir))
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
        write_loop(setup.size, buf.as_mut_slice(), &mut hist, |b, off| {
            kernel_write::write_all_at(&file, mode, b, off).map_err(fail)
        })?;
        file.sync_data().map_err(fail)?;
        Ok(start.elapsed())
    });
    let elapsed = elapsed?;
    drop(file);
    let cached = resident_bytes(path)
        .map_err(|e| BenchError::failed(format!("mincore of {}", path.display()), e))?;
    Ok((result(setup.size, elapsed, &hist, dirty_peak, cached), None))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum EngineMode {
    Buffered,
    Dontcache,
    DontcacheInline,
}

fn run_engine(
    setup: &Setup,
    mode: EngineMode,
) -> Result<(RunResult, Option<&'static str>), BenchError> {
    let path = &setup.file;
    let flush = if mode == EngineMode::DontcacheInline {
        "inline"
    } else {
        "kick"
    };
    let cache = Cache::builder()
        .knob("memory", &setup.memory.to_string())
        .and_then(|b| b.knob("dontcache_flush", flush))
        .map_err(|e| BenchError::failed("configuring the cache", e))?
        .data_dir(&setup.data_dir)
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
        write_loop(setup.size, buf.as_mut_slice(), &mut hist, |b, off| {
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
        result(setup.size, elapsed, &hist, dirty_peak, cached),
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
fn sampled<T>(level: &(dyn Fn() -> u64 + Sync), body: impl FnOnce() -> T) -> (T, u64) {
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

/// `Dirty` + `Writeback` of /proc/meminfo, in bytes.
fn read_meminfo_level() -> io::Result<u64> {
    let text = std::fs::read_to_string("/proc/meminfo")?;
    dirty_and_writeback_bytes(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "no Dirty or Writeback line in /proc/meminfo",
        )
    })
}

/// The value of `key` in /proc/meminfo text (`Dirty:   1234 kB`), in KiB.
fn meminfo_kib(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, rest) = line.split_once(':')?;
        if name.trim() != key {
            return None;
        }
        let mut parts = rest.split_whitespace();
        let value: u64 = parts.next()?.parse().ok()?;
        match parts.next() {
            Some("kB") | None => Some(value),
            Some(_) => None,
        }
    })
}

/// `Dirty` + `Writeback` in bytes, from /proc/meminfo text.
fn dirty_and_writeback_bytes(text: &str) -> Option<u64> {
    let dirty = meminfo_kib(text, "Dirty")?;
    let writeback = meminfo_kib(text, "Writeback")?;
    Some((dirty + writeback) * 1024)
}

/// Bytes of `path` resident in the kernel's page cache (mmap + mincore).
pub(super) fn resident_bytes(path: &Path) -> io::Result<u64> {
    let file = std::fs::File::open(path)?;
    let len = usize::try_from(file.metadata()?.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file too large to map"))?;
    if len == 0 {
        return Ok(0);
    }
    // SAFETY: sysconf has no preconditions.
    let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        p if p > 0 => p as usize,
        _ => 4096,
    };
    // SAFETY: a new read-only shared mapping of the first `len` bytes of a
    // file open for reading; the kernel picks the address, so it overlaps
    // nothing of ours. It is never dereferenced (mincore reads the page
    // cache state, not the memory) and is unmapped below.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let mut resident = vec![0u8; len.div_ceil(page)];
    // SAFETY: `addr` is page-aligned (returned by mmap) and `len` bytes
    // from it are mapped; `resident` has one byte per page of that range,
    // which is what mincore writes.
    let rc = unsafe { libc::mincore(addr, len, resident.as_mut_ptr()) };
    let err = io::Error::last_os_error();
    // SAFETY: unmaps exactly the mapping made above, referred to by nothing else.
    unsafe { libc::munmap(addr, len) };
    if rc != 0 {
        return Err(err);
    }
    let pages = resident.iter().filter(|&&v| v & 1 == 1).count() as u64;
    Ok(pages * page as u64)
}

/// The medians of each figure over `runs`.
fn summarize(runs: &[RunResult]) -> RunResult {
    let m = |f: fn(&RunResult) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
    RunResult {
        mib_s: m(|r| r.mib_s),
        lat: Latency {
            p50_us: m(|r| r.lat.p50_us),
            p99_us: m(|r| r.lat.p99_us),
            p99_9_us: m(|r| r.lat.p99_9_us),
            max_us: m(|r| r.lat.max_us),
        },
        dirty_peak_mib: m(|r| r.dirty_peak_mib),
        cached_end_mib: m(|r| r.cached_end_mib),
    }
}

fn to_json(
    summaries: &[(Config, RunResult)],
    setup: &Setup,
    repeat: usize,
    io_backend: &str,
) -> serde_json::Value {
    let configs: Vec<serde_json::Value> = summaries
        .iter()
        .map(|(config, r)| {
            json!({
                "name": config.name(),
                "mib_s": r.mib_s,
                "lat_us": {
                    "p50": r.lat.p50_us,
                    "p99": r.lat.p99_us,
                    "p99_9": r.lat.p99_9_us,
                    "max": r.lat.max_us,
                },
                "dirty_peak_mib": r.dirty_peak_mib,
                "cached_end_mib": r.cached_end_mib,
            })
        })
        .collect();
    json!({
        "configs": configs,
        "size_mib": setup.size >> 20,
        "repeat": repeat,
        "dir": setup.dir.display().to_string(),
        "fs": setup.fs,
        "kernel": kernel_write::kernel_release(),
        "memory_mib": setup.memory >> 20,
        "vm_dirty_bytes": setup.dirty_limits.0,
        "vm_dirty_background_bytes": setup.dirty_limits.1,
        "io_backend": io_backend,
    })
}

/// A latency in microseconds, without needless decimals.
fn us(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn render(
    summaries: &[(Config, RunResult)],
    setup: &Setup,
    repeat: usize,
    io_backend: &str,
    notes: &[String],
) -> Doc {
    let mut out = Doc::from(format!(
        "Sequential write of {} in 1 MiB calls to a new file in {} ({}, kernel {}), then one \
         fdatasync; medians of {repeat} round{}.\n\
         MiB/s includes the fdatasync; latencies are per write call. Kernel dirty limits for \
         the bench: vm.dirty_bytes={} ({}) / vm.dirty_background_bytes={} ({}), the engine's \
         (20% / 10% of its {}; {io_backend} backend).\n\n",
        human_bytes(setup.size),
        setup.dir.display(),
        setup.fs,
        kernel_write::kernel_release(),
        if repeat == 1 { "" } else { "s" },
        setup.dirty_limits.0,
        human_bytes(setup.dirty_limits.0),
        setup.dirty_limits.1,
        human_bytes(setup.dirty_limits.1),
        human_bytes(setup.memory),
    ));
    let mut t = Table::new(&[
        "config",
        "MiB/s",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "max us",
        "dirty peak MiB",
        "cached end MiB",
    ]);
    for (config, r) in summaries {
        t.row(vec![
            config.name().into(),
            table::rate(r.mib_s),
            us(r.lat.p50_us),
            us(r.lat.p99_us),
            us(r.lat.p99_9_us),
            us(r.lat.max_us),
            format!("{:.0}", r.dirty_peak_mib),
            format!("{:.1}", r.cached_end_mib),
        ]);
    }
    out.table(t);
    out.push('\n');
    out.push_str(&ratios(summaries));
    if !notes.is_empty() {
        out.push_str("\nNotes:\n");
        for n in notes {
            out.push_str(&format!("  {n}\n"));
        }
    }
    out
}

/// The line of ratios under the table.
fn ratios(summaries: &[(Config, RunResult)]) -> String {
    let get = |c: Config| summaries.iter().find(|(x, _)| *x == c).map(|(_, r)| *r);
    let field = |c: Config, f: fn(&RunResult) -> f64| get(c).map(|r| f(&r));
    let p99_9 = |r: &RunResult| r.lat.p99_9_us;
    format!(
        "Ratios: engine-dontcache / kernel-dontcache: p99.9 {}, MiB/s {}; \
         engine-dontcache / engine-buffered cached at end: {}; \
         engine-dontcache (kick) / engine-dontcache-inline p99.9: {}\n",
        table::ratio(
            field(Config::EngineDontcache, p99_9),
            field(Config::KernelDontcache, p99_9)
        ),
        table::ratio(
            field(Config::EngineDontcache, |r| r.mib_s),
            field(Config::KernelDontcache, |r| r.mib_s)
        ),
        table::ratio(
            field(Config::EngineDontcache, |r| r.cached_end_mib),
            field(Config::EngineBuffered, |r| r.cached_end_mib)
        ),
        table::ratio(
            field(Config::EngineDontcache, p99_9),
            field(Config::EngineDontcacheInline, p99_9)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMINFO: &str = "\
MemTotal:       24572032 kB
Dirty:              1236 kB
Writeback:            64 kB
WritebackTmp:     999999 kB
AnonHugePages:         0 kB
HugePages_Total:       0
";

    #[test]
    fn meminfo_fields_parse_by_exact_name() {
        assert_eq!(meminfo_kib(MEMINFO, "Dirty"), Some(1236));
        assert_eq!(meminfo_kib(MEMINFO, "Writeback"), Some(64));
        assert_eq!(meminfo_kib(MEMINFO, "WritebackTmp"), Some(999_999));
        assert_eq!(meminfo_kib(MEMINFO, "HugePages_Total"), Some(0));
        assert_eq!(meminfo_kib(MEMINFO, "Missing"), None);
        assert_eq!(dirty_and_writeback_bytes(MEMINFO), Some((1236 + 64) * 1024));
        assert_eq!(dirty_and_writeback_bytes("Dirty: 5 kB\n"), None);
        assert_eq!(meminfo_kib("Dirty: lots kB\n", "Dirty"), None);
    }

    #[test]
    fn the_real_meminfo_has_both_lines() {
        assert!(read_meminfo_level().is_ok());
    }

    #[test]
    fn sizes_must_be_whole_mib_and_not_too_small() {
        for bad in [1 << 20, (64 << 20) + 4096, 32 << 20] {
            let err = validate_size(bad).expect_err("bad size");
            assert!(matches!(err, BenchError::BadInput(_)), "{err}");
            assert!(err.to_string().contains("--size"), "{err}");
        }
        assert!(validate_size(64 << 20).is_ok());
        assert!(validate_size(4 << 30).is_ok());
    }

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

    #[test]
    fn resident_bytes_sees_written_pages_and_dropped_ones() {
        let path = std::env::temp_dir().join(format!("wb-dc-mincore-{}", std::process::id()));
        let file = TempFile::new(path);
        std::fs::write(file.path(), vec![1u8; 1 << 20]).expect("write");
        let before = resident_bytes(file.path()).expect("mincore");
        assert!(before <= 1 << 20, "{before}");
        discard(file.path());
        std::fs::write(file.path(), b"").expect("empty file");
        assert_eq!(resident_bytes(file.path()).expect("mincore"), 0);
    }

    #[test]
    fn medians_keep_percentiles_in_order_and_json_has_the_promised_keys() {
        let run = |x: f64| RunResult {
            mib_s: x,
            lat: Latency {
                p50_us: x,
                p99_us: 2.0 * x,
                p99_9_us: 3.0 * x,
                max_us: 4.0 * x,
            },
            dirty_peak_mib: x,
            cached_end_mib: x,
        };
        let m = summarize(&[run(1.0), run(5.0), run(2.0)]);
        assert_eq!(m, run(2.0));
        let summaries: Vec<_> = Config::ALL.iter().map(|&c| (c, m)).collect();
        let setup = Setup {
            dir: PathBuf::from("/var/tmp"),
            fs: "ext4".into(),
            file: PathBuf::from("/var/tmp/x"),
            size: 4 << 30,
            memory: 1 << 30,
            data_dir: PathBuf::from("wb-data"),
            dirty_limits: (200 << 20, 100 << 20),
        };
        let v = to_json(&summaries, &setup, 3, "io_uring");
        assert_eq!(v["size_mib"], 4096);
        assert_eq!(v["repeat"], 3);
        assert_eq!(v["fs"], "ext4");
        let configs = v["configs"].as_array().expect("configs");
        let names: Vec<_> = configs.iter().filter_map(|c| c["name"].as_str()).collect();
        assert_eq!(
            names,
            [
                "kernel-buffered",
                "kernel-dontcache",
                "kernel-direct",
                "engine-buffered",
                "engine-dontcache",
                "engine-dontcache-inline"
            ]
        );
        let mut keys: Vec<_> = configs[0]
            .as_object()
            .expect("object")
            .keys()
            .cloned()
            .collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "cached_end_mib",
                "dirty_peak_mib",
                "lat_us",
                "mib_s",
                "name"
            ]
        );
        assert_eq!(configs[0]["lat_us"]["p99_9"], 6.0);
        let text = render(&summaries, &setup, 3, "io_uring", &[]).to_string();
        assert!(text.contains("engine-dontcache-inline"), "{text}");
        assert!(text.contains("vm.dirty_bytes=209715200"), "{text}");
        assert!(text.contains("p99.9 1.00x"), "{text}");
    }
}
