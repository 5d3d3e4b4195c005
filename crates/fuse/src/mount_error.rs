//! Why mounting or unmounting failed: [`MountError`], one variant per
//! cause, each a sentence for a person (`wb mount` prints them after
//! "wb mount: ").

use nix::sys::signal::Signal;
use std::fmt;
use std::path::PathBuf;

/// A trace written to its file at the end of a session (or of a mount
/// that failed), and how that went.
#[derive(Debug)]
pub struct TraceWritten {
    pub path: PathBuf,
    pub result: std::io::Result<()>,
}

/// Why [`crate::mount`] or [`crate::MountSession::unmount`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum MountError {
    /// BACKING_DIR or MOUNTPOINT is unusable (missing, not a directory, a
    /// non-empty mountpoint, a mountpoint inside BACKING_DIR).
    Paths(String),
    /// A knob setting (`KNOB=VALUE`) is malformed, unknown or out of range.
    Knob { spec: String, reason: String },
    /// Mounting needs root: it goes through /dev/fuse itself.
    NotRoot,
    /// There is no /dev/fuse.
    NoFuseDevice,
    /// The backing directory's filesystem has no O_DIRECT (tmpfs before
    /// Linux 6.6, /proc, ...).
    NoDirectIo { backing: PathBuf },
    /// Building the cache failed (a device knob, the I/O backend, the
    /// memory reservation).
    Cache(writeback::Error),
    /// The backing directory's device could not be found.
    Device {
        backing: PathBuf,
        source: std::io::Error,
    },
    /// Adding the backing directory's device to the cache failed
    /// (calibration, a knob it refused).
    AddDevice {
        backing: PathBuf,
        source: writeback::Error,
    },
    /// A signal arrived while setting up (with `MountOptions::signals`).
    Interrupted(Signal),
    /// The trace file could not be made.
    TraceFile {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The backing directory could not be opened for serving.
    Backing {
        backing: PathBuf,
        source: std::io::Error,
    },
    /// mount(2) or starting the serving threads failed. A trace under way
    /// was written all the same (`trace`).
    Mount {
        mountpoint: PathBuf,
        source: std::io::Error,
        trace: Option<TraceWritten>,
    },
    /// FUSE over io_uring was asked for (`wb mount --uring on`) and the
    /// kernel does not offer it: why, and how to switch it on.
    NoUring(String),
    /// Writing back the dirty data at the unmount failed.
    WriteBack(writeback::Error),
    /// Writing the trace at the unmount failed.
    TraceWrite {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl MountError {
    /// Whether the caller asked for something impossible (bad paths, a
    /// bad knob, a trace file that cannot be made), rather than the system
    /// failing: `wb mount` exits 2 for these, 1 for the others.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            MountError::Paths(_) | MountError::Knob { .. } | MountError::TraceFile { .. }
        )
    }
}

impl fmt::Display for MountError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MountError::Paths(why) => write!(f, "{why}"),
            MountError::Knob { spec, reason } => write!(f, "knob {spec}: {reason}"),
            MountError::NotRoot => {
                write!(f, "must run as root (it mounts through /dev/fuse itself)")
            }
            MountError::NoFuseDevice => {
                write!(
                    f,
                    "/dev/fuse is missing (load the fuse module: modprobe fuse)"
                )
            }
            MountError::NoDirectIo { backing } => write!(
                f,
                "the filesystem of {} does not support O_DIRECT (tmpfs?); the engine needs it",
                backing.display()
            ),
            MountError::Cache(e) => write!(f, "{e}"),
            MountError::Device { backing, source } => {
                write!(f, "{}: {source}", backing.display())
            }
            MountError::AddDevice { backing, source } => write!(
                f,
                "setting up the device of {}: {source}",
                backing.display()
            ),
            MountError::Interrupted(signal) => write!(f, "{signal} during setup; not mounting"),
            MountError::TraceFile { path, source } => {
                write!(f, "cannot write the trace to {}: {source}", path.display())
            }
            MountError::Backing { backing, source } => {
                write!(f, "{}: {source}", backing.display())
            }
            MountError::Mount {
                mountpoint, source, ..
            } => write!(f, "mounting at {}: {source}", mountpoint.display()),
            MountError::NoUring(why) => write!(f, "--uring on: {why}"),
            MountError::WriteBack(e) => write!(f, "writing back failed: {e}"),
            MountError::TraceWrite { path, source } => write!(
                f,
                "writing the trace to {} failed: {source}",
                path.display()
            ),
        }
    }
}

impl std::error::Error for MountError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MountError::Cache(e) | MountError::WriteBack(e) => Some(e),
            MountError::AddDevice { source, .. } => Some(source),
            MountError::Device { source, .. }
            | MountError::TraceFile { source, .. }
            | MountError::Backing { source, .. }
            | MountError::Mount { source, .. }
            | MountError::TraceWrite { source, .. } => Some(source),
            _ => None,
        }
    }
}
