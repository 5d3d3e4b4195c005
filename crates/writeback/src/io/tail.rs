//! A write's partial last page (`IoOp::len` not a whole number of pages).
//!
//! O_DIRECT moves whole blocks only, and writing the whole last page would
//! make the file longer than its data, with a zero tail, until something
//! cut it back: a crash of the process in between would leave it so. So
//! the whole pages go through the op's own (O_DIRECT) descriptor, and the
//! last `len % PAGE_SIZE` bytes after them through a descriptor of the same
//! file opened without O_DIRECT: a buffered write, which grows the file to
//! exactly the write's end. The kernel keeps its page cache coherent with
//! O_DIRECT (a later direct read or write of that page writes it back or
//! drops it first), and an fsync of either descriptor flushes both.
//!
//! The descriptor is opened for the write and closed after it, through
//! /proc/self/fd (the same file, whatever its name is now): one open per
//! write-back of a file's partial last page. Where it cannot be opened (no
//! /proc, or the file's mode no longer lets the process write it), the page
//! goes whole through O_DIRECT and the file is cut back to the write's end
//! right after: a window of one system call in which a crash leaves the
//! zero tail. That is said once on standard error.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::atomic::{AtomicBool, Ordering};

use super::aligned::PAGE_SIZE;
use super::backend::IoOp;
use super::pages::{IoBuf, IoPages};

/// Bytes of `op` that go through its own descriptor: whole pages.
pub(crate) fn whole_bytes(op: &IoOp) -> usize {
    op.len - tail_bytes(op)
}

/// Bytes of `op`'s partial last page, 0 if it has none.
pub(crate) fn tail_bytes(op: &IoOp) -> usize {
    if op.write {
        op.len % PAGE_SIZE
    } else {
        0
    }
}

/// A descriptor of `file` for writing without O_DIRECT.
pub(crate) fn open_buffered(file: &File) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

/// Performs write `op` with blocking calls: its whole pages, then its
/// partial last page. Returns `op.len` or the first error.
pub(crate) fn write_blocking(op: &IoOp) -> io::Result<usize> {
    let whole = whole_bytes(op);
    if whole > 0 {
        write_range(&op.file, &op.buf, op.offset, 0, whole)?;
    }
    let tail = tail_bytes(op);
    if tail > 0 {
        match open_buffered(&op.file) {
            Ok(buffered) => write_range(&buffered, &op.buf, op.offset, whole, tail)?,
            Err(e) => write_whole_and_cut(op, whole, &e)?,
        }
    }
    Ok(op.len)
}

/// The fallback for a partial last page (see the module docs).
pub(crate) fn write_whole_and_cut(op: &IoOp, whole: usize, why: &io::Error) -> io::Result<()> {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        eprintln!(
            "writeback: cannot open a backing file without O_DIRECT ({why}): partial last \
             pages are written whole and cut back, and a crash in between leaves a zero tail"
        );
    }
    let before = op.file.metadata()?.len();
    write_range(&op.file, &op.buf, op.offset, whole, PAGE_SIZE)?;
    let end = (op.offset + op.len as u64).max(before);
    if op.file.metadata()?.len() > end {
        op.file.set_len(end)?;
    }
    Ok(())
}

/// Writes bytes `from..from + len` of `buf` at `offset + from` of `file`,
/// continuing after short writes.
pub(crate) fn write_range(
    file: &File,
    buf: &IoBuf,
    offset: u64,
    from: usize,
    len: usize,
) -> io::Result<()> {
    match buf {
        IoBuf::Owned(b) => {
            let data = b
                .as_slice()
                .get(from..from + len)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
            write_all_at(file, data, offset + from as u64)
        }
        IoBuf::Lent(pages) => write_lent_at(file, pages, offset, from, len),
    }
}

