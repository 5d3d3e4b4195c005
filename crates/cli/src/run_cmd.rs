//! `wb run FILE`: the same scenario files as `wb sim`, for real: jobs
//! become threads, devices become directories on real filesystems, and the
//! engine runs on real time through the `writeback` library. When jobs stop
//! and what they record is `wb_sim::job`, as in the simulator; this file
//! adds the threads and the clock.

use crate::{EXIT_BAD_INPUT, EXIT_FAILURE};
use clap::Args;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant as StdInstant};
use wb_scenario::{JobKind, Scenario};
use wb_sim::job::{self, JobRun};
use wb_sim::report::{DeviceFacts, EngineReport, RunReport};
use wb_sim::rng::Rng;
use wb_sim::timeline::EngineTimeline;
use wb_sim::workload::{Next, Op, Workload};
use writeback::{Cache, File, OpenOptions};

/// Default place for the run's files: one directory per device.
pub const DEFAULT_RUN_DIR: &str = "wb-data/run";
/// A job waiting for its next operation looks at the stop flag this often.
const IDLE_POLL: Duration = Duration::from_millis(20);

#[derive(Args)]
#[command(after_help = "\
Each [[device]] of the scenario becomes a directory: --dir PATH puts every device in PATH/<device>,
--dir DEVICE=PATH puts one device at PATH (repeatable; use directories on different filesystems
to get different devices). Default: ./wb-data/run/<device>. Device models and their params are
ignored; the engine's knobs from the scenario and --set apply. Readers' cold files are created
once (written with O_DIRECT) and reused by later runs.

Example:
  wb run scenarios/sekiyama-2007.toml --dir usb=/mnt/slow --dir ssd=/mnt/fast")]
pub struct RunArgs {
    /// Scenario file (TOML), as for `wb sim`.
    pub scenario: PathBuf,
    /// Where devices live: PATH for all, or DEVICE=PATH for one. Repeatable.
    #[arg(long = "dir", value_name = "[DEVICE=]PATH")]
    pub dirs: Vec<String>,
    /// Print one JSON object instead of the human report.
    #[arg(long)]
    pub json: bool,
    /// Override a knob: KNOB=VALUE, DEVICE.KNOB=VALUE or JOB.mode=MODE (as for
    /// `wb sim`; mode direct is simulated only). Repeatable.
    #[arg(long = "set", value_name = "KNOB=VALUE")]
    pub sets: Vec<String>,
    /// Seed for random offsets; defaults to the scenario's seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Do not measure devices; assume 1 ms idle reads for the automatic wbt target.
    #[arg(long)]
    pub no_calibrate: bool,
    /// State directory: where device calibrations are remembered (made if
    /// missing). Default: $STATE_DIRECTORY (its first path), else /var/lib/wb
    /// as root, else $XDG_STATE_HOME/wb, else $HOME/.local/state/wb.
    #[arg(long, value_name = "DIR", default_value_os_t = crate::state_dir::clap_default().into())]
    pub data_dir: PathBuf,
    #[command(flatten)]
    pub trace: crate::trace_file::TraceArgs,
    #[command(flatten)]
    pub html: crate::html_file::HtmlArgs,
}

fn bad_input(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("wb run: {msg}");
    ExitCode::from(EXIT_BAD_INPUT)
}

fn failure(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("wb run: {msg}");
    ExitCode::from(EXIT_FAILURE)
}

/// Directory of each device, from the --dir arguments.
fn device_dirs(scenario: &Scenario, args: &[String]) -> Result<Vec<PathBuf>, String> {
    let mut base = PathBuf::from(DEFAULT_RUN_DIR);
    let mut one: BTreeMap<String, PathBuf> = BTreeMap::new();
    for arg in args {
        match arg.split_once('=') {
            Some((dev, path)) => {
                if !scenario.devices.iter().any(|d| d.name == dev) {
                    let known: Vec<_> = scenario.devices.iter().map(|d| d.name.as_str()).collect();
                    return Err(format!(
                        "--dir {arg}: no device '{dev}' in the scenario (devices: {})",
                        known.join(", ")
                    ));
                }
                one.insert(dev.to_string(), PathBuf::from(path));
            }
            None => base = PathBuf::from(arg),
        }
    }
    Ok(scenario
        .devices
        .iter()
        .map(|d| {
            one.get(&d.name)
                .cloned()
                .unwrap_or_else(|| base.join(&d.name))
        })
        .collect())
}

