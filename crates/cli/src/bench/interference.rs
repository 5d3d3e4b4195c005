//! `wb bench interference`: how much a big sequential writer hurts a 4 KiB
//! O_DIRECT random reader on the same filesystem.
//!
//! Configurations, each repeated and reported as medians:
//!
//! - `floor`: the reader alone;
//! - `kernel`: fio's buffered writer, with the kernel's dirty limits set to
//!   the engine's (20% / 10% of the engine's memory) for the run;
//! - `kernel-dontcache`: the same writes with RWF_DONTCACHE, by our own
//!   pwritev2 writer ([`super::kernel_write`]; Debian's fio has no
//!   `uncached` option), if the filesystem takes them;
//! - `kernel-kyber` / `kernel-bfq`: `kernel` with the block scheduler of the
//!   device under the directory switched to kyber / bfq for the run;
//! - `kernel-bfq-idle`, `kernel-dirty64m`, `kernel-nocache`,
//!   `kernel-direct`, `kernel-blkio`: what people reach for instead of a
//!   writeback engine (an idle I/O class, small dirty limits, dropping the
//!   written pages, O_DIRECT, a blkio write limit), set up and put back by
//!   [`super::kernel_configs`];
//! - `engine-wbt-off` / `engine`: the writer is this library (wbt off / auto);
//! - `engine-dontcache`: `engine` with uncached writes (WriteFlags::DONTCACHE),
//!   beside `kernel-dontcache`.
//!
//! `--sweep KNOB=V1,V2,...` runs `engine` (`mount` with `--fuse`) once more
//! per value ([`super::sweep`]), each a row; with `--html` the report draws
//! the frontier, reader latency against writer MiB/s ([`super::frontier`]).
//!
//! The reader is always the same fio job, started about a second after the
//! writer, reading a file written once up front with O_DIRECT (so it is
//! never in the kernel's page cache). Besides the ratios to the floor and
//! to `kernel`, the report compares every other configuration with the best
//! kernel configuration at each figure (`best_kernel` in JSON).

use super::cleanup::TempFile;
use super::configs::{row_name, Config, ConfigSummary};
use super::doc::Doc;
use super::fio::{self, Fio, ReaderResult};
use super::frontier;
use super::kernel_configs::{self, Machine};
use super::kernel_write;
use super::mount::Mount;
use super::sweep::{self, Sweep, SweepPoint};
use super::sysctl;
use super::table::{self, Table};
use super::{
    free_bytes, human_bytes, median, parse_repeat, parse_seconds, parse_size, prepare_dir,
    progress, BenchError, SplitMix64, MIB,
};
use crate::html_file::HtmlFile;
use clap::Args;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use writeback::{Cache, OpenOptions, WriteFlags};

