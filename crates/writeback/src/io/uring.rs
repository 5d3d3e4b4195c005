//! io_uring backend: one thread owns a ring of [`RING_ENTRIES`] entries,
//! takes ops from a bounded queue of [`QUEUE_DEPTH`], submits them
//! (`user_data` = op id) and reaps their completions itself.
//!
//! The ring thread sleeps in `io_uring_enter` waiting for at least one
//! completion. To wake it when a new op is queued, it keeps a `POLL_ADD` on
//! an eventfd armed in the ring (`user_data` = `u64::MAX`, reserved) and
//! [`IoBackend::submit`] writes to that eventfd after queueing.
//!
//! At most `RING_ENTRIES - 1` ops are in flight (one slot is for the wake
//! poll), so the submission queue can never overflow and the completion
//! queue (twice as large) never drops entries.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;

use io_uring::{opcode, squeue, types, IoUring, Probe};

use super::aligned::AlignedBuf;
use super::backend::{at_eof, enqueue, send_done, IoBackend, IoDone, IoOp, QUEUE_DEPTH};

/// Submission-queue size of the ring.
pub const RING_ENTRIES: u32 = 256;
/// Ops in flight at once (one ring slot is kept for the wake poll).
const MAX_IN_FLIGHT: usize = RING_ENTRIES as usize - 1;
/// `user_data` of the eventfd poll; not usable as an op id.
const WAKE_TOKEN: u64 = u64::MAX;
/// Largest transfer asked of the kernel in one SQE (lengths are `u32`);
/// bigger buffers are transferred in several steps.
const MAX_CHUNK_BYTES: usize = 1 << 30;
/// Times an op is resubmitted after `EAGAIN`/`EINTR` before giving up.
const MAX_RETRIES: u32 = 1000;
/// Consecutive unexpected `io_uring_enter` failures before the ring is
/// declared dead.
const MAX_ENTER_FAILURES: u32 = 100;

/// Creates a ring and checks it supports the opcodes this backend uses.
fn setup_ring() -> io::Result<IoUring> {
    let ring = IoUring::new(RING_ENTRIES)?;
    let mut probe = Probe::new();
    ring.submitter().register_probe(&mut probe)?;
    for (code, name) in [
        (opcode::Read::CODE, "READ"),
        (opcode::Write::CODE, "WRITE"),
        (opcode::PollAdd::CODE, "POLL_ADD"),
    ] {
        if !probe.is_supported(code) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("io_uring opcode {name} not supported by this kernel"),
            ));
        }
    }
    Ok(ring)
}

/// Checks that an io_uring can be set up here (creates and drops a ring).
pub(crate) fn probe() -> io::Result<()> {
    setup_ring().map(drop)
}

/// The io_uring backend, named `"io_uring"`.
pub struct UringBackend {
    queue: Option<SyncSender<IoOp>>,
    /// eventfd polled by the ring thread; written to wake it.
    wake: Arc<File>,
    thread: Option<JoinHandle<()>>,
    completions: Sender<IoDone>,
}

impl UringBackend {
    /// Sets up the ring and starts its thread. Fails if io_uring is not
    /// available (old kernel, seccomp, `io_uring_disabled` sysctl, ...).
    pub fn new(completions: Sender<IoDone>) -> io::Result<Self> {
        let ring = setup_ring()?;
        // SAFETY: plain syscall with no pointer arguments.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `efd` is a freshly created, valid descriptor that nothing
        // else owns; `OwnedFd` becomes its sole owner and closes it once.
        let wake = Arc::new(File::from(unsafe { OwnedFd::from_raw_fd(efd) }));
        let (tx, rx) = mpsc::sync_channel::<IoOp>(QUEUE_DEPTH);
        let thread = {
            let wake = Arc::clone(&wake);
            let done = completions.clone();
            std::thread::Builder::new()
                .name("wb-io-uring".into())
                .spawn(move || RingThread::new(ring, rx, wake, done).run())?
        };
        Ok(Self {
            queue: Some(tx),
            wake,
            thread: Some(thread),
            completions,
        })
    }

    fn wake(&self) {
        // An eventfd write only fails (EAGAIN) if the counter would overflow
        // 2^64-2, in which case it is already readable: ignore errors.
        let _ = (&*self.wake).write(&1u64.to_ne_bytes());
    }
}

impl IoBackend for UringBackend {
    fn submit(&self, op: IoOp) {
        // The ring thread exits only after a panic.
        let queued = enqueue(
            self.queue.as_ref(),
            &self.completions,
            op,
            "io_uring thread has exited",
        );
        if queued {
            self.wake();
        }
    }

    fn name(&self) -> &'static str {
        "io_uring"
    }
}

