//! `wb mount BACKING_DIR MOUNTPOINT`: serves a directory through the
//! engine with FUSE (the `wb-fuse` crate), in the foreground, until a
//! signal or `umount`; then writes all dirty data back and exits 0.
//! Mounting, serving and the write-back are `wb_fuse::mount` and its
//! session; here are the arguments, the signals, the messages and the
//! exit codes.

use crate::{EXIT_BAD_INPUT, EXIT_FAILURE};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use wb_engine::units::format_bytes as human_bytes;
use wb_fuse::{Event, Lifecycle, MountError, MountOptions, TraceWritten};

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
    /// max_sectors_kb, serial, wbt_pace, wbt_slice_ms, wbt_slice_quiet_ms,
    /// extending_writes). Repeatable.
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
    /// Which transport carries the kernel's requests: FUSE over io_uring
    /// (a request served on the CPU that issued it, answered with one
    /// submission; Linux 6.14+ with /sys/module/fuse/parameters/enable_uring
    /// set to Y) or /dev/fuse. auto: io_uring when the kernel has it on;
    /// on: io_uring or fail saying why; off: /dev/fuse.
    #[arg(long, value_name = "auto|on|off", default_value = "auto", value_parser = parse_uring)]
    pub uring: wb_fuse::Uring,
}

fn parse_uring(text: &str) -> Result<wb_fuse::Uring, String> {
    match text {
        "auto" => Ok(wb_fuse::Uring::Auto),
        "on" => Ok(wb_fuse::Uring::On),
        "off" => Ok(wb_fuse::Uring::Off),
        _ => Err(format!("'{text}' is not auto, on or off")),
    }
}

fn bad_input(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("wb mount: {msg}");
    ExitCode::from(EXIT_BAD_INPUT)
}

fn failure(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("wb mount: {msg}");
    ExitCode::from(EXIT_FAILURE)
}

/// What `wb mount` asks [`wb_fuse::mount`] for.
fn options(args: MountArgs, lifecycle: Lifecycle) -> MountOptions {
    let trace = args.trace.trace.clone().map(|path| wb_fuse::TraceTarget {
        path,
        events: args.trace.events(),
    });
    MountOptions {
        knobs: args.sets,
        allow_other: args.allow_other,
        backing: match args.shared_backing {
            true => wb_fuse::Backing::Shared,
            false => wb_fuse::Backing::Exclusive,
        },
        data_dir: args.data_dir,
        calibrate: !args.no_calibrate,
        io_backend: args.io_backend,
        trace,
        fixed_memory: args.fixed_memory,
        fault_seam: args.fault_seam,
        raise_fd_limit: true,
        signals: Some(lifecycle),
        uring: args.uring,
        ..MountOptions::new(args.backing_dir, args.mountpoint)
    }
}

pub fn run(args: MountArgs) -> ExitCode {
    // Before any thread exists, so that every thread inherits the mask.
    let lifecycle = match Lifecycle::start() {
        Ok(l) => l,
        Err(e) => return failure(format!("taking over signals: {e}")),
    };
    let session = match wb_fuse::mount(options(args, lifecycle)) {
        Ok(session) => session,
        Err(e) => return mount_failed(e),
    };
    // Files this process makes from now on (a trace written at the end)
    // get exactly the modes asked for, as the files it serves do.
    nix::sys::stat::umask(nix::sys::stat::Mode::empty());
    println!("wb: {}", session.description());
    let _ = std::io::stdout().flush();
    let why = match session.wait() {
        Event::Signal(s) => format!("{s}"),
        Event::Unmounted(Ok(())) => "unmounted".to_string(),
        Event::Unmounted(Err(e)) => format!("serving failed: {e}"),
    };
    eprintln!(
        "wb: {why}; writing back all dirty data to {}",
        session.backing_dir().display()
    );
    let ended = session.unmount_with(|dirty, writeback| {
        eprintln!(
            "wb: writing back: {} dirty, {} under writeback",
            human_bytes(dirty),
            human_bytes(writeback)
        );
    });
    let code = match ended.written_back {
        Ok(()) => {
            eprintln!("wb: all data written back; exiting");
            ExitCode::SUCCESS
        }
        Err(e) => failure(e),
    };
    report_trace(ended.trace);
    code
}

/// Says why mounting failed, in `wb mount`'s words; bad input exits 2,
/// the rest 1.
fn mount_failed(e: MountError) -> ExitCode {
    match e {
        MountError::Knob { spec, reason } => bad_input(format!("--set {spec}: {reason}")),
        MountError::Mount {
            mountpoint,
            source,
            trace,
        } => {
            let code = failure(format!("mounting at {}: {source}", mountpoint.display()));
            report_trace(trace);
            code
        }
        e if e.is_bad_input() => bad_input(e),
        e => failure(e),
    }
}

/// Says where the trace went (or why it did not).
fn report_trace(trace: Option<TraceWritten>) {
    if let Some(TraceWritten { path, result }) = trace {
        match result {
            Ok(()) => eprintln!("wb: trace written to {}", path.display()),
            Err(e) => eprintln!("wb: writing the trace to {} failed: {e}", path.display()),
        }
    }
}