/// Chunk of the writers (fio's bs=1M, the engine writer's write_at size).
const CHUNK: usize = 1 << 20;
/// How long the writer runs alone before the reader starts.
const READER_DELAY: Duration = Duration::from_secs(1);
/// How often running jobs are polled.
const POLL: Duration = Duration::from_millis(20);
/// How much longer than the reader the writers are asked to run: fio
/// takes 0.3 s to start its reads on a quiet machine, up to 1.6 s seen
/// beside a writer (reads after the writer's end are not counted).
const WRITER_OVERRUN: Duration = Duration::from_secs(2);
/// The least time the reader must run beside the writer to be measured.
const MIN_OVERLAP: Duration = Duration::from_secs(1);
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
  kernel-dontcache  the same writes with pwritev2(RWF_DONTCACHE) by wb itself (fio here has
                    no uncached option), if the filesystem takes them (else left out, noted)
  kernel-kyber      kernel, with the block scheduler of the device under --dir switched to
                    kyber for the run (a loop device's own queue for a filesystem on one)
  kernel-bfq        the same with bfq (which turns the kernel's wbt off while it is in use)
  kernel-bfq-idle   kernel-bfq, the fio writer under `ionice -c3` (idle class); the kernel's
                    flusher, not the writer, issues most buffered writeback: it may change nothing
  kernel-dirty64m   kernel, with vm.dirty_bytes 64 MiB / vm.dirty_background_bytes 32 MiB for
                    the run instead of 20% / 10% of --memory
  kernel-nocache    kernel, the fio writer under `nocache` (LD_PRELOAD: fadvise DONTNEED of the
                    files it closes; Debian package nocache; without it left out, noted)
  kernel-direct     kernel, the fio writer with O_DIRECT writes (--direct=1, still 1 MiB)
  kernel-blkio      kernel, the fio writer in a cgroup v1 blkio cgroup whose
                    blkio.throttle.write_bps_device limits the device under --dir to
                    --blkio-write-limit (needs /sys/fs/cgroup/blkio). v1 throttling counts only
                    the writes a task issues itself: buffered writeback, issued by the flusher,
                    is charged to the root cgroup, so it limits little of a buffered writer
  engine-wbt-off    the writer is the writeback library (memory --memory, wbt_lat_usec=0)
  engine            the same with wbt_lat_usec=-1 (automatic target)
  engine-dontcache  engine, its writes uncached (WriteFlags::DONTCACHE, dontcache_flush=kick)
With --fuse: floor, kernel, kernel-bfq (bfq is the anchor to beat there), and
  mount-floor       the reader alone through a mount (what the mount's reader gets at best)
  mount             `wb mount --dir` on a temporary mountpoint (memory --memory, plus
                    --engine-set knobs), the same fio writer and reader through it
--sweep KNOB=V1,V2,... runs engine (mount with --fuse) once more per value, the knob set as
--engine-set sets it (after the configuration's wbt_lat_usec), each a row named
engine[KNOB=V]; the default engine row stays: the point the sweep is judged against. With
--html the report adds the frontier: reader p99 and p50 against writer MiB/s, a point per
kernel configuration, the sweep's points joined in the order given, the floor as a line.
The reader is `fio --rw=randread --bs=4k --direct=1 --ioengine=psync` (queue depth 1) on a
file written once with O_DIRECT, started 1 s after the writer, for --seconds. Each writer
runs until the reader has finished (fio's time_based: at the end of its --writer-size file
it goes on from the start), then fsyncs; writer MiB/s is what it wrote over that time. Only
the reads issued while the writer ran are counted (from fio's per-read latency log), each
with its whole latency: reads with no writer beside them measure no interference (a writer
that stopped early is noted; one that stopped within 1 s of the reader's start fails the run).
Before each run the filesystem's free space is trimmed (fstrim), so every writer meets
the same disk state (a loop device's image otherwise allocates only on first touch), the
page cache is dropped (a loop device's image would otherwise keep what earlier runs read),
and the run waits (at most 60 s, noted if longer) until 256 reads in a row of the
reader's file take under 2 ms each: the previous run's aftermath stays out of it.
While any writer runs, vm.dirty_bytes / vm.dirty_background_bytes are 20% / 10% of
--memory (the engine's limits; they also bound page caches under the filesystem, such
as a buffered loop device's), restored afterwards (also on Ctrl-C); needs root. The block
scheduler switched for kernel-kyber / kernel-bfq is restored the same way (and the queue's
wbt_lat_usec, if switching changed it), and kernel-blkio's cgroup removed.
Ratios: to the floor, to kernel, and to the best kernel configuration (every kernel-*
one) at each figure, chosen per figure (lowest latency, highest IOPS and writer MiB/s);
JSON has it as best_kernel.

Quick run: wb bench interference --writer-size 2GiB --seconds 5 --repeat 1
Experiment: wb bench interference --configs floor,engine --engine-set queue_depth=8
Frontier: wb bench interference --sweep wbt_lat_usec=500,1000,2000,4000,0 --html f.html

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
    /// Size of each writer's file (scaled down, with a note, if the disk lacks room);
    /// a writer that reaches its end before the reader stops writes it again from the start.
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
    /// floor, kernel, kernel-bfq, mount); --engine-set knobs go to the mount.
    #[arg(long)]
    pub fuse: bool,
    /// Where the engine remembers device calibrations.
    #[arg(long, default_value = "wb-data", value_name = "DIR")]
    pub data_dir: PathBuf,
    /// An engine knob for both engine configurations (cache or device knob,
    /// e.g. max_sectors_kb=128); wbt_lat_usec is set by the configuration. Repeatable.
    #[arg(long = "engine-set", value_name = "KNOB=VALUE", value_parser = super::parse_engine_set)]
    pub engine_sets: Vec<(String, String)>,
    /// Only these configurations, comma-separated (for experiments; ratios
    /// to the floor or the kernel need those in the list).
    #[arg(long, value_name = "NAMES", value_delimiter = ',', value_parser = parse_config)]
    pub configs: Vec<Config>,
    /// Run engine (mount with --fuse) once more for each value of an engine
    /// knob, e.g. wbt_lat_usec=500,1000,2000,4000,8000,0: a row each.
    #[arg(long, value_name = "KNOB=V1,V2,...", value_parser = sweep::parse_sweep)]
    pub sweep: Option<Sweep>,
    /// kernel-blkio's limit on the device's writes, per second.
    #[arg(long, default_value = "200MiB", value_parser = parse_size, value_name = "SIZE")]
    pub blkio_write_limit: u64,
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

/// The block scheduler `config` switches to.
fn scheduler(config: Config) -> Option<&'static str> {
    kernel_configs::tweaks(config).scheduler
}

/// A row of the report: a configuration, or the swept one (engine, or
/// mount with --fuse) with one value of the --sweep knob.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Row {
    config: Config,
    point: Option<SweepPoint>,
}

impl Row {
    fn name(&self) -> String {
        row_name(self.config, self.point.as_ref())
    }
}

/// One run of one configuration.
#[derive(Clone, Copy, Debug)]
struct RunResult {
    reader: ReaderResult,
    /// Writer MiB/s; None for the floor.
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
    /// What the kernel configurations change, and on which device.
    machine: Machine,
}

pub fn run(args: InterferenceArgs, html: Option<HtmlFile>) -> Result<(), BenchError> {
    let started = Instant::now();
    if args.writer_size < CHUNK as u64 {
        return Err(BenchError::BadInput(
            "--writer-size must be at least 1MiB (the writers write 1 MiB at a time)".into(),
        ));
    }
    if let Some(sweep) = &args.sweep {
        sweep
            .check_with(&args.engine_sets)
            .map_err(BenchError::BadInput)?;
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
    let mut notes: Vec<String> = Vec::new();
    let machine = Machine::probe(&dir, args.blkio_write_limit);
    let rows = choose_rows(&args, &dir, &machine, &mut notes);

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
        machine,
    };

    let mut results: Vec<(Row, Vec<RunResult>)> =
        rows.into_iter().map(|r| (r, Vec::new())).collect();
    let mut left_out: Vec<Row> = Vec::new();
    let mut untrimmed_noted = false;
    // Repeats interleave the configurations, so slow drifts of the disk
    // (host caches filling, ...) spread over all of them.
    for repeat in 1..=args.repeat {
        for (row, runs) in results.iter_mut() {
            if left_out.contains(row) {
                continue;
            }
            let name = row.name();
            let (trimmed, quiet) = settle(&setup)?;
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
                let note = format!("{name} ({repeat}): {why}; ran anyway");
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
            let label = format!("{name} ({repeat}/{})", args.repeat);
            progress!("{label}: running");
            match run_config(&setup, row, &label, &mut notes) {
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
                Err(e) if row.config.optional() && repeat == 1 => {
                    // The probe passed, but the writes, the scheduler
                    // switch or the cgroup failed for real: leave the
                    // configuration out.
                    let note = format!("{name}: left out: {e}");
                    progress!("{note}");
                    notes.push(note);
                    left_out.push(row.clone());
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
        .map(|(row, runs)| summarize(row, &runs))
        .collect();
    progress!("done in {:.0} s", started.elapsed().as_secs_f64());
    let mut doc = render(&summaries, &setup, args.repeat, &notes);
    if args.json {
        println!("{}", to_json(&summaries));
    } else {
        print!("{doc}");
    }
    if html.is_some() {
        let figures = frontier::figures(&summaries)
            .map_err(|e| BenchError::failed("the frontier plot", e))?;
        doc.figures(figures);
    }
    super::write_html(html, "wb bench interference", &doc)
}

/// The rows to run, in order: the configurations asked for (all but
/// mount by default; floor, mount-floor, kernel, kernel-bfq and mount with --fuse) that this
/// machine can run, the others left out with a note; the --sweep points
/// right after the configuration they sweep (engine, or mount with
/// --fuse), which run even if --configs leaves that one out.
fn choose_rows(
    args: &InterferenceArgs,
    dir: &Path,
    machine: &Machine,
    notes: &mut Vec<String>,
) -> Vec<Row> {
    let (candidates, swept) = if args.fuse {
        (Config::FUSE.to_vec(), Config::Mount)
    } else {
        let all = Config::ALL
            .into_iter()
            .filter(|c| !matches!(c, Config::Mount | Config::MountFloor));
        (all.collect::<Vec<_>>(), Config::Engine)
    };
    let asked = |c: &Config| args.configs.is_empty() || args.configs.contains(c);
    let mut rows = Vec::new();
    for config in candidates {
        if asked(&config) {
            let why = if config == Config::KernelDontcache {
                kernel_write::check_dontcache(dir).err()
            } else {
                machine.unavailable(config)
            };
            match why {
                Some(why) => {
                    let note = format!("{}: left out: {why}", config.name());
                    progress!("{note}");
                    notes.push(note);
                }
                None => rows.push(Row {
                    config,
                    point: None,
                }),
            }
        }
        if config == swept {
            let points = args.sweep.iter().flat_map(|s| s.points());
            rows.extend(points.map(|p| Row {
                config,
                point: Some(p),
            }));
        }
    }
    if let Some(q) = machine.queue() {
        if rows.iter().any(|r| scheduler(r.config).is_some()) {
            progress!(
                "block scheduler of {} ({}): {}",
                q.device,
                q.dir.display(),
                q.schedulers()
                    .ok()
                    .and_then(|(now, _)| now)
                    .unwrap_or_else(|| "?".into())
            );
        }
    }
    rows
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
    let mut rng = SplitMix64::seed_from_u64(0x5eed);
    rng.fill_bytes(buf.as_mut_slice());
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
/// durable, the filesystem's free space trimmed, the page cache dropped,
/// then the disk given time to go quiet. Returns (trimmed, quiet).
///
/// The trim gives every run the same start. Without it, only the first
/// writer on a fresh filesystem over a loop device makes the loop's image
/// file allocate its blocks, and the runs after it merely overwrite them:
/// on this machine the kernel's reader p99 is 15-22 ms on first touch and
/// 0.05 ms on overwrite (BENCHMARKS.md), so the order of the configurations
/// decided the result. The quiet check keeps the previous run's aftermath
/// (the image's own writeback, the trim's hole punching) out of the next
/// run: on this machine a first read after a big run once took 9 s.
///
/// The drop gives every run the same cache: a loop device writing its
/// image through the page cache keeps there what earlier runs read of the
/// reader's file, so a run after a reading one read from memory (the
/// kernel's reader p50 0.014 ms against the floor's 0.070 ms, 2026-11-25)
/// while runs after 8 GiB writers, which pushed it out, read from the disk:
/// the order of the configurations decided again. fio then runs a few
/// reads: after the drop its own program is no longer in memory, and
/// reading it back beside a writer kept the reader from starting for
/// seconds.
fn settle(setup: &Setup) -> Result<(bool, std::io::Result<bool>), BenchError> {
    let (dir, reader_file) = (&setup.dir, &setup.reader_file);
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    let trimmed = std::process::Command::new("fstrim")
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    super::drop_caches()?;
    let mut warm_up = fio::reader_args(reader_file, 1);
    warm_up.push("--number_ios=16".into());
    setup.fio.spawn(dir, "warm-up", &warm_up)?.finish()?;
    std::thread::sleep(Duration::from_secs(2));
    Ok((trimmed, wait_quiet(reader_file)))
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
    let mut rng = SplitMix64::seed_from_u64(0x9e3779b9);
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

/// `wb mount` of the bench directory with the engine's memory and knobs,
/// and the --sweep knob's value `point` last.
fn start_mount(setup: &Setup, point: Option<&SweepPoint>) -> Result<Mount, BenchError> {
    let mut sets = vec![("memory".to_string(), setup.memory.to_string())];
    sets.extend(setup.engine_sets.iter().cloned());
    sets.extend(point.map(|p| (p.knob.clone(), p.value.clone())));
    Mount::start(&setup.dir, &sets)
}

/// `path` (a file of --dir) as fio sees it: through `mount` if one runs.
fn through(mount: Option<&Mount>, path: &Path) -> PathBuf {
    match mount {
        Some(m) => m.path().join(path.file_name().unwrap_or_default()),
        None => path.to_path_buf(),
    }
}

/// The writer of a run.
enum Writer {
    Fio(fio::RunningFio),
    /// Our own kernel writer (RWF_DONTCACHE, which this fio lacks).
    Kernel(kernel_write::BackgroundWriter),
    Engine(EngineWriter),
}

impl Writer {
    fn has_finished(&mut self) -> Result<bool, BenchError> {
        match self {
            Writer::Fio(f) => f.has_finished(),
            Writer::Kernel(k) => Ok(k.has_finished()),
            Writer::Engine(e) => Ok(e.has_finished()),
        }
    }
}

fn run_config(
    setup: &Setup,
    row: &Row,
    label: &str,
    notes: &mut Vec<String>,
) -> Result<RunResult, BenchError> {
    let config = row.config;
    let _ = std::fs::remove_file(&setup.writer_file);
    let log = fio::LatencyLog::new(&setup.dir, "reader");
    if config == Config::Floor || config == Config::MountFloor {
        // The reader alone: on --dir, or through a mount of it (what the
        // mount's reader can do at best, with no writer beside it).
        let mount = match config {
            Config::MountFloor => Some(start_mount(setup, None)?),
            _ => None,
        };
        let file = through(mount.as_ref(), &setup.reader_file);
        let mut reader_args = fio::reader_args(&file, setup.seconds);
        reader_args.extend(log.args());
        let reader = setup.fio.spawn(&setup.dir, "reader", &reader_args)?;
        let report = reader.finish()?;
        // fio's own report says whether the job failed; the figures come
        // from its log.
        fio::parse_reader(&report).map_err(BenchError::Failed)?;
        let reader = log.reads(None).map_err(BenchError::Failed)?;
        return Ok(RunResult {
            reader,
            writer_mib_s: None,
        });
    }

    // The kernel's dirty limits are the engine's whenever a writer runs
    // (but for kernel-dirty64m's own). The engine's files bypass the
    // kernel's page cache, but a layer under the filesystem may not (a
    // loop device writing its image through the page cache), and every
    // configuration must run on the same machine. Then the configuration's
    // scheduler, cgroup and the command its fio writer runs under.
    let applied = setup
        .machine
        .apply(config, setup.dirty_limits)
        .map_err(BenchError::Failed)?;
    // With --fuse, fio writes and reads the same files through the mount.
    let mount = match config {
        Config::Mount => Some(start_mount(setup, row.point.as_ref())?),
        _ => None,
    };
    let through = |path: &Path| through(mount.as_ref(), path);
    let mut reader_args = fio::reader_args(&through(&setup.reader_file), setup.seconds);
    reader_args.extend(log.args());
    // Every writer runs longer than the reader, over its file again once
    // it reaches the end, so the reader always has it beside it: a fast
    // writer finishing early would leave the reader alone.
    let writer_runtime = READER_DELAY + Duration::from_secs(setup.seconds) + WRITER_OVERRUN;
    let mut writer = match config {
        Config::Kernel
        | Config::KernelKyber
        | Config::KernelBfq
        | Config::KernelBfqIdle
        | Config::KernelDirty64m
        | Config::KernelNocache
        | Config::KernelDirect
        | Config::KernelBlkio
        | Config::Mount => {
            let args = applied.writer_args(fio::timed_writer_args(
                &through(&setup.writer_file),
                setup.writer_size,
                writer_runtime,
            ));
            let wrapper = &applied.wrapper;
            Writer::Fio(
                setup
                    .fio
                    .spawn_under(&setup.dir, "writer", &args, wrapper)?,
            )
        }
        Config::KernelDontcache => Writer::Kernel(
            kernel_write::BackgroundWriter::start(
                &setup.writer_file,
                kernel_write::Mode::Dontcache,
                setup.writer_size,
                CHUNK,
                Some(writer_runtime),
            )
            .map_err(|e| BenchError::failed(setup.writer_file.display(), e))?,
        ),
        Config::Floor
        | Config::MountFloor
        | Config::EngineWbtOff
        | Config::Engine
        | Config::EngineDontcache => {
            let flags = if config == Config::EngineDontcache {
                WriteFlags::DONTCACHE
            } else {
                WriteFlags::default()
            };
            Writer::Engine(EngineWriter::start(
                setup,
                matches!(config, Config::Engine | Config::EngineDontcache),
                row.point.as_ref(),
                flags,
                writer_runtime,
            )?)
        }
    };
    // Counted from here: the engine's writer may have calibrated its
    // device first.
    let writer_start = Instant::now();
    let mut writer_end: Option<(Instant, SystemTime)> = None;
    while writer_start.elapsed() < READER_DELAY {
        std::thread::sleep(POLL);
    }
    let reader_start = Instant::now();
    let mut reader = setup.fio.spawn(&setup.dir, "reader", &reader_args)?;
    loop {
        if writer_end.is_none() && writer.has_finished()? {
            writer_end = Some((Instant::now(), SystemTime::now()));
        }
        if reader.has_finished()? {
            break;
        }
        std::thread::sleep(POLL);
    }
    let reader_end = Instant::now();
    fio::parse_reader(&reader.finish()?).map_err(BenchError::Failed)?;
    // Only the reads made while the writer ran measure its interference.
    let reader = match writer_end {
        Some((end, _)) if end < reader_start + MIN_OVERLAP => {
            return Err(BenchError::Failed(format!(
                "{label}: the writer finished {:.1} s after the reader started, \
                 too soon to measure the reader beside it (use a larger --writer-size)",
                end.saturating_duration_since(reader_start).as_secs_f64()
            )));
        }
        Some((end, end_wall)) => {
            let note = format!(
                "{label}: the writer finished {:.1} s before the reader; \
                 the reader's {:.1} s beside it are counted",
                (reader_end - end).as_secs_f64(),
                (end - reader_start).as_secs_f64()
            );
            progress!("{note}");
            notes.push(note);
            let until_ms = end_wall
                .duration_since(UNIX_EPOCH)
                .map_err(|e| BenchError::failed("the clock", e))?
                .as_millis() as u64;
            log.reads(Some(until_ms))
        }
        None => log.reads(None),
    }
    .map_err(BenchError::Failed)?;
    let writer_mib_s = match writer {
        Writer::Fio(f) => {
            let w = fio::parse_writer(&f.finish()?).map_err(BenchError::Failed)?;
            w.bw_bytes_s / MIB
        }
        Writer::Kernel(k) => k.finish().map_err(BenchError::Failed)?.mib_s(),
        Writer::Engine(e) => {
            let outcome = e.finish()?;
            let d = outcome.stats.devices.first();
            progress!(
                "{label}: engine: {} dirty-throttle pauses ({:.0} ms in all), wbt {} \
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
                human_bytes(outcome.stats.dirty_peak_pages * wb_engine::PAGE_SIZE)
            );
            outcome.bytes as f64 / MIB / outcome.elapsed.as_secs_f64().max(1e-9)
        }
    };
    if let Some(mount) = mount {
        let took = mount.stop()?;
        progress!("{label}: wb mount stopped in {:.1} s", took.as_secs_f64());
    }
    if let Some(seen) = applied.finish().map_err(BenchError::Failed)? {
        let note = format!("{label}: {seen}");
        progress!("{note}");
        notes.push(note);
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
/// 1 MiB write_at calls through a Cache for a time (over the file again
/// from its start each time it reaches the end), then sync_data. Dropping
/// it early (on an error elsewhere) stops the writer and waits for it.
struct EngineWriter {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<EngineOutcome, String>>>,
}

impl EngineWriter {
    /// The writer with wbt automatic or off, then the --sweep knob's
    /// value `point` (which may set wbt_lat_usec after that).
    fn start(
        setup: &Setup,
        wbt_auto: bool,
        point: Option<&SweepPoint>,
        flags: WriteFlags,
        runtime: Duration,
    ) -> Result<EngineWriter, BenchError> {
        let set = |builder: writeback::CacheBuilder, knob: &str, value: &str, what: &str| {
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
            &setup.memory.to_string(),
            "--memory",
        )?;
        for (knob, value) in &setup.engine_sets {
            builder = set(builder, knob, value, "--engine-set")?;
        }
        let wbt = if wbt_auto { "-1" } else { "0" };
        builder = set(builder, "wbt_lat_usec", wbt, "wbt_lat_usec")?;
        if let Some(p) = point {
            builder = set(builder, &p.knob, &p.value, "--sweep")?;
        }
        let cache = builder
            .data_dir(&setup.data_dir)
            .calibrate(true)
            .build()
            .map_err(|e| BenchError::failed("starting the cache", e))?;
        // Opening the first file of a device calibrates it (once; remembered in data_dir).
        let file = cache
            .open(&setup.writer_file, OpenOptions { create: true })
            .map_err(|e| BenchError::failed("opening the engine writer's file", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let span = kernel_write::WriteSpan {
            size: setup.writer_size,
            chunk: CHUNK,
            runtime: Some(runtime),
        };
        let stop_flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("wb-bench-writer".into())
            .spawn(move || -> Result<EngineOutcome, String> {
                let mut buf = vec![0u8; CHUNK];
                SplitMix64::seed_from_u64(0xb0b).fill_bytes(&mut buf);
                let start = Instant::now();
                let (mut offset, mut bytes) = (0u64, 0u64);
                while let Some((at, len)) = span.next(offset, start) {
                    if stop_flag.load(Ordering::Relaxed) {
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

fn summarize(row: Row, runs: &[RunResult]) -> ConfigSummary {
    let m = |f: fn(&RunResult) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
    let writers: Vec<f64> = runs.iter().filter_map(|r| r.writer_mib_s).collect();
    ConfigSummary {
        config: row.config,
        point: row.point,
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

/// A figure of a configuration's summary, compared across configurations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Figure {
    P50,
    P99,
    P99_9,
    Max,
    Iops,
    WriterMibS,
}

impl Figure {
    const ALL: [Figure; 6] = [
        Figure::P50,
        Figure::P99,
        Figure::P99_9,
        Figure::Max,
        Figure::Iops,
        Figure::WriterMibS,
    ];

    /// Its key in `best_kernel` (the reader's keys, and the writer's MiB/s).
    fn key(self) -> &'static str {
        match self {
            Figure::P50 => "p50_us",
            Figure::P99 => "p99_us",
            Figure::P99_9 => "p99_9_us",
            Figure::Max => "max_us",
            Figure::Iops => "iops",
            Figure::WriterMibS => "writer_mib_s",
        }
    }

    fn of(self, s: &ConfigSummary) -> Option<f64> {
        let r = &s.reader;
        match self {
            Figure::P50 => Some(r.p50_us),
            Figure::P99 => Some(r.p99_us),
            Figure::P99_9 => Some(r.p99_9_us),
            Figure::Max => Some(r.max_us),
            Figure::Iops => Some(r.iops),
            Figure::WriterMibS => s.writer_mib_s,
        }
        .filter(|x| x.is_finite())
    }

    /// Latencies are better low; IOPS and writer MiB/s high.
    fn lower_is_better(self) -> bool {
        matches!(
            self,
            Figure::P50 | Figure::P99 | Figure::P99_9 | Figure::Max
        )
    }
}

/// The best kernel configuration at one figure, and its value.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Best {
    figure: Figure,
    config: Config,
    value: f64,
}

/// For each figure, the kernel configuration that did best at it (empty if
/// no kernel configuration ran). A tie goes to the one listed first.
fn best_kernel(summaries: &[ConfigSummary]) -> Vec<Best> {
    Figure::ALL
        .into_iter()
        .filter_map(|figure| {
            let better = |a: f64, b: f64| {
                if figure.lower_is_better() {
                    a < b
                } else {
                    a > b
                }
            };
            summaries
                .iter()
                .filter(|s| s.config.is_kernel())
                .filter_map(|s| figure.of(s).map(|v| (s.config, v)))
                .fold(None, |best: Option<Best>, (config, value)| match best {
                    Some(b) if !better(value, b.value) => Some(b),
                    _ => Some(Best {
                        figure,
                        config,
                        value,
                    }),
                })
        })
        .collect()
}

fn to_json(summaries: &[ConfigSummary]) -> String {
    let configs: Vec<serde_json::Value> = summaries
        .iter()
        .map(|s| {
            let mut v = json!({
                "name": s.name(),
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
            if let Some(p) = &s.point {
                v["config"] = json!(s.config.name());
                v["knob"] = json!(p.knob);
                v["value"] = json!(p.value);
            }
            v
        })
        .collect();
    let mut out = json!({ "configs": configs });
    let best = best_kernel(summaries);
    if !best.is_empty() {
        let mut map = serde_json::Map::new();
        for b in best {
            map.insert(
                b.figure.key().into(),
                json!({ "value": b.value, "config": b.config.name() }),
            );
        }
        out["best_kernel"] = serde_json::Value::Object(map);
    }
    out.to_string()
}

fn render(summaries: &[ConfigSummary], setup: &Setup, repeat: usize, notes: &[String]) -> Doc {
    let mut out = Doc::from(format!(
        "Reader: 4 KiB O_DIRECT random reads, queue depth 1, {} s, counted while the writer \
         runs; writer: {} sequential; medians of {repeat} run{}.\n\
         Kernel dirty limits for the kernel runs: {} / background {} (20% / 10% of the \
         engine's {}){}.\n\n",
        setup.seconds,
        human_bytes(setup.writer_size),
        if repeat == 1 { "" } else { "s" },
        human_bytes(setup.dirty_limits.0),
        human_bytes(setup.dirty_limits.1),
        human_bytes(setup.memory),
        match summaries.iter().any(|s| s.config == Config::KernelDirty64m) {
            true => format!(
                "; kernel-dirty64m's: {} / background {}",
                human_bytes(kernel_configs::DIRTY64M_LIMITS.0),
                human_bytes(kernel_configs::DIRTY64M_LIMITS.1)
            ),
            false => String::new(),
        },
    ));
    let find = |c: Config| {
        summaries
            .iter()
            .find(|s| s.config == c && s.point.is_none())
    };
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
            s.name(),
            table::ms(s.reader.p50_us),
            table::ms(s.reader.p99_us),
            table::ms(s.reader.p99_9_us),
            table::ms(s.reader.max_us),
            table::rate(s.reader.iops),
            s.writer_mib_s.map_or("-".into(), table::rate),
        ]);
    }
    out.table(abs);

    for (title, base) in [("ratio to floor", floor), ("ratio to kernel", kernel)] {
        let Some(base) = base else { continue };
        let mut t = Table::new(&[title, "p50", "p99", "p99.9", "max", "IOPS", "writer"]);
        for s in summaries.iter().filter(|s| s.name() != base.name()) {
            let r = |f: fn(&ReaderResult) -> f64| {
                table::ratio(Some(f(&s.reader)), Some(f(&base.reader)))
            };
            t.row(vec![
                s.name(),
                r(|x| x.p50_us),
                r(|x| x.p99_us),
                r(|x| x.p99_9_us),
                r(|x| x.max_us),
                r(|x| x.iops),
                table::ratio(s.writer_mib_s, base.writer_mib_s),
            ]);
        }
        out.push('\n');
        out.table(t);
    }
    render_best_kernel(summaries, &mut out);
    if !notes.is_empty() {
        out.push_str("\nNotes:\n");
        for n in notes {
            out.push_str(&format!("  {n}\n"));
        }
    }
    out
}

/// The table of ratios to the best kernel configuration at each figure,
/// for the configurations that are not the kernel's (empty without both).
fn render_best_kernel(summaries: &[ConfigSummary], out: &mut Doc) {
    let best = best_kernel(summaries);
    let others: Vec<&ConfigSummary> = summaries
        .iter()
        .filter(|s| !s.config.is_kernel() && s.config != Config::Floor)
        .collect();
    if best.is_empty() || others.is_empty() {
        return;
    }
    let mut t = Table::new(&[
        "ratio to best kernel",
        "p50",
        "p99",
        "p99.9",
        "max",
        "IOPS",
        "writer",
    ]);
    let cell = |figure: Figure, f: &dyn Fn(&Best) -> String| {
        best.iter()
            .find(|b| b.figure == figure)
            .map_or("-".into(), f)
    };
    for s in others {
        t.row(
            std::iter::once(s.name())
                .chain(
                    Figure::ALL
                        .into_iter()
                        .map(|figure| cell(figure, &|b| table::ratio(figure.of(s), Some(b.value)))),
                )
                .collect(),
        );
    }
    t.row(
        std::iter::once("(best kernel)".to_string())
            .chain(
                Figure::ALL
                    .into_iter()
                    .map(|figure| cell(figure, &|b| b.config.name().to_string())),
            )
            .collect(),
    );
    out.push('\n');
    out.table(t);
    out.push_str(
        "(the best kernel configuration chosen per column: lowest latency, highest IOPS \
         and writer MiB/s)\n",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(config: Config, lat_us: [f64; 4], iops: f64, writer: Option<f64>) -> ConfigSummary {
        ConfigSummary {
            config,
            point: None,
            reader: ReaderResult {
                p50_us: lat_us[0],
                p99_us: lat_us[1],
                p99_9_us: lat_us[2],
                max_us: lat_us[3],
                iops,
            },
            writer_mib_s: writer,
        }
    }

    fn sample() -> Vec<ConfigSummary> {
        vec![
            summary(Config::Floor, [1.0, 2.0, 3.0, 4.0], 9000.0, None),
            summary(
                Config::Kernel,
                [20.0, 900.0, 5000.0, 90000.0],
                1000.0,
                Some(600.0),
            ),
            summary(
                Config::KernelDontcache,
                [20.0, 400.0, 7000.0, 80000.0],
                900.0,
                Some(700.0),
            ),
            summary(
                Config::KernelKyber,
                [15.0, 500.0, 3000.0, 95000.0],
                1500.0,
                Some(500.0),
            ),
            summary(
                Config::KernelBfq,
                [18.0, 450.0, 4000.0, 70000.0],
                1400.0,
                Some(400.0),
            ),
            summary(
                Config::EngineWbtOff,
                [19.0, 300.0, 2000.0, 60000.0],
                2000.0,
                Some(800.0),
            ),
            summary(
                Config::Engine,
                [22.0, 200.0, 1500.0, 50000.0],
                3000.0,
                Some(650.0),
            ),
        ]
    }

    #[test]
    fn new_configuration_names_parse() {
        for name in [
            "kernel-dontcache",
            "kernel-kyber",
            "kernel-bfq",
            "kernel",
            "engine",
            "engine-dontcache",
        ] {
            assert_eq!(parse_config(name).map(Config::name), Ok(name));
        }
        assert!(parse_config("kernel-cfq").is_err());
        assert_eq!(scheduler(Config::KernelBfq), Some("bfq"));
        assert!(Config::KernelKyber.is_kernel() && !Config::Engine.is_kernel());
    }

    #[test]
    fn every_configuration_name_round_trips() {
        for config in Config::ALL {
            assert_eq!(parse_config(config.name()), Ok(config));
        }
        let names: Vec<&str> = Config::ALL.iter().map(|c| c.name()).collect();
        for name in [
            "kernel-bfq-idle",
            "kernel-dirty64m",
            "kernel-nocache",
            "kernel-direct",
            "kernel-blkio",
        ] {
            assert!(names.contains(&name), "{name} missing from {names:?}");
            let config = parse_config(name).expect("known");
            assert!(config.is_kernel() && config.optional(), "{name}");
        }
        assert!(!Config::Kernel.optional() && !Config::Engine.optional());
        assert_eq!(scheduler(Config::KernelBfqIdle), Some("bfq"));
        let err = parse_config("kernel-nocach").expect_err("unknown");
        assert!(err.contains("kernel-blkio"), "{err}");
    }

    /// `wb bench interference ARGS` as clap parses them.
    fn args(list: &[&str]) -> Result<InterferenceArgs, clap::Error> {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: InterferenceArgs,
        }
        use clap::Parser;
        let argv = std::iter::once("interference").chain(list.iter().copied());
        Cli::try_parse_from(argv).map(|c| c.args)
    }

    #[test]
    fn sweep_and_blkio_limit_parse_and_bad_sweeps_are_usage_errors() {
        let a = args(&["--sweep", "wbt_lat_usec=1000,4000"]).expect("valid");
        let sweep = a.sweep.expect("a sweep");
        assert_eq!(sweep.values, ["1000", "4000"]);
        assert_eq!(a.blkio_write_limit, 200 << 20);
        let a = args(&["--blkio-write-limit", "50MiB"]).expect("valid");
        assert_eq!(a.blkio_write_limit, 50 << 20);
        for bad in [
            "wbt_lat_usec",
            "wbt_lat_usec=",
            "nope=1,2",
            "wbt_lat_usec=1000,x",
        ] {
            let err = args(&["--sweep", bad]).err().expect(bad);
            // clap's usage errors exit with 2, as bad arguments do here.
            assert_eq!(err.exit_code(), 2, "{bad}: {err}");
            assert!(err.to_string().contains("--sweep"), "{bad}: {err}");
        }
        assert!(args(&["--sweep", "a=1", "--sweep", "b=2"]).is_err());
    }

    #[test]
    fn sweep_rows_follow_their_configuration_even_when_it_is_not_asked_for() {
        let dir = std::env::temp_dir();
        let machine = Machine::probe(&dir, 200 << 20);
        let names = |list: &[&str]| -> Vec<String> {
            let a = args(list).expect("valid");
            let mut notes = Vec::new();
            choose_rows(&a, &dir, &machine, &mut notes)
                .iter()
                .map(Row::name)
                .collect()
        };
        let sweep = ["--sweep", "wbt_lat_usec=4000,1000"];
        fn list<'a>(configs: &'a str, sweep: &[&'a str]) -> Vec<&'a str> {
            [&["--configs", configs][..], sweep].concat()
        }
        assert_eq!(
            names(&list("floor,kernel,engine,engine-dontcache", &sweep)),
            [
                "floor",
                "kernel",
                "engine",
                "engine[wbt_lat_usec=4000]",
                "engine[wbt_lat_usec=1000]",
                "engine-dontcache"
            ]
        );
        assert_eq!(
            names(&list("floor,kernel", &sweep)),
            [
                "floor",
                "kernel",
                "engine[wbt_lat_usec=4000]",
                "engine[wbt_lat_usec=1000]"
            ]
        );
        let fuse = [&["--fuse"][..], &list("floor,kernel,mount", &sweep)[..]].concat();
        assert_eq!(
            names(&fuse),
            [
                "floor",
                "kernel",
                "mount",
                "mount[wbt_lat_usec=4000]",
                "mount[wbt_lat_usec=1000]"
            ]
        );
        // The mount's reader alone only with --fuse, in its place there.
        let fuse = [&["--fuse"][..], &list("mount,mount-floor,floor", &[])[..]].concat();
        assert_eq!(names(&fuse), ["floor", "mount-floor", "mount"]);
        assert_eq!(names(&list("mount-floor,floor", &[])), ["floor"]);
        assert_eq!(names(&["--configs", "floor,engine"]), ["floor", "engine"]);
    }

    fn swept(value: &str, p99_us: f64, writer: f64) -> ConfigSummary {
        ConfigSummary {
            point: Some(SweepPoint {
                knob: "wbt_lat_usec".into(),
                value: value.into(),
            }),
            ..summary(
                Config::Engine,
                [10.0, p99_us, 1000.0, 2000.0],
                3000.0,
                Some(writer),
            )
        }
    }

    #[test]
    fn sweep_rows_have_their_own_names_in_json_and_tables() {
        let mut rows = sample();
        rows.push(swept("2000", 150.0, 500.0));
        rows.push(swept("0", 800.0, 900.0));
        let v: serde_json::Value = serde_json::from_str(&to_json(&rows)).expect("valid JSON");
        let configs = v["configs"].as_array().expect("configs");
        assert_eq!(configs.len(), 9);
        let point = &configs[7];
        assert_eq!(point["name"], "engine[wbt_lat_usec=2000]");
        assert_eq!(point["config"], "engine");
        assert_eq!(point["knob"], "wbt_lat_usec");
        assert_eq!(point["value"], "2000");
        assert_eq!(point["reader"]["p99_us"], 150.0);
        assert!(configs[6].get("knob").is_none(), "{}", configs[6]);
        assert_eq!(configs[6]["name"], "engine");
        // Sweep rows are not kernel configurations.
        assert_eq!(
            v["best_kernel"]["writer_mib_s"]["config"],
            "kernel-dontcache"
        );
        let mut doc = Doc::new();
        render_best_kernel(&rows, &mut doc);
        let text = doc.to_string();
        assert!(text.contains("\nengine[wbt_lat_usec=2000] "), "{text}");
        assert!(text.contains("\nengine[wbt_lat_usec=0] "), "{text}");
        // Ratios against the floor and the kernel: the default engine row
        // is found as `engine`, not as a sweep point.
        let find = |c: Config| rows.iter().find(|s| s.config == c && s.point.is_none());
        assert_eq!(
            find(Config::Engine).map(ConfigSummary::name).as_deref(),
            Some("engine")
        );
    }

    #[test]
    fn best_kernel_is_chosen_per_figure_among_kernel_configs_only() {
        let best = best_kernel(&sample());
        let got: Vec<(&str, &str, f64)> = best
            .iter()
            .map(|b| (b.figure.key(), b.config.name(), b.value))
            .collect();
        assert_eq!(
            got,
            [
                ("p50_us", "kernel-kyber", 15.0),
                ("p99_us", "kernel-dontcache", 400.0),
                ("p99_9_us", "kernel-kyber", 3000.0),
                ("max_us", "kernel-bfq", 70000.0),
                ("iops", "kernel-kyber", 1500.0),
                ("writer_mib_s", "kernel-dontcache", 700.0),
            ]
        );
        // A tie goes to the configuration listed first.
        let tie = [
            summary(Config::Kernel, [1.0; 4], 5.0, Some(5.0)),
            summary(Config::KernelBfq, [1.0; 4], 5.0, Some(5.0)),
        ];
        assert!(best_kernel(&tie).iter().all(|b| b.config == Config::Kernel));
        // No kernel configuration: nothing to compare with.
        let engine_only = [summary(Config::Engine, [1.0; 4], 5.0, Some(5.0))];
        assert!(best_kernel(&engine_only).is_empty());
    }

    #[test]
    fn json_keeps_its_keys_and_adds_best_kernel() {
        let v: serde_json::Value = serde_json::from_str(&to_json(&sample())).expect("valid JSON");
        let configs = v["configs"].as_array().expect("configs");
        assert_eq!(configs.len(), 7);
        assert_eq!(configs[0]["name"], "floor");
        assert!(configs[0].get("writer").is_none());
        assert_eq!(configs[1]["reader"]["p99_us"], 900.0);
        assert_eq!(configs[1]["writer"]["mib_s"], 600.0);
        let best = &v["best_kernel"];
        assert_eq!(best["p99_us"]["config"], "kernel-dontcache");
        assert_eq!(best["p99_us"]["value"], 400.0);
        assert_eq!(best["writer_mib_s"]["config"], "kernel-dontcache");
        assert_eq!(best.as_object().map(|m| m.len()), Some(6));
        let none = to_json(&[summary(Config::Engine, [1.0; 4], 5.0, Some(5.0))]);
        assert!(!none.contains("best_kernel"), "{none}");
    }

    #[test]
    fn best_kernel_table_has_a_row_per_engine_config_and_names_the_best() {
        let mut doc = Doc::new();
        render_best_kernel(&sample(), &mut doc);
        let text = doc.to_string();
        let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
        assert!(lines[0].starts_with("ratio to best kernel"), "{text}");
        // engine p99 200 / best 400 = 0.50x; IOPS 3000 / 1500 = 2.00x.
        assert!(lines[2].starts_with("engine "), "{text}");
        assert!(
            lines[2].contains("0.50x") && lines[2].contains("2.00x"),
            "{text}"
        );
        assert!(lines[3].starts_with("(best kernel)"), "{text}");
        assert!(lines[3].contains("kernel-bfq"), "{text}");
        assert!(!text.contains("\nfloor"), "{text}");
        let mut doc = Doc::new();
        render_best_kernel(&sample()[..2], &mut doc);
        assert_eq!(doc.to_string(), "");
    }
}
