//! `wb mount BACKING_DIR MOUNTPOINT`: serves a directory through the
//! engine with FUSE (the `wb-fuse` crate), in the foreground, until a
//! signal or `umount`; then writes all dirty data back and exits 0.

use crate::bench::human_bytes;
use crate::{EXIT_BAD_INPUT, EXIT_FAILURE};
use clap::Args;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use wb_engine::{Config, DeviceConfig};
use wb_fuse::{Event, Lifecycle, WbFs};
use writeback::Cache;

#[derive(Args)]
#[command(after_help = "\
Runs in the foreground. Prints `wb: serving BACKING_DIR at MOUNTPOINT (...)` once the mount is
ready. SIGINT, SIGTERM, SIGHUP or `umount MOUNTPOINT` end it: data changes are refused from then
on, the mount is detached, all dirty data is written back to BACKING_DIR (progress on stderr),
and wb exits 0. Needs root and /dev/fuse (no libfuse or fusermount needed).

File data goes through the engine and the kernel's page cache is bypassed, so there is one cache
(mapped files excepted: a mapping uses the kernel's page cache, kept coherent with reads and
writes by the kernel); metadata (names, modes, owners, times, links) comes from BACKING_DIR. The server
never follows a symlink itself and nothing outside BACKING_DIR is reachable.

Knobs and statistics, sysfs style (the directory is not listed in the root, but is there):
  cat MOUNTPOINT/.writeback/stats                 # dirty, writeback, pauses by reason, per device
  cat MOUNTPOINT/.writeback/dirty_ratio           # a cache-wide knob
  echo 0 > MOUNTPOINT/.writeback/DEVICE/wbt_lat_usec   # a device knob; invalid values: EINVAL

With --trace FILE the mount records a trace for Perfetto from the start (each caller's stalls
by reason, reads and writes in flight, dirty pages): `echo 0 > MOUNTPOINT/.writeback/trace`
stops it and writes FILE, `echo 1` starts a new one; one under way is written at unmount.

If wb dies (SIGKILL, an OOM kill), what it loses is data still dirty in its cache, at most
dirty_expire_centisecs old (`grep dirty .writeback/stats`: dirty_bytes, dirty_oldest_age_ms);
every file in BACKING_DIR is left in a state it passed through (never longer, no zero tail),
fsync'd data is kept, and a rename over a name keeps the old or the new file whole.

Uncached writes: programs opening with O_DIRECT, or files with the extended attribute
user.writeback.dontcache=1, write DONTCACHE: their pages leave the cache once written back.

The cache's memory (its budget) fits where wb runs: 85% of the tightest memory limit of its
cgroup and the cgroups above it (v2 memory.max / memory.high, v1 memory.limit_in_bytes; at least
256 MiB of the limit left for the process and the reserve), at most half of the machine's available
memory (MemAvailable), unless --set memory=SIZE says otherwise; the start line names the budget
and where it came from. The budget is reserved, not used, until pages are cached.

It follows memory pressure (unless --fixed-memory): ten times a second (a hundred near the limit)
wb looks at MemAvailable, its cgroups' limits (followed when they change) and use, and PSI memory
stalls, and keeps a reserve (10% of the limit, at least 128 MiB) available to others; when another
process needs memory, the cache gives it back at once (clean pages first, oldest first; dirty
ones once written back), never below --set memory_min=SIZE (64 MiB), and takes it again
gradually once the pressure is gone, never above the start budget. Writing
MOUNTPOINT/.writeback/memory sets the budget now and the ceiling it grows back to (it can be
lowered, and raised back up to the start budget); .writeback/stats has memory_* lines (the budget
now, why, shrinks and grows, bytes given back).

Examples:
  wb mount /srv/data /mnt/wb
  wb mount /srv/data /mnt/wb --set memory=4GiB --set dirty_ratio=10 --set wbt_lat_usec=2000")]
