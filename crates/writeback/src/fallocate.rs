//! A file's space: [`File::fallocate`] (every mode of fallocate(2)) and
//! [`File::seek_data`] (lseek's SEEK_DATA and SEEK_HOLE) on a file in the
//! cache.
//!
//! Allocating (mode 0, `KEEP_SIZE`) reserves blocks of the backing file
//! and, without `KEEP_SIZE`, extends the file as a write would. The modes
//! that change data — `PUNCH_HOLE`, `ZERO_RANGE`, `COLLAPSE_RANGE`,
//! `INSERT_RANGE`, `UNSHARE_RANGE` — are carried out on the backing file,
//! with the cache kept coherent, as Linux does under the invalidate lock:
//!
//! 1. the file's dirty data is written back and made durable (`sync_data`:
//!    the backing file then holds all of it, and is exactly as long as the
//!    file), so the partial pages at the range's ends keep what lies
//!    outside it;
//! 2. the engine drops the cached pages of the range
//!    (`Engine::invalidate_range`, waiting for I/O in flight there); for
//!    `COLLAPSE_RANGE` and `INSERT_RANGE`, which shift what follows, from
//!    the range's start to the end of the file;
//! 3. the backing file is changed, under the file's length lock, and the
//!    range dropped again (a read may have cached it meanwhile);
//! 4. the length follows: shorter by `len` after a collapse, longer after
//!    an insert, at least the range's end after a zeroing without
//!    `KEEP_SIZE`.
//!
//! The backing filesystem decides what it supports: its error (EOPNOTSUPP,
//! or EINVAL for a collapse that is not block-aligned) is returned as is,
//! and the file is then as it was (only uncached). A write racing with a
//! fallocate of the same range lands before or after it; through the
//! mount the kernel serialises them on the inode lock.

use crate::error::Error;
use crate::file::File;
use std::os::fd::AsRawFd;

/// The modes that change the data of a range (the cache must let go of it).
const DATA_MODES: i32 = libc::FALLOC_FL_PUNCH_HOLE
    | libc::FALLOC_FL_ZERO_RANGE
    | libc::FALLOC_FL_COLLAPSE_RANGE
    | libc::FALLOC_FL_INSERT_RANGE
    | libc::FALLOC_FL_UNSHARE_RANGE;
/// Every flag fallocate(2) knows.
const KNOWN_MODES: i32 = DATA_MODES | libc::FALLOC_FL_KEEP_SIZE;

impl File {
    /// fallocate(2) with `mode` over bytes `offset..offset + len` (see the
    /// module documentation for how the cache follows).
    pub fn fallocate(&self, mode: i32, offset: u64, len: u64) -> Result<(), Error> {
        let errno = |code| Error::io(&self.path, std::io::Error::from_raw_os_error(code));
        if mode & !KNOWN_MODES != 0 {
            return Err(errno(libc::EOPNOTSUPP));
        }
        // As fallocate(2): an empty range is EINVAL, one past the largest
        // file EFBIG.
        if len == 0 {
            return Err(errno(libc::EINVAL));
        }
        crate::runtime::times::note(&self.modified);
        let end = offset
            .checked_add(len)
            .filter(|&end| end <= i64::MAX as u64)
            .ok_or_else(|| errno(libc::EFBIG))?;
        if mode & DATA_MODES == 0 {
            return self.allocate(mode, offset, len, end);
        }
        self.sync_data()?;
        let shifts = mode & (libc::FALLOC_FL_COLLAPSE_RANGE | libc::FALLOC_FL_INSERT_RANGE) != 0;
        let dropped_len = if shifts { u64::MAX - offset } else { len };
        self.invalidate(offset, dropped_len)?;
        let old_len = self.len();
        let changed = self.backing_fallocate(mode, offset, len);
        // Again: a read may have cached the range from the backing file
        // while it changed.
        self.invalidate(offset, dropped_len)?;
        changed?;
        let new_len = if mode & libc::FALLOC_FL_COLLAPSE_RANGE != 0 {
            old_len.saturating_sub(len)
        } else if mode & libc::FALLOC_FL_INSERT_RANGE != 0 {
            old_len + len
        } else if mode & libc::FALLOC_FL_ZERO_RANGE != 0 && mode & libc::FALLOC_FL_KEEP_SIZE == 0 {
            old_len.max(end)
        } else {
            old_len
        };
        if new_len != old_len {
            // The backing file has that length already; the engine learns it.
            self.set_len(new_len)?;
        }
        Ok(())
    }

    fn invalidate(&self, offset: u64, len: u64) -> Result<(), Error> {
        let handle = self.handle;
        self.shared.run_op(
            |e, now, task| e.invalidate_range(now, task, handle, offset, len),
            None,
            |_, _, _| {},
        )
    }

    /// lseek(2) with SEEK_DATA (`data`) or SEEK_HOLE from `offset`: where
    /// the next data or hole starts, as the backing filesystem knows it
    /// once the file's dirty data is written back (a hole that is dirty
    /// in the cache is data). ENXIO past the end, as lseek(2).
    pub fn seek_data(&self, offset: u64, data: bool) -> Result<u64, Error> {
        let errno = |code| Error::io(&self.path, std::io::Error::from_raw_os_error(code));
        if offset > i64::MAX as u64 {
            return Err(errno(libc::ENXIO));
        }
        self.sync_data()?;
        let backing = self.shared.lock().backing(self.file);
        let whence = if data {
            libc::SEEK_DATA
        } else {
            libc::SEEK_HOLE
        };
        // SAFETY: lseek(2) on a descriptor `backing` keeps open for this
        // call, with plain integers; it touches no memory of ours.
        let pos = unsafe { libc::lseek(backing.as_raw_fd(), offset as libc::off_t, whence) };
        if pos < 0 {
            return Err(Error::io(&self.path, std::io::Error::last_os_error()));
        }
        Ok(pos as u64)
    }

    /// Mode 0 or `KEEP_SIZE`: blocks reserved, the file extended unless
    /// `KEEP_SIZE`.
    fn allocate(&self, mode: i32, offset: u64, len: u64, end: u64) -> Result<(), Error> {
        self.backing_fallocate(libc::FALLOC_FL_KEEP_SIZE, offset, len)?;
        if mode & libc::FALLOC_FL_KEEP_SIZE == 0 && end > self.len() {
            self.set_len(end)?;
        }
        Ok(())
    }

    fn backing_fallocate(&self, mode: i32, offset: u64, len: u64) -> Result<(), Error> {
        let backing = self.shared.lock().backing(self.file);
        let _guard = self.shared.lengths.lock(&backing);
        // SAFETY: fallocate(2) takes a descriptor that `backing` keeps open
        // for this call and plain integers (offset and len checked to fit
        // an off_t by the caller); it touches no memory of ours.
        let rc = unsafe {
            libc::fallocate(
                backing.as_raw_fd(),
                mode,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
        if rc != 0 {
            return Err(Error::io(&self.path, std::io::Error::last_os_error()));
        }
        Ok(())
    }
}
