//! What the experiment needs before its first run: room for the writer,
//! the reader's file written once with O_DIRECT, and a look at the
//! kernel's own wbt.

use super::{CHUNK, MIN_WRITER, SPACE_MARGIN};
use crate::bench::{free_bytes, progress, BenchError, SplitMix64};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use std::path::{Path, PathBuf};
use wb_engine::units::format_bytes;

/// The writer size that fits on the disk next to the reader's file.
pub fn fit_writer(dir: &Path, reader_size: u64, wanted: u64) -> Result<u64, BenchError> {
    let free = free_bytes(dir)?;
    let room = free.saturating_sub(reader_size + SPACE_MARGIN);
    if room < MIN_WRITER {
        return Err(BenchError::Failed(format!(
            "not enough free space in {}: {} available, the benchmark needs at least {} \
             (reader file {} + writer {} + {} margin); free some space or pick another --dir",
            dir.display(),
            format_bytes(free),
            format_bytes(reader_size + MIN_WRITER + SPACE_MARGIN),
            format_bytes(reader_size),
            format_bytes(MIN_WRITER),
            format_bytes(SPACE_MARGIN)
        )));
    }
    if wanted > room {
        let size = room / CHUNK as u64 * CHUNK as u64;
        progress!(
            "note: only {} free in {}: writing {} per writer instead of {}",
            format_bytes(free),
            dir.display(),
            format_bytes(size),
            format_bytes(wanted)
        );
        return Ok(size);
    }
    Ok(wanted)
}

/// Writes `size` bytes of pseudo-random data to `path` with O_DIRECT and
/// makes them durable: the file never enters the kernel's page cache.
pub fn write_direct_file(path: &Path, size: u64) -> Result<(), BenchError> {
    let fail = |e: std::io::Error| BenchError::failed(path.display(), e);
    let _ = std::fs::remove_file(path);
    let file = writeback::io::open_direct(path, true).map_err(fail)?;
    let mut buf = writeback::io::AlignedBuf::new(CHUNK);
    let mut rng = SplitMix64::seed_from_u64(0x5eed);
    rng.fill_bytes(buf.as_mut_slice());
    let mut offset = 0u64;
    use std::os::unix::fs::FileExt;
    while offset < size {
        let len = (size - offset).min(CHUNK as u64) as usize;
        // O_DIRECT needs whole blocks: round the last chunk up to 4 KiB.
        let len = len.div_ceil(4096) * 4096;
        buf.as_mut_slice()[..8].copy_from_slice(&offset.to_ne_bytes());
        file.write_all_at(&buf.as_slice()[..len], offset)
            .map_err(fail)?;
        offset += len as u64;
    }
    file.sync_all().map_err(fail)
}

/// The block device holding `dir` and its wbt_lat_usec, if sysfs shows them.
pub fn kernel_wbt(dir: &Path) -> Option<(String, String)> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(dir).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    // A partition's queue is its parent disk's.
    for base in [sys.clone(), sys.join("..")] {
        if let Ok(v) = std::fs::read_to_string(base.join("queue/wbt_lat_usec")) {
            let name = std::fs::canonicalize(&base)
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| format!("{major}:{minor}"));
            return Some((name, v.trim().to_string()));
        }
    }
    None
}
