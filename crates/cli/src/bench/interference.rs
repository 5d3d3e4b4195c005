//! `wb bench interference`: how much a big sequential writer hurts a 4 KiB
//! O_DIRECT random reader on the same filesystem.
//!
//! Configurations, each repeated and reported as medians:
//!
//! - `floor`: the reader alone;
//! - `kernel`: fio's buffered writer, with the kernel's dirty limits set to
//!   the engine's (20% / 10% of the engine's memory) for the run;
//! - `kernel-dontcache`: the same with RWF_DONTCACHE writes, if fio has them;
//! - `engine-wbt-off` / `engine`: the writer is this library (wbt off / auto).
//!
//! The reader is always the same fio job, started about a second after the
//! writer, reading a file written once up front with O_DIRECT (so it is
//! never in the kernel's page cache).

use super::cleanup::TempFile;
use super::fio::{self, Fio, ReaderResult};
use super::mount::Mount;
use super::sysctl::{self, DirtyLimitsGuard};
use super::table::{self, Table};
use super::{
    free_bytes, human_bytes, median, parse_repeat, parse_seconds, parse_size, prepare_dir,
    progress, BenchError, SplitMix64, MIB,
};
use clap::Args;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use writeback::{Cache, OpenOptions};

/// Chunk of the writers (fio's bs=1M, the engine writer's write_at size).
const CHUNK: usize = 1 << 20;
/// How long the writer runs alone before the reader starts.
const READER_DELAY: Duration = Duration::from_secs(1);
/// How often running jobs are polled.
const POLL: Duration = Duration::from_millis(20);
/// Free space left untouched on the filesystem.
const SPACE_MARGIN: u64 = 1 << 30;
/// Smallest writer worth running.
const MIN_WRITER: u64 = 256 << 20;
/// The reader's file, unless --reader-size says otherwise (without --fuse).
const DEFAULT_READER_SIZE: u64 = 1 << 30;

#[derive(Args)]
#[command(after_help = "\
Runs, in one go on the filesystem of --dir, each configuration --repeat times and reports medians:
  floor             the reader alone
  kernel            fio buffered sequential writer (1 MiB writes, fsync at the end)
  kernel-dontcache  the same with fio's uncached=1 (RWF_DONTCACHE), if this fio has it
  engine-wbt-off    the writer is the writeback library (memory --memory, wbt_lat_usec=0)
  engine            the same with wbt_lat_usec=-1 (automatic target)
With --fuse: floor, kernel, and
  mount             `wb mount --dir` on a temporary mountpoint (memory --memory, plus
                    --engine-set knobs), the same fio writer and reader through it