pub fn run(args: RunArgs) -> ExitCode {
    let mut scenario = match wb_scenario::load(&args.scenario, &wb_sim::device::validate) {
        Ok(s) => s,
        Err(e) => return bad_input(e),
    };
    for spec in &args.sets {
        if let Err(e) = wb_scenario::apply_set(&mut scenario, spec) {
            return bad_input(e);
        }
    }
    if let Some(seed) = args.seed {
        scenario.seed = seed;
    }
    if let Some(job) = scenario
        .jobs
        .iter()
        .find(|j| j.mode == wb_scenario::WriteMode::Direct)
    {
        return bad_input(format!(
            "job '{}': mode \"direct\" is simulated only (wb sim); the library writes through its cache",
            job.name
        ));
    }
    let dirs = match device_dirs(&scenario, &args.dirs) {
        Ok(d) => d,
        Err(e) => return bad_input(e),
    };
    let trace_out = match args.trace.create("wb run") {
        Ok(out) => out,
        Err(code) => return code,
    };
    let html_out = match args.html.create("wb run") {
        Ok(out) => out,
        Err(code) => return code,
    };
    let trace_events = trace_out.as_ref().map(|_| args.trace.events());
    // Calibrations are remembered there; without them nothing is written.
    let calibrate = (!args.no_calibrate).then_some(args.data_dir.as_path());
    if let Some(dir) = calibrate {
        if let Err(e) = crate::state_dir::ensure(dir) {
            return failure(e);
        }
    }
    match execute(&scenario, &dirs, calibrate, trace_events) {
        Ok((report, trace)) => {
            if let (Some(out), Some(trace)) = (trace_out, trace.as_ref()) {
                if let Err(code) = out.write(trace) {
                    return code;
                }
            }
            if let Some(out) = html_out {
                let label = format!("{} (wb run)", report.scenario);
                if let Err(code) = out.write(&report.scenario, &[], &[(label, &report)]) {
                    return code;
                }
            }
            if args.json {
                if let Err(code) = crate::print_json("wb run", &report) {
                    return code;
                }
            } else {
                print!("{}", crate::human::render(&report, true));
            }
            ExitCode::SUCCESS
        }
        Err(e) => failure(e),
    }
}

struct JobFiles {
    files: Vec<File>,
    /// A remover's files, by path (not open: `Cache::unlink` removes them).
    paths: Vec<PathBuf>,
    /// How the job's writes go through the cache (`mode`).
    write_flags: writeback::WriteFlags,
}

fn block_size(kind: &JobKind) -> u64 {
    match *kind {
        JobKind::Writer { block_size, .. }
        | JobKind::Reader { block_size, .. }
        | JobKind::OccasionalWriter { block_size, .. }
        | JobKind::FsyncLoop { block_size, .. }
        | JobKind::Dbench { block_size, .. } => block_size,
        // A remover reads and writes nothing.
        JobKind::Remover { .. } => 4096,
    }
}

