//! `wb mount BACKING_DIR MOUNTPOINT`: serves a directory through the
//! engine with FUSE (the `wb-fuse` crate), in the foreground, until a
//! signal or `umount`; then writes all dirty data back and exits 0.
//! Mounting, serving and the write-back are `wb_fuse::mount` and its
//! session; here are the arguments, the signals, the messages and the
//! exit codes.

use crate::notify::Notifier;
use crate::{EXIT_BAD_INPUT, EXIT_FAILURE};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use wb_engine::units::format_bytes;
use wb_fuse::{Event, Lifecycle, MountError, MountOptions, TraceWritten};

#[derive(Args)]
#[command(after_help = "\
Runs in the foreground. Prints `wb: serving BACKING_DIR at MOUNTPOINT (...)` once the mount is
ready. SIGINT, SIGTERM, SIGHUP or `umount MOUNTPOINT` end it: data changes are refused from then
on, the mount is detached, all dirty data is written back to BACKING_DIR (progress on stderr),
and wb exits 0. Needs root and /dev/fuse (no libfuse or fusermount needed).

How long the end takes: writers are throttled to keep what is dirty under the dirty limit
(dirty_threshold_bytes in .writeback/stats: dirty_bytes, or dirty_ratio, 20%, of the memory
budget; passed only briefly, the memory budget never), so writing back takes about that at the
device's write speed (20% of 4 GiB at 100 MiB/s: about 8 s), plus up to 10 s for the serving
threads to end. Progress every 0.5 s: bytes left of those at the start, the rate and the time
left. Give a service manager longer than that (systemd: TimeoutStopSec).

As a service: with NOTIFY_SOCKET set (systemd's Type=notify), wb sends READY=1 once serving,
STOPPING=1 when the end begins and STATUS= lines with the write-back's progress; an unusable
NOTIFY_SOCKET is said once on stderr and ignored. Installed as /sbin/mount.fuse.wb (a symlink to
wb; scripts/install.sh), `mount -t fuse.wb BACKING_DIR MOUNTPOINT -o memory=4GiB,...` and
/etc/fstab lines work: see docs/service.md.

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
    /// State directory: where device calibrations are remembered (made if
    /// missing). Default: $STATE_DIRECTORY (its first path), else /var/lib/wb
    /// as root, else $XDG_STATE_HOME/wb, else $HOME/.local/state/wb.
    #[arg(long, value_name = "DIR", default_value_os_t = crate::state_dir::clap_default().into())]
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
    /// A flag the kernel applies to the mount: nosuid (set-user-id bits not
    /// honoured), nodev (device files not opened), noexec (no programs run
    /// from it) or noatime. Repeatable; mount(8) passes an fstab line's.
    #[arg(long = "flag", value_name = "nosuid|nodev|noexec|noatime", value_parser = parse_flag)]
    pub flags: Vec<wb_fuse::MountFlag>,
}

fn parse_flag(text: &str) -> Result<wb_fuse::MountFlag, String> {
    wb_fuse::MountFlag::named(text)
        .ok_or_else(|| format!("{text:?} is not one of nosuid, nodev, noexec, noatime"))
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
        flags: args.flags,
        ..MountOptions::new(args.backing_dir, args.mountpoint)
    }
}

pub fn run(args: MountArgs) -> ExitCode {
    // Before any thread exists, so that every thread inherits the mask.
    let lifecycle = match Lifecycle::start() {
        Ok(l) => l,
        Err(e) => return failure(format!("taking over signals: {e}")),
    };
    let notifier = Notifier::from_env(WHO);
    if let Err(e) = crate::state_dir::ensure(&args.data_dir) {
        return failure(e);
    }
    let session = match wb_fuse::mount(options(args, lifecycle)) {
        Ok(session) => session,
        Err(e) => return mount_failed(e),
    };
    // Files this process makes from now on (a trace written at the end)
    // get exactly the modes asked for, as the files it serves do.
    nix::sys::stat::umask(nix::sys::stat::Mode::empty());
    println!("wb: {}", session.description());
    let _ = std::io::stdout().flush();
    notifier.ready(WHO, session.description());
    let why = match session.wait() {
        Event::Signal(s) => format!("{s}"),
        Event::Unmounted(Ok(())) => "unmounted".to_string(),
        Event::Unmounted(Err(e)) => format!("serving failed: {e}"),
    };
    let mut progress = Progress::start(&session.cache().stats());
    let start = format!(
        "{why}; writing back {} to {}",
        progress.start_text(),
        session.backing_dir().display()
    );
    eprintln!("wb: {start}");
    notifier.stopping(WHO, &start);
    let ended = session.unmount_with(|dirty, writeback| {
        let line = progress.line(dirty + writeback, Instant::now());
        eprintln!("wb: {line}");
        notifier.status(WHO, &line);
    });
    let code = match ended.written_back {
        Ok(()) => {
            eprintln!("wb: all data written back; exiting");
            notifier.status(WHO, "all data written back; exiting");
            ExitCode::SUCCESS
        }
        Err(e) => {
            notifier.status(WHO, &format!("writing back failed: {e}"));
            failure(e)
        }
    };
    report_trace(ended.trace);
    code
}