The reader is `fio --rw=randread --bs=4k --direct=1 --ioengine=psync` (queue depth 1) on a
file written once with O_DIRECT, started 1 s after the writer, for --seconds.
Before each run the filesystem's free space is trimmed (fstrim), so every writer meets
the same disk state (a loop device's image otherwise allocates only on first touch),
and the run waits (at most 60 s, noted if longer) until 256 reads in a row of the
reader's file take under 2 ms each: the previous run's aftermath stays out of it.
While any writer runs, vm.dirty_bytes / vm.dirty_background_bytes are 20% / 10% of
--memory (the engine's limits; they also bound page caches under the filesystem, such
as a buffered loop device's), restored afterwards (also on Ctrl-C); needs root.

Quick run: wb bench interference --writer-size 2GiB --seconds 5 --repeat 1
Experiment: wb bench interference --configs floor,engine --engine-set queue_depth=8

Exit status: 0 on success, 1 if a run failed, 2 for bad arguments, an unusable --dir,
no fio, or no permission to change the dirty limits; 130 on Ctrl-C.")]
pub struct InterferenceArgs {
    /// Directory for the benchmark's files (created if missing; they are removed at the end).
    #[arg(long, default_value = "wb-data/bench")]
    pub dir: PathBuf,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Runs of each configuration; medians are reported.
    #[arg(long, default_value = "3", value_parser = parse_repeat)]
    pub repeat: usize,
    /// Bytes each writer writes (scaled down, with a note, if the disk lacks room).
    #[arg(long, default_value = "8GiB", value_parser = parse_size, value_name = "SIZE")]
    pub writer_size: u64,
    /// Seconds the reader runs in each configuration.
    #[arg(long, default_value = "10", value_parser = parse_seconds, value_name = "S")]
    pub seconds: u64,
    /// The engine's memory; the kernel's dirty limits are set to 20% / 10% of it.
    #[arg(long, default_value = "1GiB", value_parser = parse_size, value_name = "SIZE")]
    pub memory: u64,
    /// Size of the reader's file [default: 1GiB; with --fuse 4 x --memory,
    /// so the mount's cache can hold little of it].
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub reader_size: Option<u64>,
    /// Compare the kernel with `wb mount` instead: fio is the writer and the
    /// reader both on --dir (the kernel) and on a mount of --dir (configs
    /// floor, kernel, mount); --engine-set knobs go to the mount.
    #[arg(long)]
    pub fuse: bool,
    /// Where the engine remembers device calibrations.
    #[arg(long, default_value = "wb-data", value_name = "DIR")]
    pub data_dir: PathBuf,
    /// An engine knob for both engine configurations (cache or device knob,
    /// e.g. max_sectors_kb=128); wbt_lat_usec is set by the configuration. Repeatable.
    #[arg(long = "engine-set", value_name = "KNOB=VALUE", value_parser = parse_engine_set)]
    pub engine_sets: Vec<(String, String)>,
    /// Only these configurations, comma-separated (for experiments; ratios
    /// to the floor or the kernel need those in the list).
    #[arg(long, value_name = "NAMES", value_delimiter = ',', value_parser = parse_config)]
    pub configs: Vec<Config>,
}

/// A configuration's name, as printed.
fn parse_config(text: &str) -> Result<Config, String> {
    Config::ALL
        .into_iter()
        .find(|c| c.name() == text)
        .ok_or_else(|| {
            let names: Vec<&str> = Config::ALL.iter().map(|c| c.name()).collect();
            format!(
                "unknown configuration '{text}' (one of: {})",
                names.join(", ")
            )
        })
}

/// KNOB=VALUE, checked against the engine's knobs.
fn parse_engine_set(text: &str) -> Result<(String, String), String> {
    let (knob, value) = text
        .split_once('=')
        .ok_or_else(|| format!("'{text}': expected KNOB=VALUE"))?;
    let checked = if wb_engine::Config::KNOBS.contains(&knob) {
        wb_engine::Config::default().set(knob, value)
    } else {
        wb_engine::DeviceConfig::default().set(knob, value)
    };
    checked.map_err(|e| e.to_string())?;
    Ok((knob.to_string(), value.to_string()))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Config {
    Floor,
    Kernel,
    KernelDontcache,
    EngineWbtOff,
    Engine,
    Mount,
}

impl Config {
    const ALL: [Config; 6] = [
        Config::Floor,
        Config::Kernel,
        Config::KernelDontcache,
        Config::EngineWbtOff,
        Config::Engine,
        Config::Mount,
    ];
    /// The configurations of `--fuse`.
    const FUSE: [Config; 3] = [Config::Floor, Config::Kernel, Config::Mount];

    fn name(self) -> &'static str {
        match self {
            Config::Floor => "floor",
            Config::Kernel => "kernel",
            Config::KernelDontcache => "kernel-dontcache",
            Config::EngineWbtOff => "engine-wbt-off",
            Config::Engine => "engine",
            Config::Mount => "mount",
        }
    }
}

/// One run of one configuration.
#[derive(Clone, Copy, Debug)]
struct RunResult {
    reader: ReaderResult,
    /// Writer MiB/s; None for the floor.
    writer_mib_s: Option<f64>,
}

/// Medians over the runs of one configuration.
struct ConfigSummary {
    config: Config,
    reader: ReaderResult,
    writer_mib_s: Option<f64>,
}

/// Everything a run needs.
struct Setup {
    fio: Fio,
    dir: PathBuf,
    reader_file: PathBuf,
    writer_file: PathBuf,
    seconds: u64,
    writer_size: u64,
    memory: u64,
    data_dir: PathBuf,
    /// The engine's dirty limits in bytes: (dirty, background).
    dirty_limits: (u64, u64),
    /// Extra engine knobs (--engine-set).
    engine_sets: Vec<(String, String)>,
}

pub fn run(args: InterferenceArgs) -> Result<(), BenchError> {
    let started = Instant::now();
    if args.writer_size < CHUNK as u64 {
        return Err(BenchError::BadInput(
            "--writer-size must be at least 1MiB (the writers write 1 MiB at a time)".into(),
        ));
    }
    let fio = fio::find()?;
    let dir = prepare_dir(&args.dir)?;
    sysctl::check_writable(Path::new(sysctl::PROC_VM)).map_err(BenchError::BadInput)?;
    let dirty_limits = engine_dirty_limits(args.memory)?;
    progress!(
        "{}; files in {}; engine memory {}: dirty limits {} / background {}",
        fio.version,
        dir.display(),
        human_bytes(args.memory),
        human_bytes(dirty_limits.0),
        human_bytes(dirty_limits.1)
    );
    if let Some((dev, wbt)) = kernel_wbt(&dir) {
        progress!("kernel wbt on {dev}: wbt_lat_usec={wbt} (left as it is)");
    }

    // Whole 1 MiB writes, as both writers issue them.
    let wanted = args.writer_size / CHUNK as u64 * CHUNK as u64;
    let reader_size = args.reader_size.unwrap_or(if args.fuse {
        4 * args.memory
    } else {
        DEFAULT_READER_SIZE
    });
    let writer_size = fit_writer(&dir, reader_size, wanted)?;
    let mut configs: Vec<Config> = if args.fuse {
        Config::FUSE.to_vec()
    } else {
        Config::ALL
            .into_iter()
            .filter(|c| *c != Config::Mount)
            .collect()
    };
    if !args.configs.is_empty() {
        configs.retain(|c| args.configs.contains(c));
    }
    if !fio.supports_option("uncached") {
        progress!(
            "kernel-dontcache: skipped: {} has no `uncached` option \
             (RWF_DONTCACHE buffered writes need a newer fio)",
            fio.version
        );
        configs.retain(|c| *c != Config::KernelDontcache);
    }

    let reader = TempFile::new(dir.join("wb-bench-reader.dat"));
    progress!(
        "writing the reader's file ({}) with O_DIRECT",
        human_bytes(reader_size)
    );
    write_direct_file(reader.path(), reader_size)?;
    let writer = TempFile::new(dir.join("wb-bench-writer.dat"));
    let setup = Setup {
        fio,
        dir: dir.clone(),
        reader_file: reader.path().to_path_buf(),
        writer_file: writer.path().to_path_buf(),
        seconds: args.seconds,
        writer_size,
        memory: args.memory,
        data_dir: args.data_dir.clone(),
        dirty_limits,
        engine_sets: args.engine_sets.clone(),
    };

    let mut results: Vec<(Config, Vec<RunResult>)> =
        configs.iter().map(|&c| (c, Vec::new())).collect();
    let mut notes: Vec<String> = Vec::new();
    let mut left_out: Vec<Config> = Vec::new();
    let mut untrimmed_noted = false;
    // Repeats interleave the configurations, so slow drifts of the disk
    // (host caches filling, ...) spread over all of them.
    for repeat in 1..=args.repeat {
        for (config, runs) in results.iter_mut() {
            if left_out.contains(config) {
                continue;
            }
            let (trimmed, quiet) = settle(&setup.dir, &setup.reader_file);
            let busy = match quiet {
                Ok(true) => None,
                Ok(false) => Some(format!(
                    "the disk was still busy after {} s of waiting (reads over {} ms)",
                    QUIET_WAIT_MAX.as_secs(),
                    QUIET_READ.as_millis()
                )),
                Err(e) => Some(format!("could not check that the disk is quiet ({e})")),
            };
            if let Some(why) = busy {
                let note = format!("{} ({repeat}): {why}; ran anyway", config.name());
                progress!("{note}");
                notes.push(note);
            }
            if !trimmed && !untrimmed_noted {
                untrimmed_noted = true;
                let note = format!(
                    "fstrim {} failed: runs may start from different disk states",
                    setup.dir.display()
                );
                progress!("{note}");
                notes.push(note);
            }
            let label = format!("{} ({repeat}/{})", config.name(), args.repeat);
            progress!("{label}: running");
            match run_config(&setup, *config, &label, &mut notes) {
                Ok(r) => {
                    progress!(
                        "{label}: reader p50 {} ms, p99 {} ms, p99.9 {} ms, max {} ms, {} IOPS{}",
                        table::ms(r.reader.p50_us),
                        table::ms(r.reader.p99_us),
                        table::ms(r.reader.p99_9_us),
                        table::ms(r.reader.max_us),
                        table::rate(r.reader.iops),
                        r.writer_mib_s
                            .map(|w| format!("; writer {} MiB/s", table::rate(w)))
                            .unwrap_or_default()
                    );
                    runs.push(r);
                }
                Err(e) if *config == Config::KernelDontcache && repeat == 1 => {
                    // fio has the option but the kernel or filesystem may not
                    // support RWF_DONTCACHE: leave the configuration out.
                    let note = format!("kernel-dontcache: left out: {e}");
                    progress!("{note}");
                    notes.push(note);
                    left_out.push(*config);
                }
                Err(e) => return Err(e),
            }
        }
    }
    drop(writer);
    drop(reader);

    let summaries: Vec<ConfigSummary> = results
        .into_iter()
        .filter(|(_, runs)| !runs.is_empty())
        .map(|(config, runs)| summarize(config, &runs))
        .collect();
    progress!("done in {:.0} s", started.elapsed().as_secs_f64());
    if args.json {
        println!("{}", to_json(&summaries));
    } else {
        print!("{}", render(&summaries, &setup, args.repeat, &notes));
    }
    Ok(())
}

/// The engine's dirty limits for `memory`, in bytes, as the engine computes them.
pub(super) fn engine_dirty_limits(memory: u64) -> Result<(u64, u64), BenchError> {
    let cache = Cache::builder()
        .knob("memory", &memory.to_string())
        .map_err(|e| BenchError::BadInput(format!("--memory: {e}")))?
        .calibrate(false)
        .build()
        .map_err(|e| BenchError::failed("starting the cache", e))?;
    let stats = cache.stats();
    let page = wb_engine::PAGE_SIZE;
    Ok((stats.thresh_pages * page, stats.bg_thresh_pages * page))
}

/// The writer size that fits on the disk next to the reader's file.
fn fit_writer(dir: &Path, reader_size: u64, wanted: u64) -> Result<u64, BenchError> {
    let free = free_bytes(dir)?;
    let room = free.saturating_sub(reader_size + SPACE_MARGIN);
    if room < MIN_WRITER {
        return Err(BenchError::Failed(format!(
            "not enough free space in {}: {} available, the benchmark needs at least {} \
             (reader file {} + writer {} + {} margin); free some space or pick another --dir",
            dir.display(),
            human_bytes(free),
            human_bytes(reader_size + MIN_WRITER + SPACE_MARGIN),
            human_bytes(reader_size),
            human_bytes(MIN_WRITER),
            human_bytes(SPACE_MARGIN)
        )));
    }
    if wanted > room {
        let size = room / CHUNK as u64 * CHUNK as u64;
        progress!(
            "note: only {} free in {}: writing {} per writer instead of {}",
            human_bytes(free),
            dir.display(),
            human_bytes(size),
            human_bytes(wanted)
        );
        return Ok(size);
    }
    Ok(wanted)
}

/// Writes `size` bytes of pseudo-random data to `path` with O_DIRECT and
/// makes them durable: the file never enters the kernel's page cache.
fn write_direct_file(path: &Path, size: u64) -> Result<(), BenchError> {
    let fail = |e: std::io::Error| BenchError::failed(path.display(), e);
    let _ = std::fs::remove_file(path);
    let file = writeback::io::open_direct(path, true).map_err(fail)?;
    let mut buf = writeback::io::AlignedBuf::new(CHUNK);
    let mut rng = SplitMix64(0x5eed);
    rng.fill(buf.as_mut_slice());
    let mut offset = 0u64;
    use std::os::unix::fs::FileExt;
    while offset < size {
        let len = (size - offset).min(CHUNK as u64) as usize;
        // O_DIRECT needs whole blocks: round the last chunk up to 4 KiB.
        let len = len.div_ceil(4096) * 4096;
        buf.as_mut_slice()[..8].copy_from_slice(&offset.to_ne_bytes());
        file.write_all_at(&buf.as_slice()[..len], offset)
            .map_err(fail)?;
        offset += len as u64;
    }
    file.sync_all().map_err(fail)
}

/// Lets the disk catch up between runs: everything written so far made
/// durable, the filesystem's free space trimmed, then the disk given time
/// to go quiet. Returns (trimmed, quiet).
///
/// The trim gives every run the same start. Without it, only the first
/// writer on a fresh filesystem over a loop device makes the loop's image
/// file allocate its blocks, and the runs after it merely overwrite them:
/// on this machine the kernel's reader p99 is 15-22 ms on first touch and
/// 0.05 ms on overwrite (BENCHMARKS.md), so the order of the configurations
/// decided the result. The quiet check keeps the previous run's aftermath
/// (the image's own writeback, the trim's hole punching) out of the next
/// run: on this machine a first read after a big run once took 9 s.
fn settle(dir: &Path, reader_file: &Path) -> (bool, std::io::Result<bool>) {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    let trimmed = std::process::Command::new("fstrim")
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    std::thread::sleep(Duration::from_secs(2));
    (trimmed, wait_quiet(reader_file))
}

/// A read slower than this means the disk is still busy with earlier work.
const QUIET_READ: Duration = Duration::from_millis(2);
/// Reads in a row under QUIET_READ that make the disk quiet.
const QUIET_READS: u32 = 256;
/// Longest wait for a quiet disk before running anyway (with a note).
const QUIET_WAIT_MAX: Duration = Duration::from_secs(60);

/// Reads 4 KiB blocks of `reader_file` with O_DIRECT until QUIET_READS in
/// a row each take under QUIET_READ, at most QUIET_WAIT_MAX. Returns
/// whether the disk went quiet; an error if the file cannot be read.
fn wait_quiet(reader_file: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let file = writeback::io::open_direct(reader_file, false)?;
    let blocks = file.metadata()?.len() / 4096;
    if blocks == 0 {
        return Err(std::io::Error::other("the reader's file is empty"));
    }
    let mut buf = writeback::io::AlignedBuf::new(4096);
    let mut rng = SplitMix64(0x9e3779b9);
    let deadline = std::time::Instant::now() + QUIET_WAIT_MAX;
    let mut in_row = 0;
    while in_row < QUIET_READS {
        if std::time::Instant::now() >= deadline {
            return Ok(false);
        }
        let offset = rng.next_u64() % blocks * 4096;
        let started = std::time::Instant::now();
        file.read_exact_at(buf.as_mut_slice(), offset)?;
        in_row = if started.elapsed() < QUIET_READ {
            in_row + 1
        } else {
            0
        };
    }
    Ok(true)
}

/// `wb mount` of the bench directory with the engine's memory and knobs.
fn start_mount(setup: &Setup) -> Result<Mount, BenchError> {
    let mut sets = vec![("memory".to_string(), setup.memory.to_string())];
    sets.extend(setup.engine_sets.iter().cloned());
    Mount::start(&setup.dir, &sets)
}

/// The writer of a run.
enum Writer {
    Fio(fio::RunningFio),
    Engine(EngineWriter),
}

impl Writer {
    fn has_finished(&mut self) -> Result<bool, BenchError> {
        match self {
            Writer::Fio(f) => f.has_finished(),
            Writer::Engine(e) => Ok(e.has_finished()),
        }
    }
}

fn run_config(
    setup: &Setup,
    config: Config,
    label: &str,
    notes: &mut Vec<String>,
) -> Result<RunResult, BenchError> {
    let _ = std::fs::remove_file(&setup.writer_file);
    if config == Config::Floor {
        let reader_args = fio::reader_args(&setup.reader_file, setup.seconds);
        let reader = setup.fio.spawn(&setup.dir, "reader", &reader_args)?;
        let report = reader.finish()?;
        let reader = fio::parse_reader(&report).map_err(BenchError::Failed)?;
        return Ok(RunResult {
            reader,
            writer_mib_s: None,
        });
    }

    // The kernel's dirty limits are the engine's whenever a writer runs.
    // The engine's files bypass the kernel's page cache, but a layer under
    // the filesystem may not (a loop device writing its image through the
    // page cache), and every configuration must run on the same machine.
    let limits = Some(
        DirtyLimitsGuard::apply(
            Path::new(sysctl::PROC_VM),
            setup.dirty_limits.0,
            setup.dirty_limits.1,
        )
        .map_err(BenchError::Failed)?,
    );
    // With --fuse, fio writes and reads the same files through the mount.
    let mount = match config {
        Config::Mount => Some(start_mount(setup)?),
        _ => None,
    };
    let through = |path: &Path| match &mount {
        Some(m) => m.path().join(path.file_name().unwrap_or_default()),
        None => path.to_path_buf(),
    };
    let reader_args = fio::reader_args(&through(&setup.reader_file), setup.seconds);
    let writer_start = Instant::now();
    let mut writer = match config {
        Config::Kernel | Config::KernelDontcache | Config::Mount => {
            let args = fio::writer_args(
                &through(&setup.writer_file),
                setup.writer_size,
                config == Config::KernelDontcache,
            );
            Writer::Fio(setup.fio.spawn(&setup.dir, "writer", &args)?)
        }
        Config::Floor | Config::EngineWbtOff | Config::Engine => {
            Writer::Engine(EngineWriter::start(setup, config == Config::Engine)?)
        }
    };
    let mut writer_end: Option<Instant> = None;
    while writer_start.elapsed() < READER_DELAY {
        std::thread::sleep(POLL);
    }
    let reader_start = Instant::now();
    let mut reader = setup.fio.spawn(&setup.dir, "reader", &reader_args)?;
    loop {
        if writer_end.is_none() && writer.has_finished()? {
            writer_end = Some(Instant::now());
        }
        if reader.has_finished()? {
            break;
        }
        std::thread::sleep(POLL);
    }
    let reader_end = Instant::now();
    let reader = fio::parse_reader(&reader.finish()?).map_err(BenchError::Failed)?;
    if let Some(end) = writer_end {
        let note = if end <= reader_start {
            format!(
                "{label}: the writer finished before the reader started; \
                 the reader ran alone (use a larger --writer-size)"
            )
        } else {
            format!(
                "{label}: the writer finished {:.1} s before the reader",
                (reader_end - end).as_secs_f64()
            )
        };
        progress!("{note}");
        notes.push(note);
    }
    let writer_mib_s = match writer {
        Writer::Fio(f) => {
            let w = fio::parse_writer(&f.finish()?).map_err(BenchError::Failed)?;
            w.bw_bytes_s / MIB
        }
        Writer::Engine(e) => {
            let outcome = e.finish()?;
            let d = outcome.stats.devices.first();
            progress!(
                "{label}: engine: {} dirty-throttle pauses ({:.0} ms in all), wbt {} \
                 (target {:.1} ms, {} scale-downs), dirty peak {}",
                d.map_or(0, |d| d.throttle.count),
                d.map_or(0.0, |d| d.throttle.total_ns as f64 / 1e6),
                if d.is_some_and(|d| d.wbt_enabled) {
                    "on"
                } else {
                    "off"
                },
                d.map_or(0.0, |d| d.wbt_target_ns as f64 / 1e6),
                d.map_or(0, |d| d.wbt_scale_downs),
                human_bytes(outcome.stats.dirty_peak_pages * wb_engine::PAGE_SIZE)
            );
            outcome.bytes as f64 / MIB / outcome.elapsed.as_secs_f64().max(1e-9)
        }
    };
    if let Some(mount) = mount {
        let took = mount.stop()?;
        progress!("{label}: wb mount stopped in {:.1} s", took.as_secs_f64());
    }
    if let Some(guard) = limits {
        guard.restore().map_err(BenchError::Failed)?;
    }
    let _ = std::fs::remove_file(&setup.writer_file);
    Ok(RunResult {
        reader,
        writer_mib_s: Some(writer_mib_s),
    })
}

/// What the engine writer did.
struct EngineOutcome {
    bytes: u64,
    /// From the first write_at to the return of sync_data.
    elapsed: Duration,
    stats: writeback::Stats,
}

/// The library as the writer: a thread writing the file sequentially in
/// 1 MiB write_at calls through a Cache, then sync_data. Dropping it early
/// (on an error elsewhere) stops the writer and waits for it.
struct EngineWriter {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<EngineOutcome, String>>>,
}

impl EngineWriter {
    fn start(setup: &Setup, wbt_auto: bool) -> Result<EngineWriter, BenchError> {
        let mut builder = Cache::builder()
            .knob("memory", &setup.memory.to_string())
            .map_err(|e| BenchError::BadInput(format!("--memory: {e}")))?;
        for (knob, value) in &setup.engine_sets {
            builder = if wb_engine::Config::KNOBS.contains(&knob.as_str()) {
                builder.knob(knob, value)
            } else {
                builder.device_knob(knob, value)
            }
            .map_err(|e| BenchError::BadInput(format!("--engine-set: {e}")))?;
        }
        let cache = builder
            .device_knob("wbt_lat_usec", if wbt_auto { "-1" } else { "0" })
            .map_err(|e| BenchError::failed("wbt_lat_usec", e))?
            .data_dir(&setup.data_dir)
            .calibrate(true)
            .build()
            .map_err(|e| BenchError::failed("starting the cache", e))?;
        // Opening the first file of a device calibrates it (once; remembered in data_dir).
        let file = cache
            .open(&setup.writer_file, OpenOptions { create: true })
            .map_err(|e| BenchError::failed("opening the engine writer's file", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let size = setup.writer_size;
        let stop_flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("wb-bench-writer".into())
            .spawn(move || -> Result<EngineOutcome, String> {
                let mut buf = vec![0u8; CHUNK];
                SplitMix64(0xb0b).fill(&mut buf);
                let start = Instant::now();
                let mut offset = 0u64;
                while offset < size {
                    if stop_flag.load(Ordering::Relaxed) {
                        return Err("stopped".into());
                    }
                    let len = (size - offset).min(CHUNK as u64) as usize;
                    buf[..8].copy_from_slice(&offset.to_ne_bytes());
                    file.write_at(&buf[..len], offset)
                        .map_err(|e| format!("engine writer: write at {offset}: {e}"))?;
                    offset += len as u64;
                }
                file.sync_data()
                    .map_err(|e| format!("engine writer: sync_data: {e}"))?;
                let elapsed = start.elapsed();
                let stats = cache.stats();
                drop(file);
                drop(cache);
                Ok(EngineOutcome {
                    bytes: size,
                    elapsed,
                    stats,
                })
            })
            .map_err(|e| BenchError::failed("starting the engine writer thread", e))?;
        Ok(EngineWriter {
            stop,
            thread: Some(thread),
        })
    }

    fn has_finished(&self) -> bool {
        match &self.thread {
            Some(t) => t.is_finished(),
            None => true,
        }
    }

    fn finish(mut self) -> Result<EngineOutcome, BenchError> {
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

/// The block device holding `dir` and its wbt_lat_usec, if sysfs shows them.
fn kernel_wbt(dir: &Path) -> Option<(String, String)> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(dir).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    // A partition's queue is its parent disk's.
    for base in [sys.clone(), sys.join("..")] {
        if let Ok(v) = std::fs::read_to_string(base.join("queue/wbt_lat_usec")) {
            let name = std::fs::canonicalize(&base)
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| format!("{major}:{minor}"));
            return Some((name, v.trim().to_string()));
        }
    }
    None
}

fn summarize(config: Config, runs: &[RunResult]) -> ConfigSummary {
    let m = |f: fn(&RunResult) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
    let writers: Vec<f64> = runs.iter().filter_map(|r| r.writer_mib_s).collect();
    ConfigSummary {
        config,
        reader: ReaderResult {
            p50_us: m(|r| r.reader.p50_us),
            p99_us: m(|r| r.reader.p99_us),
            p99_9_us: m(|r| r.reader.p99_9_us),
            max_us: m(|r| r.reader.max_us),
            iops: m(|r| r.reader.iops),
        },
        writer_mib_s: (!writers.is_empty()).then(|| median(&writers)),
    }
}

fn to_json(summaries: &[ConfigSummary]) -> String {
    let configs: Vec<serde_json::Value> = summaries
        .iter()
        .map(|s| {
            let mut v = json!({
                "name": s.config.name(),
                "reader": {
                    "p50_us": s.reader.p50_us,
                    "p99_us": s.reader.p99_us,
                    "p99_9_us": s.reader.p99_9_us,
                    "max_us": s.reader.max_us,
                    "iops": s.reader.iops,
                },
            });
            if let Some(w) = s.writer_mib_s {
                v["writer"] = json!({ "mib_s": w });
            }
            v
        })
        .collect();
    json!({ "configs": configs }).to_string()
}

fn render(summaries: &[ConfigSummary], setup: &Setup, repeat: usize, notes: &[String]) -> String {
    let mut out = format!(
        "Reader: 4 KiB O_DIRECT random reads, queue depth 1, {} s; writer: {} sequential; \
         medians of {repeat} run{}.\n\
         Kernel dirty limits for the kernel runs: {} / background {} (20% / 10% of the \
         engine's {}).\n\n",
        setup.seconds,
        human_bytes(setup.writer_size),
        if repeat == 1 { "" } else { "s" },
        human_bytes(setup.dirty_limits.0),
        human_bytes(setup.dirty_limits.1),
        human_bytes(setup.memory),
    );
    let find = |c: Config| summaries.iter().find(|s| s.config == c);
    let floor = find(Config::Floor);
    let kernel = find(Config::Kernel);

    let mut abs = Table::new(&[
        "config",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "IOPS",
        "writer MiB/s",
    ]);
    for s in summaries {
        abs.row(vec![
            s.config.name().into(),
            table::ms(s.reader.p50_us),
            table::ms(s.reader.p99_us),
            table::ms(s.reader.p99_9_us),
            table::ms(s.reader.max_us),
            table::rate(s.reader.iops),
            s.writer_mib_s.map_or("-".into(), table::rate),
        ]);
    }
    out.push_str(&abs.render());

    for (title, base) in [("ratio to floor", floor), ("ratio to kernel", kernel)] {
        let Some(base) = base else { continue };
        let mut t = Table::new(&[title, "p50", "p99", "p99.9", "max", "IOPS", "writer"]);
        for s in summaries.iter().filter(|s| s.config != base.config) {
            let r = |f: fn(&ReaderResult) -> f64| {
                table::ratio(Some(f(&s.reader)), Some(f(&base.reader)))
            };
            t.row(vec![
                s.config.name().into(),
                r(|x| x.p50_us),
                r(|x| x.p99_us),
                r(|x| x.p99_9_us),
                r(|x| x.max_us),
                r(|x| x.iops),
                table::ratio(s.writer_mib_s, base.writer_mib_s),
            ]);
        }
        out.push('\n');
        out.push_str(&t.render());
    }
    if !notes.is_empty() {
        out.push_str("\nNotes:\n");
        for n in notes {
            out.push_str(&format!("  {n}\n"));
        }
    }
    out
}