/// A cold file of `size` bytes for a reader: written once with O_DIRECT
/// (never through the kernel's page cache), reused when it is already
/// there; made durable if `sync` (else the caller syncs).
fn prepare_cold_file(path: &Path, size: u64, sync: bool) -> std::io::Result<()> {
    if std::fs::metadata(path)
        .map(|m| m.len() == size)
        .unwrap_or(false)
    {
        return Ok(());
    }
    let file = writeback::io::open_direct(path, true)?;
    file.set_len(0)?;
    let chunk = 1 << 20;
    let mut buf = writeback::io::AlignedBuf::new(chunk);
    let mut rng = Rng::new(size);
    for b in buf.as_mut_slice().iter_mut() {
        *b = rng.next_u64() as u8;
    }
    use std::os::unix::fs::FileExt;
    let mut off = 0;
    while off < size {
        // Whole pages (O_DIRECT), no more than the file needs.
        let n = ((size - off).div_ceil(4096) * 4096).min(chunk as u64) as usize;
        file.write_all_at(&buf.as_slice()[..n], off)?;
        off += n as u64;
    }
    file.set_len(size)?;
    if sync {
        file.sync_all()?;
    }
    Ok(())
}

/// A remover's tree, written and made durable before the run: its files
/// (`workload_files`: sizes) in `dir`, named after the job.
fn prepare_tree(dir: &Path, job: &str, sizes: &[u64]) -> Result<Vec<PathBuf>, String> {
    let bytes: u64 = sizes.iter().sum();
    eprintln!(
        "wb run: job '{job}': writing {} files ({bytes} bytes) to remove",
        sizes.len()
    );
    let mut paths = Vec::with_capacity(sizes.len());
    for (i, &size) in sizes.iter().enumerate() {
        let path = dir.join(format!("{job}-{i}"));
        prepare_cold_file(&path, size, false).map_err(|e| format!("{}: {e}", path.display()))?;
        paths.push(path);
    }
    let d = std::fs::File::open(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    nix::unistd::syncfs(std::os::fd::AsFd::as_fd(&d))
        .map_err(|e| format!("syncfs {}: {e}", dir.display()))?;
    Ok(paths)
}

fn open_job_files(
    cache: &Cache,
    scenario: &Scenario,
    dirs: &[PathBuf],
    job: usize,
) -> Result<JobFiles, String> {
    let spec = &scenario.jobs[job];
    let dir = &dirs[spec.device];
    let workload = wb_sim::workload::for_job(&spec.kind, Rng::new(0));
    if matches!(spec.kind, JobKind::Remover { .. }) {
        let sizes: Vec<u64> = workload.files().into_iter().map(|(size, _)| size).collect();
        return Ok(JobFiles {
            files: Vec::new(),
            paths: prepare_tree(dir, &spec.name, &sizes)?,
            write_flags: wb_sim::job::write_flags(spec.mode),
        });
    }
    let mut files = Vec::new();
    for (i, (size, _extent)) in workload.files().into_iter().enumerate() {
        let path = dir.join(format!("{}-{i}", spec.name));
        if size > 0 {
            eprintln!(
                "wb run: preparing cold file {} ({} bytes)",
                path.display(),
                size
            );
            prepare_cold_file(&path, size, true).map_err(|e| format!("{}: {e}", path.display()))?;
        } else {
            std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        files.push(
            cache
                .open(&path, OpenOptions::default())
                .map_err(|e| e.to_string())?,
        );
    }
    Ok(JobFiles {
        files,
        paths: Vec::new(),
        write_flags: wb_sim::job::write_flags(spec.mode),
    })
}

/// Time since the start of the run, as the engine and the workloads see it.
fn since(run_start: StdInstant) -> wb_engine::Instant {
    wb_engine::Instant(run_start.elapsed().as_nanos() as u64)
}

/// When the run started, and when its duration ends it (as `wb sim` does).
#[derive(Clone, Copy)]
struct RunClock {
    start: StdInstant,
    duration_ns: u64,
}

/// Runs one job's operations on its own thread until it finishes, or the
/// scenario's duration ends the run (then the job is reported cut off).
fn job_thread(
    cache: &Cache,
    files: &JobFiles,
    mut workload: Box<dyn Workload + Send>,
    block: u64,
    mut job: JobRun,
    clock: RunClock,
    foreground_left: &AtomicUsize,
) -> JobRun {
    let run_start = clock.start;
    let start = run_start + Duration::from_nanos(job.start_at().as_ns());
    std::thread::sleep(start.saturating_duration_since(StdInstant::now()));
    job.start(since(run_start));
    let mut buf = vec![0u8; block as usize];
    let mut rng = Rng::new(job.start_at().as_ns() ^ block);
    for b in buf.iter_mut() {
        *b = rng.next_u64() as u8;
    }
    loop {
        let now = since(run_start);
        if now.as_ns() >= clock.duration_ns {
            // Unfinished: `wb sim` stops its jobs here too.
            return job;
        }
        if job.should_stop(now, foreground_left.load(Ordering::Acquire)) {
            break;
        }
        match workload.next(now) {
            Next::Finished => break,
            Next::Until(t) => {
                let wait = Duration::from_nanos(t.since_ns(now)).min(IDLE_POLL);
                std::thread::sleep(wait);
            }
            Next::Op(op) => {
                job.begin_op(op, since(run_start));
                let result = match op {
                    Op::Write { file, offset, len } => files.files[file].write_at_with(
                        &buf[..len as usize],
                        offset,
                        files.write_flags,
                    ),
                    Op::Read { file, offset, len } => files.files[file]
                        .read_at(&mut buf[..len as usize], offset)
                        .map(|_| ()),
                    Op::Fsync { file } => files.files[file].sync_data(),
                    Op::Sync => cache.sync(),
                    // The name goes now; the blocks through the backlog.
                    Op::Unlink { file, .. } => cache.unlink(&files.paths[file]),
                };
                job.end_op(since(run_start), result.is_ok());
            }
        }
    }
    if job.finish(since(run_start)) {
        foreground_left.fetch_sub(1, Ordering::AcqRel);
    }
    job
}

/// Samples the cache for the report's plots until `jobs_done`, on the
/// timeline's grid (it coarsens as the run goes on: a long run costs no
/// more samples than a short one).
fn sample_engine(cache: &Cache, run_start: StdInstant, jobs_done: &AtomicBool) -> EngineTimeline {
    let mut timeline = EngineTimeline::default();
    while !jobs_done.load(Ordering::Acquire) {
        let now_ns = since(run_start).as_ns();
        if timeline.due(now_ns) {
            timeline.record(now_ns, |g| *g = cache.gauges());
            continue;
        }
        let wait = Duration::from_nanos(timeline.next_ns() - now_ns).min(IDLE_POLL);
        std::thread::sleep(wait);
    }
    timeline
}

/// Runs the scenario for real; the report, and the trace when
/// `trace_events` asked for one.
fn execute(
    scenario: &Scenario,
    dirs: &[PathBuf],
    calibrate: Option<&Path>,
    trace_events: Option<usize>,
) -> Result<(RunReport, Option<writeback::Trace>), String> {
    let wall = StdInstant::now();
    prepare_dirs(dirs)?;
    let mut builder = Cache::builder()
        .config(scenario.cache.clone())
        .calibrate(calibrate.is_some());
    if let Some(dir) = calibrate {
        builder = builder.data_dir(dir);
    }
    let cache = builder.build().map_err(|e| e.to_string())?;
    let names = add_devices(&cache, scenario, dirs)?;
    let files: Vec<JobFiles> = (0..scenario.jobs.len())
        .map(|j| open_job_files(&cache, scenario, dirs, j))
        .collect::<Result<_, _>>()?;
    let foreground_left = AtomicUsize::new(job::foreground_jobs(scenario));
    if let Some(events) = trace_events {
        cache.start_trace(events);
    }
    let run_start = StdInstant::now();
    let (results, timeline) = run_jobs(&cache, scenario, &files, run_start, &foreground_left)?;
    let trace = cache.stop_trace();
    let end = since(run_start);
    let sim_time_s = run_start.elapsed().as_secs_f64();
    drop(files);
    let stats = cache.stats();
    let gauges = cache.gauges();
    let facts = device_facts(&stats, &names);
    let jobs = results.iter().map(|r| r.report(end)).collect();
    let engine = EngineReport::new(&stats, &facts);
    let io_backend = Some(cache.io_backend().to_string());
    drop(cache);
    let report = RunReport {
        scenario: scenario.name.clone(),
        seed: scenario.seed,
        sim_time_s,
        wall_time_s: wall.elapsed().as_secs_f64(),
        jobs,
        engine,
        io_backend,
        timeline: timeline.finish(end.as_ns(), &gauges),
    };
    Ok((report, trace))
}

/// Makes the devices' directories; each must be on a filesystem that
/// supports O_DIRECT.
fn prepare_dirs(dirs: &[PathBuf]) -> Result<(), String> {
    for dir in dirs {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if !writeback::io::supports_direct(dir) {
            return Err(format!(
                "{}: the filesystem does not support O_DIRECT; pick another --dir",
                dir.display()
            ));
        }
    }
    Ok(())
}

/// Adds the scenario's devices to the cache, each at its directory; what
/// the report calls each device (`dir PATH`), by name.
fn add_devices(
    cache: &Cache,
    scenario: &Scenario,
    dirs: &[PathBuf],
) -> Result<BTreeMap<String, String>, String> {
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    for (spec, dir) in scenario.devices.iter().zip(dirs) {
        let added = cache
            .add_device(dir, &spec.name, spec.config.clone())
            .map_err(|e| e.to_string())?;
        if !added {
            eprintln!("wb run: device '{}' is on a filesystem already in use; it shares that device's knobs", spec.name);
        }
        names.insert(spec.name.clone(), format!("dir {}", dir.display()));
    }
    Ok(names)
}

/// Runs every job on its own thread, with the sampler of the report's
/// plots beside them, until all are done; what each job did, and the
/// cache over time.
fn run_jobs(
    cache: &Cache,
    scenario: &Scenario,
    files: &[JobFiles],
    run_start: StdInstant,
    foreground_left: &AtomicUsize,
) -> Result<(Vec<JobRun>, EngineTimeline), String> {
    let seed_rng = Rng::new(scenario.seed);
    let jobs_done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let sampler = s.spawn(|| sample_engine(cache, run_start, &jobs_done));
        let handles: Vec<_> = scenario
            .jobs
            .iter()
            .enumerate()
            .map(|(j, spec)| {
                let workload =
                    wb_sim::workload::for_job(&spec.kind, seed_rng.fork(1000 + j as u64));
                let block = block_size(&spec.kind);
                let job = JobRun::for_job(scenario, j);
                let (files, left) = (&files[j], foreground_left);
                let clock = RunClock {
                    start: run_start,
                    duration_ns: scenario.duration_ns,
                };
                // Named after the job: its track in a trace.
                std::thread::Builder::new()
                    .name(spec.name.clone())
                    .spawn_scoped(s, move || {
                        job_thread(cache, files, workload, block, job, clock, left)
                    })
            })
            .collect();
        let results = handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h.join().map_err(|_| "a job thread panicked".to_string()),
                Err(e) => Err(format!("cannot start a job thread: {e}")),
            })
            .collect::<Result<Vec<JobRun>, String>>();
        jobs_done.store(true, Ordering::Release);
        let timeline = sampler
            .join()
            .map_err(|_| "the sampling thread panicked".to_string());
        Ok::<_, String>((results?, timeline?))
    })
}

/// What the report says of each device the cache has: the directory it
/// was given (`names`), or just "dir"; its utilization is not known.
fn device_facts(stats: &writeback::Stats, names: &BTreeMap<String, String>) -> Vec<DeviceFacts> {
    stats
        .devices
        .iter()
        .map(|d| DeviceFacts {
            model: names
                .get(&d.name)
                .cloned()
                .unwrap_or_else(|| "dir".to_string()),
            utilization: None,
        })
        .collect()
}
