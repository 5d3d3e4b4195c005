//! The kernel's side of a sequential writer, shared by the benches: plain
//! buffered `pwrite`, uncached buffered `pwritev2(RWF_DONTCACHE)`, and
//! O_DIRECT, one call per chunk ([`write_all_at`]: `wb bench dontcache`
//! times each call), or a whole file on a thread of its own
//! ([`BackgroundWriter`]: the RWF_DONTCACHE writer of `wb bench
//! interference`, as Debian's fio cannot do it).
//!
//! RWF_DONTCACHE (Linux 6.14) writes through the page cache like any
//! buffered write, but the folios are marked drop-behind: writeback of the
//! range is started soon, and the folios leave the cache once it completes.
//! A filesystem that does not support it (or an older kernel) fails the
//! call with EOPNOTSUPP; [`check_dontcache`] probes that up front and names
//! the filesystem, since nothing else would tell a user why.

use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// `RWF_DONTCACHE` from include/uapi/linux/fs.h:
/// `#define RWF_DONTCACHE ((__force __kernel_rwf_t)0x00000080)`.
pub const RWF_DONTCACHE: libc::c_int = 0x0000_0080;

/// Alignment of O_DIRECT buffers, offsets and lengths.
pub const DIRECT_ALIGN: usize = 4096;

/// How the kernel writer writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `pwrite` into the page cache, written back by the kernel.
    Buffered,
    /// `pwritev2(..., RWF_DONTCACHE)`: buffered, dropped once written back.
    Dontcache,
    /// O_DIRECT `pwrite`: no page cache (buffers, offsets and lengths
    /// aligned to [`DIRECT_ALIGN`]).
    Direct,
}

/// Creates (or truncates) `path` for writing in `mode`.
pub fn create(path: &Path, mode: Mode) -> io::Result<File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644);
    if mode == Mode::Direct {
        opts.custom_flags(libc::O_DIRECT | libc::O_CLOEXEC);
    } else {
        opts.custom_flags(libc::O_CLOEXEC);
    }
    opts.open(path)
}

/// Writes all of `buf` at `offset` in `mode` (short writes are continued).
/// For [`Mode::Direct`], `buf`, `offset` and `buf.len()` must be aligned.
pub fn write_all_at(file: &File, mode: Mode, buf: &[u8], offset: u64) -> io::Result<()> {
    match mode {
        Mode::Buffered | Mode::Direct => file.write_all_at(buf, offset),
        Mode::Dontcache => pwritev2_all(file, buf, offset, RWF_DONTCACHE),
    }
}

/// `pwritev2` of one buffer with `flags`, repeated until all of it is written.
fn pwritev2_all(file: &File, buf: &[u8], offset: u64, flags: libc::c_int) -> io::Result<()> {
    let mut done = 0usize;
    while done < buf.len() {
        let rest = &buf[done..];
        let iov = libc::iovec {
            iov_base: rest.as_ptr() as *mut libc::c_void,
            iov_len: rest.len(),
        };
        let at = libc::off64_t::try_from(offset + done as u64)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        // SAFETY: `iov` describes `rest`, a live borrowed slice of
        // `rest.len()` bytes that the kernel only reads (pwritev2 never
        // writes through iov_base, so the *mut cast is never used to
        // mutate); the iovec array has exactly the one element we pass as
        // the count, and both outlive the call. The fd is open for the
        // whole call because `file` is borrowed.
        let n = unsafe { libc::pwritev2(file.as_raw_fd(), &iov, 1, at, flags) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "pwritev2 wrote 0 bytes",
            ));
        }
        done += n as usize;
    }
    Ok(())
}

/// What a [`BackgroundWriter`] did.
#[derive(Clone, Copy, Debug)]
pub struct WriterOutcome {
    pub bytes: u64,
    /// From the first write to the end of the fdatasync.
    pub elapsed: Duration,
}

