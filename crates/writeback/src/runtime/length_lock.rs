//! Length changes of a backing file, one at a time per file.
//!
//! Two threads may shorten the same backing file: a sync cuts it to the
//! file's length (`Flush`), while the backlog cuts a truncated file in
//! steps from the release thread. A step must only ever shorten ("cut to
//! `len` if longer": a sync may have cut past it already), and that check
//! and the cut must not be split by the sync's cut, or the step's cut
//! would lengthen the file again. So both take the file's lock, one of
//! [`STRIPES`] picked by descriptor number (files sharing a stripe only
//! wait for each other's `ftruncate`).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::{Mutex, MutexGuard};

/// Locks shared by all backing files.
const STRIPES: usize = 64;

pub(crate) struct LengthLocks([Mutex<()>; STRIPES]);

impl LengthLocks {
    pub fn new() -> LengthLocks {
        LengthLocks(std::array::from_fn(|_| Mutex::new(())))
    }

    /// The lock of `file`'s length.
    pub fn lock(&self, file: &File) -> MutexGuard<'_, ()> {
        let stripe = file.as_raw_fd().unsigned_abs() as usize % STRIPES;
        // The lock guards no data: a poisoned one is as good.
        self.0[stripe].lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Cuts `file` to `len` bytes if it is longer (never lengthens it).
pub(crate) fn cut_if_longer(locks: &LengthLocks, file: &File, len: u64) -> std::io::Result<()> {
    let _guard = locks.lock(file);
    if file.metadata()?.len() > len {
        file.set_len(len)?;
    }
    Ok(())
}
