//! The files of a run: the hot file (written, synced, read twice so it is
//! cached), the copy, and how much of the hot file a mount still caches.

use super::COPY_BLOCK_BYTES;
use crate::bench::{BenchError, SplitMix64};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Writes the hot file, syncs it and reads it whole twice.
pub fn make_hot(path: &Path, size: u64) -> Result<(), BenchError> {
    let fail = |e| BenchError::failed(path.display(), e);
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(path)
        .map_err(fail)?;
    let mut rng = SplitMix64::seed_from_u64(0xdb);
    let mut buf = vec![0u8; COPY_BLOCK_BYTES];
    let mut off = 0;
    while off < size {
        let n = (size - off).min(buf.len() as u64) as usize;
        rng.fill_bytes(&mut buf[..n]);
        file.write_all_at(&buf[..n], off).map_err(fail)?;
        off += n as u64;
    }
    file.sync_all().map_err(fail)?;
    for _ in 0..2 {
        let mut off = 0;
        while off < size {
            let n = file.read_at(&mut buf, off).map_err(fail)?;
            if n == 0 {
                return Err(BenchError::Failed(format!(
                    "{}: short at {off} of {size} bytes",
                    path.display()
                )));
            }
            off += n as u64;
        }
    }
    Ok(())
}

/// The copy: `size` bytes in 1 MiB writes to a new file, then fsync.
pub fn write_copy(path: &Path, size: u64) -> Result<(), BenchError> {
    let fail = |e| BenchError::failed(path.display(), e);
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(path)
        .map_err(fail)?;
    let mut buf = vec![0u8; COPY_BLOCK_BYTES];
    SplitMix64::seed_from_u64(0xc0b7).fill_bytes(&mut buf);
    let mut off = 0;
    while off < size {
        let n = (size - off).min(buf.len() as u64) as usize;
        // Each block differs, so nothing below can deduplicate it.
        buf[..8].copy_from_slice(&off.to_ne_bytes());
        file.write_all_at(&buf[..n], off).map_err(fail)?;
        off += n as u64;
    }
    file.sync_all().map_err(fail)
}

/// The engine's cached bytes of a file on the mount (its
/// `user.writeback.cached` attribute: "CACHED ACTIVE").
pub fn mount_cached_bytes(path: &Path) -> Result<u64, BenchError> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| BenchError::BadInput(format!("{}: path contains a NUL", path.display())))?;
    let name = c"user.writeback.cached";
    let mut buf = [0u8; 64];
    // SAFETY: both strings are NUL-terminated and alive for the call; the
    // kernel writes at most buf.len() bytes into buf.
    let n = unsafe {
        libc::getxattr(
            c_path.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(BenchError::failed(
            format!("getxattr user.writeback.cached {}", path.display()),
            std::io::Error::last_os_error(),
        ));
    }
    let text = String::from_utf8_lossy(&buf[..n as usize]).to_string();
    text.split_whitespace()
        .next()
        .and_then(|w| w.parse().ok())
        .ok_or_else(|| BenchError::Failed(format!("user.writeback.cached: '{text}'")))
}