impl WriterOutcome {
    pub fn mib_s(&self) -> f64 {
        self.bytes as f64 / super::MIB / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// A sequential writer on its own thread: a new file of `size` bytes in
/// `chunk`-byte writes in one [`Mode`], then one fdatasync. Given a
/// `runtime`, it writes for that long instead (from its first write), over
/// the file again from its start each time it reaches `size` (fio's
/// time_based). Dropping it early (on an error elsewhere) stops the writer
/// and waits for it.
pub struct BackgroundWriter {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<WriterOutcome, String>>>,
}

impl BackgroundWriter {
    /// Creates (truncates) `path` and starts writing it. `chunk` must be a
    /// multiple of [`DIRECT_ALIGN`] for [`Mode::Direct`] (the last write is
    /// rounded up to it).
    pub fn start(
        path: &Path,
        mode: Mode,
        size: u64,
        chunk: usize,
        runtime: Option<Duration>,
    ) -> io::Result<BackgroundWriter> {
        let file = create(path, mode)?;
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let stop = Arc::new(AtomicBool::new(false));
        let stop_flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("wb-bench-kwriter".into())
            .spawn(move || {
                let span = WriteSpan {
                    size,
                    chunk,
                    runtime,
                };
                write_file(&file, &dir, mode, span, &stop_flag)
            })?;
        Ok(BackgroundWriter {
            stop,
            thread: Some(thread),
        })
    }

    pub fn has_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Waits for the writer; Err says why it failed (for RWF_DONTCACHE on
    /// a filesystem without it: [`unsupported_message`]).
    pub fn finish(mut self) -> Result<WriterOutcome, String> {
        let thread = self.thread.take().ok_or("kernel writer already joined")?;
        thread
            .join()
            .unwrap_or_else(|_| Err("the kernel writer thread panicked".into()))
    }
}

impl Drop for BackgroundWriter {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.store(true, Ordering::Relaxed);
            let _ = t.join();
        }
    }
}

/// What a [`BackgroundWriter`] writes: `size` bytes in `chunk`-byte
/// calls, or, with a `runtime`, calls for that long, from the file's start
/// again each time it reaches `size`.
#[derive(Clone, Copy, Debug)]
pub struct WriteSpan {
    pub size: u64,
    pub chunk: usize,
    pub runtime: Option<Duration>,
}

impl WriteSpan {
    /// The next write after `offset` of a writer that started at
    /// `started`: (offset, length), or None when done.
    pub fn next(&self, offset: u64, started: Instant) -> Option<(u64, usize)> {
        let offset = match self.runtime {
            Some(runtime) if started.elapsed() >= runtime => return None,
            Some(_) if offset >= self.size => 0,
            _ if offset >= self.size => return None,
            _ => offset,
        };
        Some((offset, (self.size - offset).min(self.chunk as u64) as usize))
    }
}

/// The body of a [`BackgroundWriter`].
fn write_file(
    file: &File,
    dir: &Path,
    mode: Mode,
    span: WriteSpan,
    stop: &AtomicBool,
) -> Result<WriterOutcome, String> {
    let fail = |what: &str, e: io::Error| {
        if mode == Mode::Dontcache && is_unsupported(&e) {
            unsupported_message(dir)
        } else {
            format!("kernel writer ({mode:?}): {what}: {e}")
        }
    };
    let mut buf = writeback::io::AlignedBuf::new(span.chunk);
    super::SplitMix64::seed_from_u64(0xb0b).fill_bytes(buf.as_mut_slice());
    let start = Instant::now();
    let (mut offset, mut bytes) = (0u64, 0u64);
    while let Some((at, len)) = span.next(offset, start) {
        if stop.load(Ordering::Relaxed) {
            return Err("stopped".into());
        }
        let len = if mode == Mode::Direct {
            len.div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN
        } else {
            len
        };
        buf.as_mut_slice()[..8].copy_from_slice(&at.to_ne_bytes());
        write_all_at(file, mode, &buf.as_slice()[..len], at)
            .map_err(|e| fail(&format!("write at {at}"), e))?;
        offset = at + len as u64;
        bytes += len as u64;
    }
    file.sync_data().map_err(|e| fail("fdatasync", e))?;
    Ok(WriterOutcome {
        bytes,
        elapsed: start.elapsed(),
    })
}

/// Whether `e` says the filesystem (or kernel) does not do RWF_DONTCACHE.
pub fn is_unsupported(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EOPNOTSUPP)
}

/// The explanation for an EOPNOTSUPP from an RWF_DONTCACHE write in `dir`.
pub fn unsupported_message(dir: &Path) -> String {
    format!(
        "RWF_DONTCACHE writes are not supported on {} ({} filesystem, kernel {}): \
         pwritev2 returned EOPNOTSUPP; uncached buffered writes need Linux 6.14 or later \
         and a filesystem that implements them (e.g. ext4, xfs, btrfs); pick a --dir on one",
        dir.display(),
        fs_type(dir).unwrap_or_else(|| "unknown".into()),
        kernel_release()
    )
}

