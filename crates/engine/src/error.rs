//! Errors returned to callers of the engine.

use crate::action::IoErrorKind;
use crate::ids::{DeviceId, DomainId, FileId, HandleId, TaskId};
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EngineError {
    /// The handle does not exist (never opened or already closed).
    BadHandle(HandleId),
    /// The task does not exist.
    BadTask(TaskId),
    /// The file does not exist.
    BadFile(FileId),
    /// The device does not exist.
    BadDevice(DeviceId),
    /// The writeback domain does not exist.
    BadDomain(DomainId),
    /// The backing filesystem has no room for the write (space/): it
    /// needs `needed_bytes` of new blocks, `room_bytes` are left after the
    /// margin and the other dirty data's reservations.
    NoSpace { needed_bytes: u64, room_bytes: u64 },
    /// The file is in use (open, dirty or with I/O in flight).
    FileBusy(FileId),
    /// The task already has an operation in progress; finish it with `resume`.
    Busy(TaskId),
    /// `resume` was called but the task has nothing in progress.
    NothingToResume(TaskId),
    /// The byte range does not fit in a file.
    OutOfRange { offset: u64, len: u64 },
    /// One read may cover at most a quarter of the cache (it needs all its
    /// pages cached at once); split larger reads.
    ReadTooLarge { len: u64, max: u64 },
    /// Write-back of this file's data failed since the handle last synced.
    WriteBack(IoErrorKind),
    /// A read from the device failed.
    Read(IoErrorKind),
    /// Flushing the file's landed writes to stable storage failed; they
    /// stay marked and the next sync tries again.
    Durability(IoErrorKind),
    /// Setting the backing file's length (a truncation) failed; the cache
    /// has the new length, and the next flush sets it again.
    Resize(IoErrorKind),
    /// A writeback domain name that is empty, too long or not printable.
    BadDomainName { name: String, reason: &'static str },
    /// Every writeback domain slot is taken.
    TooManyDomains { max: usize },
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::BadHandle(h) => write!(f, "no open file handle {}", h.0),
            EngineError::BadTask(t) => write!(f, "no task {}", t.0),
            EngineError::BadFile(file) => write!(f, "no file {}", file.0),
            EngineError::BadDevice(d) => write!(f, "no device {}", d.0),
            EngineError::BadDomain(d) => write!(f, "no writeback domain {}", d.0),
            EngineError::NoSpace {
                needed_bytes,
                room_bytes,
            } => write!(
                f,
                "no space left on the device: the write needs {} of new blocks, {} are free \
                 for it (after what dirty data holds reserved and a margin)",
                crate::units::format_bytes(*needed_bytes),
                crate::units::format_bytes(*room_bytes)
            ),
            EngineError::FileBusy(file) => {
                write!(
                    f,
                    "file {} is in use (open, dirty or with I/O in flight)",
                    file.0
                )
            }
            EngineError::Busy(t) => write!(f, "task {} already has an operation in progress", t.0),
            EngineError::NothingToResume(t) => write!(f, "task {} has nothing to resume", t.0),
            EngineError::OutOfRange { offset, len } => {
                write!(
                    f,
                    "range of {len} bytes at offset {offset} is beyond the largest file size"
                )
            }
            EngineError::ReadTooLarge { len, max } => {
                write!(
                    f,
                    "a read of {len} bytes is larger than one read may be ({max} bytes); split it"
                )
            }
            EngineError::WriteBack(e) => write!(f, "writing back data failed: {e}"),
            EngineError::Read(e) => write!(f, "reading from the device failed: {e}"),
            EngineError::BadDomainName { name, reason } => {
                write!(f, "writeback domain name {name:?} is not valid: {reason}")
            }
            EngineError::TooManyDomains { max } => {
                write!(f, "too many writeback domains (at most {max})")
            }
            EngineError::Resize(e) => write!(
                f,
                "setting the backing file's length failed: {e}; the next sync sets it again"
            ),
            EngineError::Durability(e) => write!(
                f,
                "flushing the file to stable storage failed: {e}; it stays unsynced and the next sync tries again"
            ),
        }
    }
}

impl std::error::Error for EngineError {}
