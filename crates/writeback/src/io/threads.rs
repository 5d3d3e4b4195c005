//! Thread-pool backend: `workers` threads doing blocking `pread`/`pwrite`
//! (`pwritev` for lent pages) from one bounded queue of [`QUEUE_DEPTH`] ops.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::backend::{at_eof, enqueue, read_now, send_done, IoBackend, IoDone, IoOp, QUEUE_DEPTH};
use super::pages::{IoBuf, IoPages};

/// Blocking-syscall backend, named `"threads"`.
pub struct ThreadBackend {
    queue: Option<SyncSender<IoOp>>,
    workers: Vec<JoinHandle<()>>,
    completions: Sender<IoDone>,
}

impl ThreadBackend {
    /// Starts `workers` threads (at least one).
    ///
    /// # Panics
    /// Panics if the OS refuses to spawn a thread.
    pub fn new(completions: Sender<IoDone>, workers: usize) -> Self {
        let (tx, rx) = mpsc::sync_channel::<IoOp>(QUEUE_DEPTH);
        let rx = Arc::new(Mutex::new(rx));
        let workers = (0..workers.max(1))
            .map(|i| {
                let rx = Arc::clone(&rx);
                let done = completions.clone();
                std::thread::Builder::new()
                    .name(format!("wb-io-{i}"))
                    .spawn(move || worker(&rx, &done))
                    .expect("spawn I/O worker thread")
            })
            .collect();
        Self {
            queue: Some(tx),
            workers,
            completions,
        }
    }
}

fn worker(rx: &Mutex<Receiver<IoOp>>, done: &Sender<IoDone>) {
    loop {
        // Hold the lock only while waiting for the next op, not during I/O.
        let next = match rx.lock() {
            Ok(guard) => guard.recv(),
            // Another worker panicked while holding the lock (it cannot: recv
            // does not panic); keep serving with the inner receiver anyway.
            Err(poisoned) => poisoned.into_inner().recv(),
        };
        let Ok(op) = next else {
            return; // sender dropped and queue drained: shutdown
        };
        // Reads as a caller would do them (`read_now`); writes here.
        let completion = read_now(op).unwrap_or_else(|op| {
            let result = match &op.buf {
                IoBuf::Owned(buf) => write_all_at(&op.file, buf.as_slice(), op.offset),
                IoBuf::Lent(pages) => write_lent_at(&op.file, pages, op.offset),
            };
            IoDone {
                id: op.id,
                buf: op.buf,
                result,
            }
        });
        send_done(done, completion);
    }
}

/// Writes all of `buf` at `offset`, continuing after short writes.
pub(crate) fn write_all_at(file: &File, buf: &[u8], offset: u64) -> io::Result<usize> {
    let mut done = 0usize;
    while done < buf.len() {
        match file.write_at(&buf[done..], offset + done as u64) {
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
    Ok(done)
}

/// Writes all of the lent `pages` at `offset` with `pwritev`, continuing
/// after short writes.
pub(crate) fn write_lent_at(file: &File, pages: &IoPages, offset: u64) -> io::Result<usize> {
    let mut done = 0usize;
    while done < pages.len() {
        let iov = pages.iovecs_from(done, usize::MAX);
        let at = libc::off_t::try_from(offset + done as u64)
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
    Ok(done)
}

/// Fills `buf` from `offset`; stops early (zeroing the tail) at end of file.
pub(crate) fn read_at_eof_ok(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0usize;
    while done < buf.len() {
        let pos = offset + done as u64;
        match file.read_at(&mut buf[done..], pos) {
            Ok(0) => break,
            Ok(n) => {
                done += n;
                // A short read usually means EOF; with O_DIRECT, continuing at
                // an unaligned position would fail with EINVAL, so check.
                if done < buf.len() && at_eof(file, offset + done as u64)? {
                    break;
                }
            }
            Err(e) if retryable(&e) => {}
            Err(e) => return Err(e),
        }
    }
    buf[done..].fill(0);
    Ok(done)
}

fn retryable(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
    )
}

impl IoBackend for ThreadBackend {
    fn submit(&self, op: IoOp) {
        // `queue` is only taken in Drop, and workers only exit once it is
        // gone, so queueing fails only if every worker panicked.
        enqueue(
            self.queue.as_ref(),
            &self.completions,
            op,
            "I/O worker threads have exited",
        );
    }

    fn name(&self) -> &'static str {
        "threads"
    }

    fn read_on_caller(&self, op: IoOp) -> Result<IoDone, IoOp> {
        read_now(op)
    }

    fn writes_on_caller(&self, ops: Vec<IoOp>) -> (Vec<IoDone>, Vec<IoOp>) {
        // One after the other: this backend is chosen where io_uring is
        // not (or not wanted).
        super::backend::writes_now(ops, false)
    }
}

impl Drop for ThreadBackend {
    fn drop(&mut self) {
        // Closing the queue lets workers finish what is queued, then exit.
        self.queue = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}
