//! Opening files with O_DIRECT (bypassing the page cache).
//!
//! O_DIRECT I/O must use buffers, offsets and lengths aligned to the
//! device's logical block size; [`AlignedBuf`](super::aligned::AlignedBuf)
//! and 4 KiB-multiple offsets satisfy every common device.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::aligned::{AlignedBuf, PAGE_SIZE};

/// Opens `path` read/write with O_DIRECT, creating it (mode 0644) if
/// `create`. If the filesystem refuses O_DIRECT (open fails with `EINVAL`,
/// e.g. some tmpfs or FUSE mounts), the error has kind
/// [`io::ErrorKind::Unsupported`] and names the path.
pub fn open_direct(path: &Path, create: bool) -> io::Result<File> {
    let mut opts = OpenOptions::new();
    opts.read(true)
        .write(true)
        .create(create)
        .mode(0o644)
        .custom_flags(libc::O_DIRECT | libc::O_CLOEXEC);
    opts.open(path).map_err(|e| direct_error(path, e))
}

/// Maps `EINVAL` from an O_DIRECT open to a descriptive `Unsupported` error.
fn direct_error(path: &Path, e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(libc::EINVAL) {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "{}: the filesystem does not support O_DIRECT ({e})",
                path.display()
            ),
        )
    } else {
        e
    }
}

/// Whether files in directory `dir` can be opened *and* read/written with
/// O_DIRECT: creates a uniquely named temporary file there, writes and reads
/// back one aligned page, and removes it. Any failure yields `false`.
pub fn supports_direct(dir: &Path) -> bool {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let path = dir.join(format!(
        ".wb-direct-probe-{}-{}-{}",
        std::process::id(),
        nanos,
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let ok = (|| -> io::Result<()> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_DIRECT | libc::O_CLOEXEC)
            .open(&path)?;
        let mut buf = AlignedBuf::new(PAGE_SIZE);
        buf.as_mut_slice()[0] = 0x5A;
        f.write_all_at(buf.as_slice(), 0)?;
        let mut back = AlignedBuf::new(PAGE_SIZE);
        f.read_exact_at(back.as_mut_slice(), 0)?;
        if back.as_slice() == buf.as_slice() {
            Ok(())
        } else {
            Err(io::Error::other("read back differs"))
        }
    })()
    .is_ok();
    let _ = std::fs::remove_file(&path);
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn einval_maps_to_unsupported() {
        let e = direct_error(
            Path::new("/some/file"),
            io::Error::from_raw_os_error(libc::EINVAL),
        );
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
        let msg = e.to_string();
        assert!(msg.contains("/some/file"), "{msg}");
        assert!(msg.contains("does not support O_DIRECT"), "{msg}");
        let e = direct_error(Path::new("/x"), io::Error::from_raw_os_error(libc::ENOENT));
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn missing_dir_does_not_support_direct() {
        assert!(!supports_direct(Path::new("/nonexistent/wb-direct-test")));
    }
}
