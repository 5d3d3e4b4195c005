//! Mounting as a library call: [`mount`] checks the two directories and
//! the knobs, builds the cache, mounts and serves, and returns a
//! [`MountSession`] (session.rs) that writes everything back and unmounts
//! on [`MountSession::unmount`] or when dropped. `wb mount` is this call
//! plus its arguments, signals, messages and exit codes.
//!
//! The steps, in order (the first failure is the error):
//!
//! 1. the paths ([`check_paths`]) and the knobs are checked;
//! 2. root, /dev/fuse and O_DIRECT on the backing filesystem;
//! 3. the open-file limit is raised (unless told not to) and the cache is
//!    built: the budget from where the process runs unless `memory` is
//!    set, the backing directory's device added (calibrated unless told
//!    not to);
//! 4. a signal that arrived meanwhile stops it (with [`MountOptions::signals`]);
//! 5. the trace file is made (so a bad path fails before mounting) and
//!    the trace started;
//! 6. what an earlier mount left in the orphan directory goes to the
//!    backlog, and the filesystem is mounted and served.

use crate::lifecycle::{check_paths, fd_limit, raise_fd_limit, Lifecycle, BACKING_FILES_PERCENT};
use crate::mount_error::{MountError, TraceWritten};
use crate::session::MountSession;
use crate::{Backing, TraceTarget, WbFs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use wb_engine::{Config, DeviceConfig};
use writeback::Cache;

/// What to mount and how: `wb mount`'s arguments. [`MountOptions::new`]
/// gives `wb mount`'s defaults.
#[derive(Debug)]
pub struct MountOptions {
    /// The directory to serve (its filesystem must support O_DIRECT).
    pub backing_dir: PathBuf,
    /// An empty directory to mount on (not inside `backing_dir`).
    pub mountpoint: PathBuf,
    /// Knob settings, `KNOB=VALUE`: a cache-wide knob or a device knob for
    /// every device (`wb mount --set`).
    pub knobs: Vec<String>,
    /// Let users other than the mounting one use the mount (FUSE's allow_other).
    pub allow_other: bool,
    /// Whether other programs change the backing directory too.
    pub backing: Backing,
    /// Where device calibrations are remembered.
    pub data_dir: PathBuf,
    /// Measure the device (false: assume 1 ms idle reads).
    pub calibrate: bool,
    /// The I/O backend (`io_uring`, `threads`); None: io_uring if it works.
    pub io_backend: Option<String>,
    /// Record a trace from the start, written to its path by
    /// `.writeback/trace` and at the unmount.
    pub trace: Option<TraceTarget>,
    /// Keep the cache budget fixed instead of following memory pressure.
    pub fixed_memory: bool,
    /// Route I/O through the fault seam (`user.writeback.fail_writes`).
    pub fault_seam: bool,
    /// Raise the process's open-file limit first ([`raise_fd_limit`]);
    /// false: size the cache and the inode table by the limit as it is.
    pub raise_fd_limit: bool,
    /// Signals taken over by [`Lifecycle::start`]: one that arrives during
    /// setup stops it, and [`MountSession::wait`] returns one. None: the
    /// session waits only for its end.
    pub signals: Option<Lifecycle>,
    /// Which transport carries the kernel's requests.
    pub uring: Uring,
    /// The kernel's mount flags asked for (`nosuid`, `nodev`, `noexec`,
    /// `noatime`: mount(8)'s, from an fstab line).
    pub flags: Vec<MountFlag>,
}

/// A flag the kernel applies to the mount itself (mount(2)'s MS_NOSUID,
/// MS_NODEV, MS_NOEXEC, MS_NOATIME), as mount(8) and fstab name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MountFlag {
    /// Set-user-id and set-group-id bits are not honoured.
    NoSuid,
    /// Device files are not opened.
    NoDev,
    /// Programs are not executed from the mount.
    NoExec,
    /// Access times are not updated.
    NoAtime,
}

impl MountFlag {
    /// Every flag with its mount(8) name.
    pub const ALL: [(&'static str, MountFlag); 4] = [
        ("nosuid", MountFlag::NoSuid),
        ("nodev", MountFlag::NoDev),
        ("noexec", MountFlag::NoExec),
        ("noatime", MountFlag::NoAtime),
    ];

    /// The flag mount(8) calls `name`.
    pub fn named(name: &str) -> Option<MountFlag> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
    }
}

/// Whether requests come over io_uring (uring/) or /dev/fuse.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Uring {
    /// io_uring when the kernel has it switched on, else /dev/fuse.
    #[default]
    Auto,
    /// io_uring; mounting fails with the reason if the kernel has it off.
    On,
    /// /dev/fuse only.
    Off,
}