pub struct MountArgs {
    /// Directory to serve (its filesystem must support O_DIRECT).
    pub backing_dir: PathBuf,
    /// Empty directory to mount on (not inside BACKING_DIR).
    pub mountpoint: PathBuf,
    /// Set a knob: a cache-wide one (memory, memory_min, dirty_ratio, dirty_background_ratio, dirty_bytes,
    /// dirty_background_bytes, dirty_expire_centisecs, dirty_writeback_centisecs,
    /// dirty_throttle) or a device one for every device (wbt_lat_usec, stable_writes,
    /// min_ratio, max_ratio, strict_limit, queue_depth, nr_requests, read_ahead_kb,
    /// max_sectors_kb, serial, wbt_pace, wbt_slice_ms, wbt_slice_quiet_ms). Repeatable.
    #[arg(long = "set", value_name = "KNOB=VALUE")]
    pub sets: Vec<String>,
    /// Let users other than root use the mount (FUSE's allow_other).
    #[arg(long)]
    pub allow_other: bool,
    /// Other programs change BACKING_DIR directly too: the kernel then
    /// keeps names and attributes for 1 s and reads listings again at each
    /// open. Default: only this mount changes it, and the kernel keeps
    /// them (and names known not to exist) for 60 s, dropping what a change
    /// through the mount makes stale.
    #[arg(long)]
    pub shared_backing: bool,
    /// Where device calibrations are remembered.
    #[arg(long, value_name = "DIR", default_value = "wb-data")]
    pub data_dir: PathBuf,
    /// Do not measure the device; assume 1 ms idle reads for the automatic wbt target.
    #[arg(long)]
    pub no_calibrate: bool,
    /// I/O backend for the backing files: io_uring or threads (default: io_uring if it works).
    #[arg(long, value_name = "NAME")]
    pub io_backend: Option<String>,
    #[command(flatten)]
    pub trace: crate::trace_file::TraceArgs,
    /// Keep the cache budget fixed: do not follow memory pressure (the
    /// budget then changes only when .writeback/memory is written).
    #[arg(long)]
    pub fixed_memory: bool,
    /// For tests: route I/O through the fault seam; setting the extended
    /// attribute user.writeback.fail_writes to "COUNT [eio|enospc]" on a
    /// file fails its next COUNT write-backs (the attribute is not stored).
    #[arg(long, hide = true)]
    pub fault_seam: bool,
}

fn bad_input(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("wb mount: {msg}");
    ExitCode::from(EXIT_BAD_INPUT)
}

fn failure(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("wb mount: {msg}");
    ExitCode::from(EXIT_FAILURE)
}

/// The cache-wide and device knobs from `--set`, validated.
fn knobs(sets: &[String]) -> Result<(Config, DeviceConfig), String> {
    let mut config = Config::default();
    let mut device = DeviceConfig::default();
    for spec in sets {
        let Some((knob, value)) = spec.split_once('=') else {
            return Err(format!("--set {spec}: expected KNOB=VALUE"));
        };
        let knob = knob.trim();
        let result = if Config::KNOBS.contains(&knob) {
            config.set(knob, value)
        } else if DeviceConfig::KNOBS.contains(&knob) {
            device.set(knob, value)
        } else {
            return Err(format!(
                "--set {spec}: unknown knob '{knob}'; cache knobs: {}; device knobs: {}",
                Config::KNOBS.join(", "),
                DeviceConfig::KNOBS.join(", ")
            ));
        };
        result.map_err(|e| format!("--set {spec}: {e}"))?;
    }
    Ok((config, device))
}

/// The engine's name for the backing directory's device: the block
/// device's name (`vda`) where the kernel has one.
fn device_name(backing: &Path) -> Result<String, String> {
    let st_dev =
        writeback::io::device_id(backing).map_err(|e| format!("{}: {e}", backing.display()))?;
    let link = format!(
        "/sys/dev/block/{}:{}",
        libc::major(st_dev),
        libc::minor(st_dev)
    );
    Ok(std::fs::read_link(link)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| format!("dev-{st_dev:x}")))
}