/// Checks, with one 4 KiB RWF_DONTCACHE write to a scratch file in `dir`
/// (removed again), that the filesystem of `dir` takes uncached writes.
/// Err carries [`unsupported_message`] or the I/O error.
pub fn check_dontcache(dir: &Path) -> Result<(), String> {
    let path = dir.join(format!(".wb-dontcache-probe-{}", std::process::id()));
    let probe = super::cleanup::TempFile::new(path);
    let file = create(probe.path(), Mode::Dontcache)
        .map_err(|e| format!("creating {}: {e}", probe.path().display()))?;
    match write_all_at(&file, Mode::Dontcache, &[0u8; 4096], 0) {
        Ok(()) => Ok(()),
        Err(e) if is_unsupported(&e) => Err(unsupported_message(dir)),
        Err(e) => Err(format!(
            "RWF_DONTCACHE write to {}: {e}",
            probe.path().display()
        )),
    }
}

pub use super::mountinfo::fs_type;

/// The running kernel's release (`uname -r`), or "?".
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dontcache_flag_is_the_kernels() {
        assert_eq!(RWF_DONTCACHE, libc::RWF_DONTCACHE);
    }

    #[test]
    fn writes_in_every_mode_land() {
        let dir = std::env::temp_dir().join(format!("wb-kw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut modes = vec![Mode::Buffered];
        if writeback::io::supports_direct(&dir) {
            modes.push(Mode::Direct);
        }
        if check_dontcache(&dir).is_ok() {
            modes.push(Mode::Dontcache);
        }
        let mut buf = writeback::io::AlignedBuf::new(2 * DIRECT_ALIGN);
        buf.as_mut_slice().fill(7);
        for mode in modes {
            let path = dir.join("f");
            let file = create(&path, mode).expect("create");
            write_all_at(&file, mode, buf.as_slice(), DIRECT_ALIGN as u64).expect("write");
            drop(file);
            let data = std::fs::read(&path).expect("read back");
            assert_eq!(data.len(), 3 * DIRECT_ALIGN, "{mode:?}");
            assert!(data[DIRECT_ALIGN..].iter().all(|&b| b == 7), "{mode:?}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_span_wraps_until_its_time_and_ends_at_its_size_without_one() {
        let once = WriteSpan {
            size: (2 << 20) + 5,
            chunk: 1 << 20,
            runtime: None,
        };
        let now = Instant::now();
        assert_eq!(once.next(0, now), Some((0, 1 << 20)));
        assert_eq!(once.next(2 << 20, now), Some((2 << 20, 5)));
        assert_eq!(once.next((2 << 20) + 5, now), None);
        let timed = WriteSpan {
            runtime: Some(Duration::from_secs(3600)),
            ..once
        };
        assert_eq!(timed.next((2 << 20) + 5, now), Some((0, 1 << 20)));
        let over = WriteSpan {
            runtime: Some(Duration::ZERO),
            ..once
        };
        assert_eq!(over.next(0, now), None);
    }

    #[test]
    fn background_writer_writes_the_whole_file_and_syncs() {
        let dir = std::env::temp_dir().join(format!("wb-kw-bg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("w");
        let size = (3 << 20) + 5;
        let writer =
            BackgroundWriter::start(&path, Mode::Buffered, size, 1 << 20, None).expect("start");
        let outcome = writer.finish().expect("the writer finishes");
        assert_eq!(outcome.bytes, size);
        assert!(outcome.mib_s() > 0.0);
        assert_eq!(std::fs::metadata(&path).expect("file").len(), size);
        // Until a time: over the file again, which keeps its size.
        let runtime = Duration::from_millis(300);
        let writer = BackgroundWriter::start(&path, Mode::Buffered, size, 1 << 20, Some(runtime))
            .expect("start");
        let outcome = writer.finish().expect("the writer finishes");
        assert!(outcome.elapsed >= runtime);
        assert!(outcome.bytes > 2 * size, "{} bytes", outcome.bytes);
        assert_eq!(std::fs::metadata(&path).expect("file").len(), size);
        // Dropped while running: stops without a fuss.
        let writer = BackgroundWriter::start(&path, Mode::Buffered, 64 << 30, 1 << 20, None);
        drop(writer);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