impl MountOptions {
    /// `backing_dir` served at `mountpoint` with `wb mount`'s defaults.
    pub fn new(backing_dir: impl Into<PathBuf>, mountpoint: impl Into<PathBuf>) -> MountOptions {
        MountOptions {
            backing_dir: backing_dir.into(),
            mountpoint: mountpoint.into(),
            knobs: Vec::new(),
            allow_other: false,
            backing: Backing::Exclusive,
            data_dir: PathBuf::from("wb-data"),
            calibrate: true,
            io_backend: None,
            trace: None,
            fixed_memory: false,
            fault_seam: false,
            raise_fd_limit: true,
            signals: None,
            uring: Uring::Auto,
            flags: Vec::new(),
        }
    }

    /// Adds the setting `knob=value`.
    pub fn knob(mut self, knob: &str, value: &str) -> MountOptions {
        self.knobs.push(format!("{knob}={value}"));
        self
    }
}

/// Mounts `options.backing_dir` at `options.mountpoint` and serves it
/// until the returned session is unmounted or dropped.
pub fn mount(mut options: MountOptions) -> Result<MountSession, MountError> {
    let lifecycle = options
        .signals
        .take()
        .unwrap_or_else(Lifecycle::without_signals);
    let (backing, mountpoint) =
        check_paths(&options.backing_dir, &options.mountpoint).map_err(MountError::Paths)?;
    knobs(&options.knobs)?;
    preflight(&backing)?;
    let uring = match (options.uring, crate::uring::available()) {
        (Uring::Off, _) | (Uring::Auto, Err(_)) => false,
        (Uring::On | Uring::Auto, Ok(())) => true,
        (Uring::On, Err(why)) => return Err(MountError::NoUring(why)),
    };
    let (nofile, built) = build_cache(&options, &backing)?;
    if let Some(signal) = lifecycle.pending_signal() {
        return Err(MountError::Interrupted(signal));
    }
    // Made before mounting: a bad path fails at once.
    if let Some(target) = &options.trace {
        std::fs::File::create(&target.path).map_err(|source| MountError::TraceFile {
            path: target.path.clone(),
            source,
        })?;
        built.cache.start_trace(target.events);
    }
    let fs = WbFs::new(Arc::clone(&built.cache), &backing)
        .map_err(|source| MountError::Backing {
            backing: backing.clone(),
            source,
        })?
        .with_fault_seam(built.faults.clone())
        .with_backing(options.backing)
        .with_trace(options.trace.clone())
        .with_uring(uring);
    // Files an earlier mount was removing when it died: released in the
    // background while this one serves.
    fs.remove_leftover_orphans();
    let mounted =
        match lifecycle.mount(fs, &mountpoint, options.allow_other, &options.flags, nofile) {
            Ok(m) => m,
            Err(source) => {
                // A trace under way covers the failed mount too.
                let trace = trace_written(&built.cache, &options.trace);
                return Err(MountError::Mount {
                    mountpoint,
                    source,
                    trace,
                });
            }
        };
    let description = describe(&built, (&backing, &mountpoint), options.fixed_memory, uring);
    Ok(MountSession::new(crate::session::Parts {
        lifecycle,
        mounted,
        cache: built.cache,
        backing,
        mountpoint,
        device: built.device,
        description,
        trace: options.trace,
    }))
}

/// What `wb mount` says once serving: "serving B at M (engine: ...,
/// requests over io_uring)".
fn describe(
    built: &Built,
    (backing, mountpoint): (&Path, &Path),
    fixed: bool,
    uring: bool,
) -> String {
    let cache = &built.cache;
    let memory = cache
        .knob("memory")
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    let stable = cache
        .stats()
        .devices
        .iter()
        .find(|d| d.name == built.device)
        .map_or_else(String::new, |d| d.stable_writes.clone());
    let follows = match fixed {
        true => "fixed",
        false => "follows memory pressure",
    };
    let transport = match uring {
        true => "io_uring",
        false => "/dev/fuse",
    };
    format!(
        "serving {} at {} (engine: {}, memory {}: {}, {follows}, device {}, \
         stable_writes {stable}, requests over {transport})",
        backing.display(),
        mountpoint.display(),
        cache.io_backend(),
        wb_engine::units::format_bytes(memory),
        built.memory_source,
        built.device,
    )
}