/// The cache (with the fault seam's rules if asked for), the name of
/// BACKING_DIR's device, and where the budget came from.
type Built = (Arc<Cache>, String, Option<writeback::io::Faults>, String);

/// The default cache budget, from where the process runs
/// (`wb_engine::start_budget`: the tightest cgroup limit's share, at most
/// half of MemAvailable), and where it came from; the engine's own
/// default when /proc/meminfo cannot be read.
fn default_memory() -> (u64, String) {
    match writeback::sample_memory() {
        Ok(sample) => {
            let start = wb_engine::start_budget(&sample);
            (start.bytes, start.source.to_string())
        }
        Err(e) => (
            Config::default().memory_bytes,
            format!("the default: reading the memory available failed: {e}"),
        ),
    }
}

fn build_cache(args: &MountArgs, backing: &Path) -> Result<Built, String> {
    let (mut config, device) = knobs(&args.sets)?;
    let memory_set = args
        .sets
        .iter()
        .any(|s| s.trim_start().starts_with("memory="));
    let source = if memory_set {
        "--set memory".to_string()
    } else {
        let (bytes, source) = default_memory();
        config.memory_bytes = bytes;
        source
    };
    // Sized by the open-file limit: raised first.
    let nofile = wb_fuse::raise_fd_limit();
    let mut builder = Cache::builder()
        .max_files((nofile * wb_fuse::BACKING_FILES_PERCENT / 100) as usize)
        .config(config)
        .data_dir(&args.data_dir)
        .calibrate(!args.no_calibrate)
        .follow_memory_pressure(!args.fixed_memory);
    for knob in DeviceConfig::KNOBS {
        if let Some(value) = device.get(knob) {
            builder = builder
                .device_knob(knob, &value)
                .map_err(|e| e.to_string())?;
        }
    }
    if let Some(name) = &args.io_backend {
        builder = builder.io_backend(name);
    }
    let faults = args.fault_seam.then(writeback::io::Faults::new);
    if let Some(faults) = &faults {
        builder = builder.faults(faults.clone());
    }
    let cache = builder.build().map_err(|e| e.to_string())?;
    let name = device_name(backing)?;
    cache
        .add_device(backing, &name, device)
        .map_err(|e| format!("setting up the device of {}: {e}", backing.display()))?;
    Ok((Arc::new(cache), name, faults, source))
}