/// Writes all of `data` at `offset`, continuing after short writes.
pub(crate) fn write_all_at(file: &File, data: &[u8], offset: u64) -> io::Result<()> {
    let mut done = 0usize;
    while done < data.len() {
        match file.write_at(&data[done..], offset + done as u64) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "write returned 0 bytes",
                ))
            }
            Ok(n) => done += n,
            Err(e) if retryable(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes bytes `from..from + len` of the lent `pages` at `offset + from`
/// with `pwritev`, continuing after short writes.
fn write_lent_at(
    file: &File,
    pages: &IoPages,
    offset: u64,
    from: usize,
    len: usize,
) -> io::Result<()> {
    if from + len > pages.len() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut done = 0usize;
    while done < len {
        let iov = pages.iovecs_from(from + done, len - done);
        let at = libc::off_t::try_from(offset + (from + done) as u64)
            .map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
        // SAFETY: `iov` holds `iov.len()` (<= UIO_MAXIOV) iovecs, each
        // inside memory that `pages` keeps allocated and readable while it
        // lives (IoPages::new), and `pages` outlives the call; pwritev only
        // reads that memory. The fd is open: `file` is borrowed.
        let n = unsafe { libc::pwritev(file.as_raw_fd(), iov.as_ptr(), iov.len() as i32, at) };
        match n {
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "write returned 0 bytes",
                ))
            }
            n if n > 0 => done += n as usize,
            _ => {
                let e = io::Error::last_os_error();
                if !retryable(&e) {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

pub(crate) fn retryable(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::AlignedBuf;
    use std::sync::Arc;

    fn dir() -> Option<std::path::PathBuf> {
        let dir = std::env::temp_dir().join(format!("wb-tail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        if !crate::io::supports_direct(&dir) {
            let _ = std::fs::remove_dir_all(&dir);
            wb_testkit::skip("tail: O_DIRECT is not supported in the temporary directory");
            return None;
        }
        Some(dir)
    }

    fn op(file: &Arc<File>, offset: u64, fill: u8, len: usize) -> IoOp {
        let mut buf = AlignedBuf::new(len.div_ceil(PAGE_SIZE) * PAGE_SIZE);
        buf.as_mut_slice().fill(fill);
        IoOp {
            id: 1,
            file: Arc::clone(file),
            write: true,
            offset,
            buf: IoBuf::Owned(buf),
            len,
            blocks: false,
        }
    }

    #[test]
    fn a_partial_last_page_grows_the_file_to_the_byte() {
        let Some(dir) = dir() else { return };
        let path = dir.join("f");
        let file = Arc::new(crate::io::open_direct(&path, true).expect("open"));
        assert_eq!(
            write_blocking(&op(&file, 0, 0xA1, 10_000)).expect("write"),
            10_000
        );
        assert_eq!(file.metadata().expect("stat").len(), 10_000);
        // Then it grows by whole pages and another partial one.
        let second = op(&file, 8192, 0xB2, 3 * PAGE_SIZE + 5);
        assert_eq!(write_blocking(&second).expect("write"), 3 * PAGE_SIZE + 5);
        let bytes = std::fs::read(&path).expect("read");
        assert_eq!(bytes.len(), 8192 + 3 * PAGE_SIZE + 5);
        assert!(bytes[..8192].iter().all(|&b| b == 0xA1));
        assert!(bytes[8192..].iter().all(|&b| b == 0xB2));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_write_of_whole_pages_needs_no_second_descriptor() {
        let w = IoOp {
            id: 1,
            file: Arc::new(tempfile_like()),
            write: true,
            offset: 0,
            buf: IoBuf::Owned(AlignedBuf::new(2 * PAGE_SIZE)),
            len: 2 * PAGE_SIZE,
            blocks: false,
        };
        assert_eq!((whole_bytes(&w), tail_bytes(&w)), (2 * PAGE_SIZE, 0));
        let w = IoOp {
            len: PAGE_SIZE + 1,
            ..w
        };
        assert_eq!((whole_bytes(&w), tail_bytes(&w)), (PAGE_SIZE, 1));
        let r = IoOp {
            write: false,
            len: PAGE_SIZE + 1,
            ..w
        };
        assert_eq!(tail_bytes(&r), 0, "reads have no tail");
    }

    fn tempfile_like() -> File {
        File::open("/dev/null").expect("/dev/null")
    }
}