/// The cache-wide and device knobs of `specs` (`KNOB=VALUE`), validated,
/// over the engine's defaults and the mount's own `backing_files_percent`
/// ([`BACKING_FILES_PERCENT`]).
fn knobs(specs: &[String]) -> Result<(Config, DeviceConfig), MountError> {
    let mut config = Config {
        backing_files_percent: BACKING_FILES_PERCENT,
        ..Config::default()
    };
    let mut device = DeviceConfig::default();
    for spec in specs {
        let bad = |reason: String| MountError::Knob {
            spec: spec.clone(),
            reason,
        };
        let Some((knob, value)) = spec.split_once('=') else {
            return Err(bad("expected KNOB=VALUE".into()));
        };
        let knob = knob.trim();
        let result = if Config::KNOBS.contains(&knob) {
            config.set(knob, value)
        } else if DeviceConfig::KNOBS.contains(&knob) {
            device.set(knob, value)
        } else {
            return Err(bad(format!(
                "unknown knob '{knob}'; cache knobs: {}; device knobs: {}",
                Config::KNOBS.join(", "),
                DeviceConfig::KNOBS.join(", ")
            )));
        };
        result.map_err(|e| bad(e.to_string()))?;
    }
    Ok((config, device))
}

fn preflight(backing: &Path) -> Result<(), MountError> {
    if !nix::unistd::geteuid().is_root() {
        return Err(MountError::NotRoot);
    }
    if !Path::new("/dev/fuse").exists() {
        return Err(MountError::NoFuseDevice);
    }
    if !writeback::io::supports_direct(backing) {
        return Err(MountError::NoDirectIo {
            backing: backing.to_path_buf(),
        });
    }
    Ok(())
}

/// The engine's name for the backing directory's device: the block
/// device's name (`vda`) where the kernel has one.
fn device_name(backing: &Path) -> Result<String, MountError> {
    let st_dev = writeback::io::device_id(backing).map_err(|source| MountError::Device {
        backing: backing.to_path_buf(),
        source,
    })?;
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

/// The cache built for a mount.
struct Built {
    cache: Arc<Cache>,
    /// The engine's name of BACKING_DIR's device.
    device: String,
    /// The fault seam's rules, if asked for.
    faults: Option<writeback::io::Faults>,
    /// Where the budget came from.
    memory_source: String,
}

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

/// The open-file limit the mount is sized by, and its cache.
fn build_cache(options: &MountOptions, backing: &Path) -> Result<(u64, Built), MountError> {
    let (mut config, device) = knobs(&options.knobs)?;
    let memory_set = options
        .knobs
        .iter()
        .any(|s| s.trim_start().starts_with("memory="));
    let memory_source = if memory_set {
        "--set memory".to_string()
    } else {
        let (bytes, source) = default_memory();
        config.memory_bytes = bytes;
        source
    };
    // Sized by the open-file limit: raised first.
    let nofile = match options.raise_fd_limit {
        true => raise_fd_limit(),
        false => fd_limit(),
    };
    let mut builder = Cache::builder()
        .max_files((nofile * config.backing_files_percent as u64 / 100) as usize)
        .config(config)
        .data_dir(&options.data_dir)
        .calibrate(options.calibrate)
        .follow_memory_pressure(!options.fixed_memory);
    for knob in DeviceConfig::KNOBS {
        if let Some(value) = device.get(knob) {
            builder = builder
                .device_knob(knob, &value)
                .map_err(MountError::Cache)?;
        }
    }
    if let Some(name) = &options.io_backend {
        builder = builder.io_backend(name);
    }
    let faults = options.fault_seam.then(writeback::io::Faults::new);
    if let Some(faults) = &faults {
        builder = builder.faults(faults.clone());
    }
    let cache = builder.build().map_err(MountError::Cache)?;
    let name = device_name(backing)?;
    cache
        .add_device(backing, &name, device)
        .map_err(|source| MountError::AddDevice {
            backing: backing.to_path_buf(),
            source,
        })?;
    let built = Built {
        cache: Arc::new(cache),
        device: name,
        faults,
        memory_source,
    };
    Ok((nofile, built))
}

/// The trace under way, if one is, written to `target`'s path.
pub(crate) fn trace_written(cache: &Cache, target: &Option<TraceTarget>) -> Option<TraceWritten> {
    let recorded = cache.stop_trace();
    let target = target.as_ref()?;
    let recorded = recorded?;
    Some(TraceWritten {
        path: target.path.clone(),
        result: crate::write_trace(&recorded, &target.path),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mount keeps BACKING_FILES_PERCENT (35 %) of the open-file limit for backing files
    /// unless told otherwise.
    #[test]
    fn backing_files_percent_is_the_mounts_unless_set() {
        let (config, _) = knobs(&[]).unwrap();
        assert_eq!(config.backing_files_percent, BACKING_FILES_PERCENT);
        let (config, _) = knobs(&["backing_files_percent=60".into()]).unwrap();
        assert_eq!(config.backing_files_percent, 60);
        assert!(knobs(&["backing_files_percent=0".into()]).is_err());
    }
}