/// Who says what `wb mount` says.
const WHO: &str = "wb mount";

/// The write-back at the end, as progress lines: bytes left of those at
/// the start, the rate since the start and the time left at that rate.
struct Progress {
    /// Dirty and under writeback when the end began.
    start_bytes: u64,
    /// The dirty limit then (the bound on what is dirty).
    limit_bytes: u64,
    /// The device's estimated write bandwidth then (0: not measured yet).
    bandwidth_bytes_s: u64,
    started: Instant,
}

impl Progress {
    fn start(stats: &wb_engine::Stats) -> Progress {
        let page = wb_engine::PAGE_SIZE;
        Progress {
            start_bytes: (stats.dirty_pages + stats.writeback_pages) * page,
            limit_bytes: stats.thresh_pages * page,
            bandwidth_bytes_s: stats
                .devices
                .iter()
                .map(|d| d.write_bw_pages_s)
                .sum::<u64>()
                * page,
            started: Instant::now(),
        }
    }

    /// "123 MiB (dirty limit 800 MiB; about 2 s at 60 MiB/s)".
    fn start_text(&self) -> String {
        let mut text = format!(
            "{} (dirty limit {}",
            format_bytes(self.start_bytes),
            format_bytes(self.limit_bytes)
        );
        if self.bandwidth_bytes_s > 0 && self.start_bytes > 0 {
            let secs = self.start_bytes.div_ceil(self.bandwidth_bytes_s);
            text.push_str(&format!(
                "; about {secs} s at {}/s",
                format_bytes(self.bandwidth_bytes_s)
            ));
        }
        text.push(')');
        text
    }

    /// "writing back: 123 MiB left of 456 MiB (40 MiB/s, about 3 s left)".
    fn line(&mut self, left_bytes: u64, now: Instant) -> String {
        // Writes under way when the end began may add a little.
        self.start_bytes = self.start_bytes.max(left_bytes);
        let done = self.start_bytes - left_bytes;
        let elapsed = now.saturating_duration_since(self.started).as_secs_f64();
        let mut text = format!(
            "writing back: {} left of {}",
            format_bytes(left_bytes),
            format_bytes(self.start_bytes)
        );
        if done > 0 && elapsed > 0.0 {
            let rate = done as f64 / elapsed;
            text.push_str(&format!(
                " ({}/s, about {:.0} s left)",
                format_bytes(rate as u64),
                (left_bytes as f64 / rate).ceil()
            ));
        }
        text
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const MIB: u64 = 1 << 20;

    fn progress(start_bytes: u64, bandwidth_bytes_s: u64) -> Progress {
        Progress {
            start_bytes,
            limit_bytes: 800 * MIB,
            bandwidth_bytes_s,
            started: Instant::now(),
        }
    }

    #[test]
    fn the_start_says_how_much_the_bound_and_the_estimate() {
        assert_eq!(
            progress(456 * MIB, 100 * MIB).start_text(),
            "456.0MiB (dirty limit 800.0MiB; about 5 s at 100.0MiB/s)"
        );
        // No estimate before the device's speed is known.
        assert_eq!(
            progress(456 * MIB, 0).start_text(),
            "456.0MiB (dirty limit 800.0MiB)"
        );
    }

    #[test]
    fn progress_lines_give_what_is_left_the_rate_and_the_time_left() {
        let mut p = progress(456 * MIB, 0);
        let at = |secs| p.started + Duration::from_secs(secs);
        let (one, two) = (at(1), at(2));
        assert_eq!(
            p.line(456 * MIB, one),
            "writing back: 456.0MiB left of 456.0MiB"
        );
        assert_eq!(
            p.line(256 * MIB, two),
            "writing back: 256.0MiB left of 456.0MiB (100.0MiB/s, about 3 s left)"
        );
        // Writes under way at the start may add to it: the total grows.
        assert_eq!(
            p.line(500 * MIB, two),
            "writing back: 500.0MiB left of 500.0MiB"
        );
    }
}
