//! Modification times as the program set them.
//!
//! A file's modification time is the time of the write, truncation or
//! fallocate that changed it through the cache, or the time a front end set
//! (`Cache::set_modified`), not the time the cache wrote it back. But an
//! O_DIRECT write or a length change stamps the backing inode with the time
//! it happens, which can be long after the change (the flusher writes a
//! file back up to `dirty_expire_centisecs` later). So after each write-back
//! and length change of a file changed through the cache, the runtime sets
//! the backing file's mtime back to the recorded one (`stamp`, outside the
//! cache's lock), and it stays as the program left it before and after
//! write-back, and after the cache is gone. make, rsync and backup tools
//! compare mtimes.
//!
//! What remains: the change time (ctime) cannot be set by any system call;
//! on the backing file it shows the last write-back or stamp. The access
//! time is left alone. A crash between a write-back and its stamp leaves
//! the write-back's time as the mtime.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// When a file was last changed through the cache, in ns since the epoch;
/// 0 while it has not been (its backing mtime is then right).
pub(crate) type Modified = Arc<AtomicI64>;

/// The wall-clock time now, in ns since the epoch, at the kernel's tick
/// (CLOCK_REALTIME_COARSE: a few ns from the vDSO; the fine clock cost
/// cached writes 13 % of their rate here, `wb bench cached`). The kernel
/// stamps mtimes at its tick too (current_time; fine-grained only where
/// 6.13's multigrain timestamps need it). 0: not readable (never
/// recorded).
pub(crate) fn now_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into `ts`, a local that
    // outlives the call.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec)
}

/// `ns` as a time (None for 0: never recorded).
pub(crate) fn to_system_time(ns: i64) -> Option<std::time::SystemTime> {
    let epoch = std::time::UNIX_EPOCH;
    match ns {
        0 => None,
        ns if ns > 0 => Some(epoch + std::time::Duration::from_nanos(ns.unsigned_abs())),
        ns => Some(epoch - std::time::Duration::from_nanos(ns.unsigned_abs())),
    }
}

/// `time` in ns since the epoch (saturating; never 0, which means none).
pub(crate) fn from_system_time(time: std::time::SystemTime) -> i64 {
    let ns = match time.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_nanos()).unwrap_or(i64::MAX),
    };
    if ns == 0 {
        1
    } else {
        ns
    }
}

/// A file's data or length changed now. Within one tick the time is the
/// same: not stored again (writers of one file on several CPUs would
/// otherwise pass its cache line back and forth at every write).
pub(crate) fn note(modified: &AtomicI64) {
    let now = now_ns();
    if modified.load(Ordering::Relaxed) != now {
        modified.store(now, Ordering::Relaxed);
    }
}

/// A backing file whose mtime is to be set back to its recorded one.
pub(crate) struct Stamp {
    pub backing: Arc<File>,
    pub modified: Modified,
}

impl Stamp {
    /// Sets the backing file's mtime to the recorded one (read now, so the
    /// latest change wins whatever order stamps run in). Errors are left:
    /// the process may not own the file (futimens with a time needs that),
    /// and the data is not at stake.
    pub fn apply(&self) {
        let ns = self.modified.load(Ordering::Relaxed);
        if ns == 0 {
            return;
        }
        let times = [
            libc::timespec {
                tv_sec: 0,
                tv_nsec: libc::UTIME_OMIT,
            },
            libc::timespec {
                tv_sec: ns.div_euclid(1_000_000_000),
                tv_nsec: ns.rem_euclid(1_000_000_000),
            },
        ];
        // SAFETY: `times` is an array of two initialised timespecs that
        // outlives the call, which only reads it; the descriptor is open
        // (`self.backing` is borrowed).
        unsafe { libc::futimens(self.backing.as_raw_fd(), times.as_ptr()) };
    }
}