impl Drop for UringBackend {
    fn drop(&mut self) {
        // Close the queue, then wake the ring thread so it notices; it
        // performs what is queued, waits for what is in flight, and exits.
        self.queue = None;
        self.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// An op the kernel may be using: `done` bytes transferred so far.
struct InFlight {
    op: IoOp,
    done: usize,
    retries: u32,
}

/// Ops handed to the kernel, by id. Their buffers and files must stay alive
/// until the op's final CQE is reaped.
#[derive(Default)]
struct InFlightMap(HashMap<u64, InFlight>);

impl Drop for InFlightMap {
    fn drop(&mut self) {
        // Only non-empty if the ring thread unwinds (panic) with ops still in
        // the kernel's hands. Their buffers may still be written by the
        // kernel, so they must never be freed: leak them.
        for (_, fl) in self.0.drain() {
            std::mem::forget(fl);
        }
    }
}

struct RingThread {
    in_flight: InFlightMap,
    ring: IoUring,
    rx: Receiver<IoOp>,
    wake: Arc<File>,
    done_tx: Sender<IoDone>,
    wake_armed: bool,
    closed: bool,
}

enum Step {
    /// The op needs another SQE (remainder, or retry after EAGAIN).
    Resubmit,
    /// The op is finished with this result.
    Finish(io::Result<usize>),
}

impl RingThread {
    fn new(ring: IoUring, rx: Receiver<IoOp>, wake: Arc<File>, done_tx: Sender<IoDone>) -> Self {
        Self {
            in_flight: InFlightMap::default(),
            ring,
            rx,
            wake,
            done_tx,
            wake_armed: false,
            closed: false,
        }
    }

    fn run(mut self) {
        let mut enter_failures = 0u32;
        loop {
            if !self.closed && !self.wake_armed {
                let sqe =
                    opcode::PollAdd::new(types::Fd(self.wake.as_raw_fd()), libc::POLLIN as u32)
                        .build()
                        .user_data(WAKE_TOKEN);
                // SAFETY: a poll SQE references no user memory, only the
                // eventfd, which `self.wake` keeps open for the thread's life
                // (and the kernel holds its own file reference anyway).
                if unsafe { self.push(&sqe) }.is_ok() {
                    self.wake_armed = true;
                }
            }
            while !self.closed && self.in_flight.0.len() < MAX_IN_FLIGHT {
                match self.rx.try_recv() {
                    Ok(op) => self.start(op),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => self.closed = true,
                }
            }
            if self.closed && self.in_flight.0.is_empty() {
                return;
            }
            match self.ring.submit_and_wait(1) {
                Ok(_) => enter_failures = 0,
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                    ) => {}
                Err(e) => {
                    enter_failures += 1;
                    if enter_failures >= MAX_ENTER_FAILURES {
                        self.die(&e);
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            let cqes: Vec<(u64, i32)> = self
                .ring
                .completion()
                .map(|c| (c.user_data(), c.result()))
                .collect();
            for (id, res) in cqes {
                if id == WAKE_TOKEN {
                    self.wake_armed = false;
                    // Reset the eventfd counter; EAGAIN (already 0) is fine.
                    let _ = (&*self.wake).read(&mut [0u8; 8]);
                } else {
                    self.complete(id, res);
                }
            }
        }
    }

    /// Pushes one SQE, flushing the submission queue once if it is full.
    ///
    /// # Safety
    /// Every buffer the SQE points to must stay valid (and, for reads, not
    /// otherwise accessed) until its CQE is reaped.
    unsafe fn push(&mut self, sqe: &squeue::Entry) -> io::Result<()> {
        // SAFETY: forwarded to the caller's contract.
        if unsafe { self.ring.submission().push(sqe) }.is_ok() {
            return Ok(());
        }
        self.ring.submit()?;
        // SAFETY: forwarded to the caller's contract.
        unsafe { self.ring.submission().push(sqe) }
            .map_err(|_| io::Error::other("io_uring submission queue full"))
    }

    fn start(&mut self, op: IoOp) {
        let id = op.id;
        if id == WAKE_TOKEN || self.in_flight.0.contains_key(&id) {
            let why = if id == WAKE_TOKEN {
                "op id u64::MAX is reserved by the io_uring backend".to_string()
            } else {
                format!("op id {id} is already in flight")
            };
            send_done(
                &self.done_tx,
                IoDone {
                    id,
                    buf: op.buf,
                    result: Err(io::Error::new(io::ErrorKind::InvalidInput, why)),
                },
            );
            return;
        }
        self.in_flight.0.insert(
            id,
            InFlight {
                op,
                done: 0,
                retries: 0,
            },
        );
        self.submit_remainder(id);
    }

    /// Queues an SQE for the part of op `id` not yet transferred.
    fn submit_remainder(&mut self, id: u64) {
        let Some(fl) = self.in_flight.0.get_mut(&id) else {
            return;
        };
        let len = (fl.op.buf.len() - fl.done).min(MAX_CHUNK_BYTES);
        let offset = fl.op.offset + fl.done as u64;
        let fd = types::Fd(fl.op.file.as_raw_fd());
        // `fl.done < buf.len()` here, so the pointer stays inside the block.
        let ptr = fl.op.buf.as_mut_ptr().wrapping_add(fl.done);
        let sqe = if fl.op.write {
            opcode::Write::new(fd, ptr.cast_const(), len as u32)
                .offset(offset)
                .build()
        } else {
            opcode::Read::new(fd, ptr, len as u32)
                .offset(offset)
                .build()
        }
        .user_data(id);
        // SAFETY: `ptr..ptr+len` lies inside the heap block of
        // `fl.op.buf` (done + len <= buf.len()). That `AlignedBuf` is owned
        // by the `InFlight` entry in `self.in_flight`, which is removed (and
        // the buffer handed back) only in `finish`, called when the CQE for
        // this SQE has been reaped or when the push below fails (then the
        // kernel never saw the SQE). Moving the `AlignedBuf` inside the map
        // does not move its heap block. Nothing else touches the buffer
        // meanwhile. If the thread unwinds, `InFlightMap::drop` leaks the
        // buffers instead of freeing them. The fd stays open because the
        // entry also holds the `Arc<File>`.
        if let Err(e) = unsafe { self.push(&sqe) } {
            self.finish(id, Err(e));
        }
    }

    /// Handles the CQE `res` of op `id`.
    fn complete(&mut self, id: u64, res: i32) {
        let Some(fl) = self.in_flight.0.get_mut(&id) else {
            return; // not ours (cannot happen)
        };
        let total = fl.op.buf.len();
        let step = if res < 0 {
            let errno = -res;
            if matches!(errno, libc::EAGAIN | libc::EINTR) && fl.retries < MAX_RETRIES {
                fl.retries += 1;
                Step::Resubmit
            } else {
                Step::Finish(Err(io::Error::from_raw_os_error(errno)))
            }
        } else {
            let n = res as usize;
            fl.done += n;
            if fl.done >= total {
                Step::Finish(Ok(total))
            } else if fl.op.write {
                if n == 0 {
                    Step::Finish(Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "write returned 0 bytes",
                    )))
                } else {
                    Step::Resubmit
                }
            } else if n == 0 {
                Step::Finish(Ok(fl.done)) // at or past end of file
            } else {
                // Short read: EOF unless the file extends further (with
                // O_DIRECT an unaligned continuation would fail, so check).
                match at_eof(&fl.op.file, fl.op.offset + fl.done as u64) {
                    Ok(true) => Step::Finish(Ok(fl.done)),
                    Ok(false) => Step::Resubmit,
                    Err(e) => Step::Finish(Err(e)),
                }
            }
        };
        match step {
            Step::Resubmit => self.submit_remainder(id),
            Step::Finish(result) => self.finish(id, result),
        }
    }

    /// Removes op `id` (whose buffer the kernel no longer uses) and sends its
    /// completion; a successful read has the tail after the data zeroed.
    fn finish(&mut self, id: u64, result: io::Result<usize>) {
        let Some(InFlight { mut op, .. }) = self.in_flight.0.remove(&id) else {
            return;
        };
        if let (false, Ok(n)) = (op.write, &result) {
            op.buf.as_mut_slice()[*n..].fill(0);
        }
        send_done(
            &self.done_tx,
            IoDone {
                id,
                buf: op.buf,
                result,
            },
        );
    }

    /// The ring is unusable: fail everything. Buffers the kernel may still
    /// reference are leaked and replaced by fresh ones in the completions;
    /// later ops are failed as they arrive.
    fn die(mut self, cause: &io::Error) {
        eprintln!("writeback: io_uring ring failed ({cause}); failing all I/O");
        let err = || io::Error::other(format!("io_uring ring failed: {cause}"));
        for (id, fl) in self.in_flight.0.drain() {
            let buf = AlignedBuf::new(fl.op.buf.len());
            std::mem::forget(fl);
            send_done(
                &self.done_tx,
                IoDone {
                    id,
                    buf,
                    result: Err(err()),
                },
            );
        }
        while let Ok(op) = self.rx.recv() {
            send_done(
                &self.done_tx,
                IoDone {
                    id: op.id,
                    buf: op.buf,
                    result: Err(err()),
                },
            );
        }
    }
}