fn preflight(backing: &Path) -> Result<(), String> {
    if !nix::unistd::geteuid().is_root() {
        return Err("must run as root (it mounts through /dev/fuse itself)".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Err("/dev/fuse is missing (load the fuse module: modprobe fuse)".into());
    }
    if !writeback::io::supports_direct(backing) {
        return Err(format!(
            "the filesystem of {} does not support O_DIRECT (tmpfs?); the engine needs it",
            backing.display()
        ));
    }
    Ok(())
}

pub fn run(args: MountArgs) -> ExitCode {
    // Before any thread exists, so that every thread inherits the mask.
    let lifecycle = match Lifecycle::start() {
        Ok(l) => l,
        Err(e) => return failure(format!("taking over signals: {e}")),
    };
    let (backing, mountpoint) = match wb_fuse::check_paths(&args.backing_dir, &args.mountpoint) {
        Ok(paths) => paths,
        Err(e) => return bad_input(e),
    };
    if let Err(e) = knobs(&args.sets) {
        return bad_input(e);
    }
    if let Err(e) = preflight(&backing) {
        return failure(e);
    }
    let (cache, device, faults, memory_source) = match build_cache(&args, &backing) {
        Ok(c) => c,
        Err(e) => return failure(e),
    };
    if let Some(signal) = lifecycle.pending_signal() {
        return failure(format!("{signal} during setup; not mounting"));
    }
    // The trace file is made before mounting: a bad path fails at once.
    let trace = match args.trace.create("wb mount") {
        Ok(file) => file.map(|_| wb_fuse::TraceTarget {
            path: args.trace.trace.clone().unwrap_or_default(),
            events: args.trace.events(),
        }),
        Err(code) => return code,
    };
    if let Some(target) = &trace {
        cache.start_trace(target.events);
    }
    let fs = match WbFs::new(Arc::clone(&cache), &backing) {
        Ok(fs) => fs
            .with_fault_seam(faults)
            .with_backing(if args.shared_backing {
                wb_fuse::Backing::Shared
            } else {
                wb_fuse::Backing::Exclusive
            })
            .with_trace(trace.clone()),
        Err(e) => return failure(format!("{}: {e}", backing.display())),
    };
    let memory = MemoryLine {
        source: memory_source,
        fixed: args.fixed_memory,
    };
    let code = serve(
        &lifecycle,
        fs,
        Arc::clone(&cache),
        (&backing, &mountpoint),
        &device,
        &memory,
        args.allow_other,
    );
    // A trace still under way covers the shutdown too.
    if let (Some(target), Some(recorded)) = (&trace, cache.stop_trace()) {
        match wb_fuse::write_trace(&recorded, &target.path) {
            Ok(()) => eprintln!("wb: trace written to {}", target.path.display()),
            Err(e) => eprintln!(
                "wb: writing the trace to {} failed: {e}",
                target.path.display()
            ),
        }
    }
    code
}

/// What the start line says of the budget: where it came from, and
/// whether it is fixed.
struct MemoryLine {
    source: String,
    fixed: bool,
}

fn serve(
    lifecycle: &Lifecycle,
    fs: WbFs,
    cache: Arc<Cache>,
    (backing, mountpoint): (&Path, &Path),
    device: &str,
    memory_line: &MemoryLine,
    allow_other: bool,
) -> ExitCode {
    // Files an earlier mount was removing when it died: released in the
    // background while this one serves.
    fs.remove_leftover_orphans();
    let mounted = match lifecycle.mount(fs, mountpoint, allow_other) {
        Ok(m) => m,
        Err(e) => return failure(format!("mounting at {}: {e}", mountpoint.display())),
    };
    let memory = cache
        .knob("memory")
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    let stable = cache
        .stats()
        .devices
        .iter()
        .find(|d| d.name == device)
        .map_or_else(String::new, |d| d.stable_writes.clone());
    let follows = match memory_line.fixed {
        true => "fixed",
        false => "follows memory pressure",
    };
    println!(
        "wb: serving {} at {} (engine: {}, memory {}: {}, {follows}, device {device}, \
         stable_writes {stable})",
        backing.display(),
        mountpoint.display(),
        cache.io_backend(),
        wb_engine::units::format_bytes(memory),
        memory_line.source,
    );
    let _ = std::io::stdout().flush();
    let why = match lifecycle.wait() {
        Event::Signal(s) => format!("{s}"),
        Event::Unmounted(Ok(())) => "unmounted".to_string(),
        Event::Unmounted(Err(e)) => format!("serving failed: {e}"),
    };
    eprintln!(
        "wb: {why}; writing back all dirty data to {}",
        backing.display()
    );
    let result = lifecycle.shutdown(&mounted, &cache, |dirty, writeback| {
        eprintln!(
            "wb: writing back: {} dirty, {} under writeback",
            human_bytes(dirty),
            human_bytes(writeback)
        );
    });
    match result {
        Ok(()) => {
            // Every release is done (sync waits for the backlogs): the
            // orphan directory is empty, and BACKING_DIR as it was.
            wb_fuse::remove_orphan_dir(backing);
            eprintln!("wb: all data written back; exiting");
            ExitCode::SUCCESS
        }
        Err(e) => failure(format!("writing back failed: {e}")),
    }
}
