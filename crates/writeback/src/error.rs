//! Errors of the library API: what went wrong, with the path or knob
//! involved, in words a person can act on.

use std::fmt;
use std::path::PathBuf;
use wb_engine::{EngineError, IoErrorKind, KnobError};

#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Opening or accessing a backing file failed.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A knob value was rejected; nothing changed.
    Knob(KnobError),
    /// Writing back cached data failed (reported once per handle, errseq style).
    WriteBack(IoErrorKind),
    /// Setting a backing file's length (a truncation) failed; the cache
    /// has the new length and the next sync sets it again.
    Resize(IoErrorKind),
    /// Reading from the device failed.
    Read(IoErrorKind),
    /// The range does not fit in a file.
    OutOfRange { offset: u64, len: u64 },
    /// The backing filesystem has no room for the write: nothing of it
    /// was written (ENOSPC at write time; the engine's space/).
    NoSpace(String),
    /// The cache was shut down while the file was still open.
    Closed,
    /// A writeback domain name was rejected (empty, too long, not
    /// printable) or no domain slot is left.
    Domain(String),
    /// A bug in this crate: the runtime misused the engine.
    Internal(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Knob(e) => write!(f, "{e}"),
            Error::WriteBack(e) => write!(f, "writing back cached data failed: {e}"),
            Error::Resize(e) => write!(f, "setting the backing file's length failed: {e}"),
            Error::Read(e) => write!(f, "reading from the device failed: {e}"),
            Error::OutOfRange { offset, len } => {
                write!(
                    f,
                    "{len} bytes at offset {offset} is beyond the largest file size"
                )
            }
            Error::NoSpace(m) => f.write_str(m),
            Error::Closed => f.write_str("the cache was shut down"),
            Error::Domain(m) => f.write_str(m),
            Error::Internal(m) => write!(f, "internal error (a bug, please report it): {m}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Knob(e) => Some(e),
            _ => None,
        }
    }
}

impl From<KnobError> for Error {
    fn from(e: KnobError) -> Self {
        Error::Knob(e)
    }
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// The errno this error stands for, for front ends that speak errno (FUSE).
    pub fn errno(&self) -> i32 {
        match self {
            Error::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
            Error::Knob(_) | Error::OutOfRange { .. } | Error::Domain(_) => libc::EINVAL,
            Error::WriteBack(IoErrorKind::NoSpace)
            | Error::Read(IoErrorKind::NoSpace)
            | Error::Resize(IoErrorKind::NoSpace) => libc::ENOSPC,
            Error::WriteBack(_) | Error::Read(_) | Error::Resize(_) => libc::EIO,
            Error::NoSpace(_) => libc::ENOSPC,
            Error::Closed => libc::EBADF,
            Error::Internal(_) => libc::EIO,
        }
    }
}

pub(crate) fn from_engine(e: EngineError) -> Error {
    match e {
        // A failed flush loses acknowledged data as a failed write does.
        EngineError::WriteBack(k) | EngineError::Durability(k) => Error::WriteBack(k),
        EngineError::Read(k) => Error::Read(k),
        EngineError::Resize(k) => Error::Resize(k),
        EngineError::OutOfRange { offset, len } => Error::OutOfRange { offset, len },
        e @ EngineError::NoSpace { .. } => Error::NoSpace(e.to_string()),
        e @ (EngineError::BadDomainName { .. } | EngineError::TooManyDomains { .. }) => {
            Error::Domain(e.to_string())
        }
        // Handles and tasks are ours; anything else is a bug in this crate.
        other => Error::Internal(other.to_string()),
    }
}

/// How an I/O error from the device is told to the engine.
pub(crate) fn io_error_kind(e: &std::io::Error) -> IoErrorKind {
    match e.raw_os_error() {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => IoErrorKind::NoSpace,
        _ => IoErrorKind::Io,
    }
}
