//! Extended attributes, passed through to the backing inode by its
//! `/proc/self/fd/N` path (xattr calls, the *xattrat ones of Linux 6.13
//! included, do not accept O_PATH descriptors). The path is followed: the
//! magic link leads to the inode the descriptor holds and no further, so
//! a symlink's descriptor (O_PATH | O_NOFOLLOW) reaches the symlink's own
//! attributes, race-free, without its name. What the backing filesystem
//! allows there is what the mount allows (Linux: trusted.* and
//! security.*, but no user.* on symlinks: EPERM).

use crate::sys::{errno, proc_path, Errno};
use std::ffi::{CString, OsStr};
use std::os::fd::BorrowedFd;
use std::os::unix::ffi::OsStrExt;

/// The attribute an unmodified program sets to ask for uncached
/// (DONTCACHE) writes on a file: `setfattr -n user.writeback.dontcache -v 1 FILE`.
/// Recorded on each handle opened afterwards; see `data.rs`.
pub const DONTCACHE_XATTR: &str = "user.writeback.dontcache";

/// A read-only attribute the mount answers itself (it is not stored):
/// "CACHED ACTIVE", the bytes of the file the cache holds and how many of
/// them are on the active list (used repeatedly), like fincore(1) for the
/// mount's cache: `getfattr -n user.writeback.cached FILE`.
pub const CACHED_XATTR: &str = "user.writeback.cached";

fn c_name(name: &OsStr) -> Result<CString, Errno> {
    CString::new(name.as_bytes()).map_err(|_| libc::EINVAL)
}

fn result(res: isize) -> Result<usize, Errno> {
    if res < 0 {
        Err(errno(nix::errno::Errno::last()))
    } else {
        Ok(res as usize)
    }
}

/// Reads attribute `name` into `buf` (or its size, if `buf` is empty).
pub(crate) fn get(fd: BorrowedFd<'_>, name: &OsStr, buf: &mut [u8]) -> Result<usize, Errno> {
    let path = proc_path(fd);
    let name = c_name(name)?;
    // SAFETY: path and name are NUL-terminated C strings alive for the
    // call; the kernel writes at most buf.len() bytes into buf (a null
    // pointer with size 0 asks for the size only).
    let res = unsafe {
        libc::getxattr(
            path.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    result(res)
}

pub(crate) fn set(fd: BorrowedFd<'_>, name: &OsStr, value: &[u8], flags: i32) -> Result<(), Errno> {
    let path = proc_path(fd);
    let name = c_name(name)?;
    // SAFETY: path and name are NUL-terminated C strings alive for the
    // call; the kernel reads value.len() bytes from value.
    let res = unsafe {
        libc::setxattr(
            path.as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            flags,
        )
    };
    result(res as isize).map(drop)
}

/// Lists attribute names (NUL-separated) into `buf` (or the size needed).
pub(crate) fn list(fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<usize, Errno> {
    let path = proc_path(fd);
    // SAFETY: path is a NUL-terminated C string alive for the call; the
    // kernel writes at most buf.len() bytes into buf.
    let res = unsafe { libc::listxattr(path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    result(res)
}

pub(crate) fn remove(fd: BorrowedFd<'_>, name: &OsStr) -> Result<(), Errno> {
    let path = proc_path(fd);
    let name = c_name(name)?;
    // SAFETY: path and name are NUL-terminated C strings alive for the call.
    let res = unsafe { libc::removexattr(path.as_ptr(), name.as_ptr()) };
    result(res as isize).map(drop)
}

/// Whether the file asks for uncached writes through [`DONTCACHE_XATTR`]
/// (any value but "0").
pub(crate) fn wants_dontcache(fd: BorrowedFd<'_>) -> bool {
    let mut value = [0u8; 8];
    match get(fd, OsStr::new(DONTCACHE_XATTR), &mut value) {
        Ok(n) => &value[..n.min(value.len())] != b"0",
        Err(_) => false,
    }
}

/// With `wb mount --fault-seam` (tests), setting this attribute to
/// "COUNT [eio|enospc]" on a file fails its next COUNT write-backs; it is
/// not stored.
pub const FAIL_WRITES_XATTR: &str = "user.writeback.fail_writes";

/// Arms `faults` for the file with backing (st_dev, st_ino) `key` from
/// the attribute's `value`. EINVAL for a value that does not parse.
pub(crate) fn arm_faults(
    faults: &writeback::io::Faults,
    key: (u64, u64),
    value: &[u8],
) -> Result<(), Errno> {
    let text = std::str::from_utf8(value).map_err(|_| libc::EINVAL)?;
    let mut words = text.split_whitespace();
    let count: u32 = words
        .next()
        .and_then(|w| w.parse().ok())
        .ok_or(libc::EINVAL)?;
    let errno = match words.next() {
        None | Some("eio") => libc::EIO,
        Some("enospc") => libc::ENOSPC,
        Some(_) => return Err(libc::EINVAL),
    };
    if words.next().is_some() {
        return Err(libc::EINVAL);
    }
    faults
        .fail_writes_to(key, errno, count)
        .map_err(|_| libc::ENOSPC)
}
