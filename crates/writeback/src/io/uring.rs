//! io_uring backend: one thread owns a ring of [`RING_ENTRIES`] entries,
//! takes ops from a bounded queue of [`QUEUE_DEPTH`], submits them
//! (`user_data` = op id) and reaps their completions itself.
//!
//! The ring thread sleeps in `io_uring_enter` waiting for at least one
//! completion. To wake it when a new op is queued, it keeps a `POLL_ADD` on
//! an eventfd armed in the ring (`user_data` = `u64::MAX`, reserved) and
//! [`IoBackend::submit`] writes to that eventfd after queueing.
//!
//! At most `RING_ENTRIES - 1` ops are in flight (one slot is for the
//! wake poll), so the submission queue can never overflow and the
//! completion queue (twice as large) never drops entries.
//!
//! The ring carries ops out as they come: the order of a file's writes
//! that make it longer is the engine's (it hands them over one at a time
//! per file, `extending_writes`, wb-engine's dispatch/extending.rs). One
//! the kernel will run synchronously ([`IoOp::blocks`]) goes straight to
//! a worker. A write's partial last page goes after its whole pages,
//! through a descriptor without O_DIRECT (`tail.rs`).

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;

use io_uring::{opcode, squeue, types, IoUring, Probe};

use super::aligned::AlignedBuf;
use super::backend::{
    at_eof, enqueue, lent_read_error, send_done, IoBackend, IoDone, IoOp, QUEUE_DEPTH,
};
use super::pages::IoBuf;
use super::tail;

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

/// Creates a ring and checks it supports the opcodes this backend needs.
fn setup_ring() -> io::Result<IoUring> {
    let ring = IoUring::new(RING_ENTRIES)?;
    let mut probe = Probe::new();
    ring.submitter().register_probe(&mut probe)?;
    for (code, name) in [
        (opcode::Read::CODE, "READ"),
        (opcode::Write::CODE, "WRITE"),
        (opcode::Writev::CODE, "WRITEV"),
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

    /// A blocking pread: no ring involved (reads need no ordering with
    /// the writes in flight: the engine never reads pages it has cached).
    fn read_on_caller(&self, op: IoOp) -> Result<IoDone, IoOp> {
        super::on_caller::read_now(op)
    }

    /// A commit's whole-page writes, on the caller's own ring.
    fn writes_on_caller(&self, ops: Vec<IoOp>) -> (Vec<IoDone>, Vec<IoOp>) {
        super::on_caller::writes_now(ops, true)
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
    /// For lent pages: the iovecs of the SQE in flight (kept until its CQE).
    iovecs: Vec<libc::iovec>,
    retries: u32,
    /// A descriptor of the file without O_DIRECT, for the op's partial
    /// last page (`tail.rs`), kept until that page's CQE.
    tail: Option<File>,
}

impl InFlight {
    /// The SQE (without its user_data) for the part of the op not yet
    /// transferred: its partial last page through `tail`, the descriptor
    /// without O_DIRECT (`in_tail`; the caller has opened it), else at most
    /// MAX_CHUNK_BYTES of its `whole` pages through its own descriptor.
    /// Lent pages go by the iovecs kept in `iovecs`, to be left untouched
    /// until the SQE's CQE.
    #[inline]
    fn next_sqe(&mut self, whole: usize, in_tail: bool) -> squeue::Entry {
        let (fd, len) = match &self.tail {
            Some(tail) if in_tail => (tail.as_raw_fd(), self.op.len - self.done),
            _ => (
                self.op.file.as_raw_fd(),
                (whole - self.done).min(MAX_CHUNK_BYTES),
            ),
        };
        let offset = self.op.offset + self.done as u64;
        let fd = types::Fd(fd);
        match (&mut self.op.buf, self.op.write) {
            (IoBuf::Lent(pages), _) => {
                // Reads into lent pages were refused in `start`.
                self.iovecs = pages.iovecs_from(self.done, len);
                opcode::Writev::new(fd, self.iovecs.as_ptr(), self.iovecs.len() as u32)
                    .offset(offset)
                    .build()
            }
            (IoBuf::Owned(buf), write) => {
                // `self.done < op.len <= buf.len()` here, so the pointer
                // stays inside the block.
                let ptr = buf.as_mut_ptr().wrapping_add(self.done);
                if write {
                    opcode::Write::new(fd, ptr.cast_const(), len as u32)
                        .offset(offset)
                        .build()
                } else {
                    opcode::Read::new(fd, ptr, len as u32)
                        .offset(offset)
                        .build()
                }
            }
        }
    }
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

enum Next {
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

    fn run(&mut self) {
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
        let refusal = if id == WAKE_TOKEN {
            Some(io::Error::new(
                io::ErrorKind::InvalidInput,
                "op id u64::MAX is reserved by the io_uring backend",
            ))
        } else if self.in_flight.0.contains_key(&id) {
            let why = format!("op id {id} is already in flight");
            Some(io::Error::new(io::ErrorKind::InvalidInput, why))
        } else if let (IoBuf::Lent(_), false) = (&op.buf, op.write) {
            Some(lent_read_error())
        } else {
            None
        };
        if let Some(e) = refusal {
            let done = IoDone {
                id,
                buf: op.buf,
                result: Err(e),
            };
            send_done(&self.done_tx, done);
            return;
        }
        self.launch(op);
    }

    /// Hands `op` (whose id no op in flight uses) to the kernel.
    fn launch(&mut self, op: IoOp) {
        let id = op.id;
        let Entry::Vacant(slot) = self.in_flight.0.entry(id) else {
            // Cannot happen (`start` checks ids), and must not
            // replace an op the kernel may be using: fail this one.
            let why = format!("op id {id} is already in flight");
            let result = Err(io::Error::new(io::ErrorKind::InvalidInput, why));
            let done = IoDone {
                id,
                buf: op.buf,
                result,
            };
            send_done(&self.done_tx, done);
            return;
        };
        slot.insert(InFlight {
            op,
            done: 0,
            iovecs: Vec::new(),
            retries: 0,
            tail: None,
        });
        self.submit_remainder(id);
    }

    /// Queues an SQE for the part of op `id` not yet transferred: its
    /// whole pages through its own descriptor, then its partial last page
    /// through one without O_DIRECT (`tail.rs`).
    fn submit_remainder(&mut self, id: u64) {
        let Some(fl) = self.in_flight.0.get_mut(&id) else {
            return;
        };
        let whole = tail::whole_bytes(&fl.op);
        let in_tail = fl.done >= whole;
        if in_tail && fl.tail.is_none() {
            match tail::open_buffered(&fl.op.file) {
                Ok(file) => fl.tail = Some(file),
                Err(e) => {
                    // Written here, with blocking calls (rare: see tail.rs).
                    let result = tail::write_whole_and_cut(&fl.op, whole, &e).map(|()| fl.op.len);
                    self.finish(id, result);
                    return;
                }
            }
        }
        let sqe = fl.next_sqe(whole, in_tail).user_data(id);
        // A write the kernel runs synchronously (an extending one on ext4)
        // always ends up on an io-wq worker: skip the attempt to issue it
        // without blocking. Its partial last page goes through the page
        // cache, which does not block.
        let sqe = if fl.op.blocks && !in_tail {
            sqe.flags(squeue::Flags::ASYNC)
        } else {
            sqe
        };
        // SAFETY: for an owned buffer, `ptr..ptr+len` (`InFlight::next_sqe`)
        // lies inside the heap block of `fl.op.buf` (done + len <= op.len <=
        // buf.len()); for lent pages, the iovecs (in `fl.iovecs`, not touched
        // again before this SQE's CQE) point into memory the `IoPages` keeps
        // allocated and readable (IoPages::new), and the kernel only reads
        // it. Both are owned by the `InFlight` entry in `self.in_flight`,
        // which is removed (and the buffer handed back) only in `finish`,
        // called when the CQE for this SQE has been reaped or when the push
        // below fails (then the kernel never saw the SQE). Moving the
        // `AlignedBuf` or the Vec inside the map does not move their heap
        // blocks. Nothing else touches an owned buffer meanwhile. If the
        // thread unwinds, `InFlightMap::drop` leaks the buffers instead of
        // freeing them. The fd stays open because the entry also holds the
        // `Arc<File>` and the tail's `File`.
        if let Err(e) = unsafe { self.push(&sqe) } {
            self.finish(id, Err(e));
        }
    }

    /// Handles the CQE `res` of op `id`.
    fn complete(&mut self, id: u64, res: i32) {
        let Some(fl) = self.in_flight.0.get_mut(&id) else {
            return; // not ours (cannot happen)
        };
        let total = fl.op.len;
        let step = if res < 0 {
            let errno = -res;
            if matches!(errno, libc::EAGAIN | libc::EINTR) && fl.retries < MAX_RETRIES {
                fl.retries += 1;
                Next::Resubmit
            } else {
                Next::Finish(Err(io::Error::from_raw_os_error(errno)))
            }
        } else {
            let n = res as usize;
            fl.done += n;
            if fl.done >= total {
                Next::Finish(Ok(total))
            } else if fl.op.write {
                if n == 0 {
                    Next::Finish(Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "write returned 0 bytes",
                    )))
                } else {
                    Next::Resubmit
                }
            } else if n == 0 {
                Next::Finish(Ok(fl.done)) // at or past end of file
            } else {
                // Short read: EOF unless the file extends further (with
                // O_DIRECT an unaligned continuation would fail, so check).
                match at_eof(&fl.op.file, fl.op.offset + fl.done as u64) {
                    Ok(true) => Next::Finish(Ok(fl.done)),
                    Ok(false) => Next::Resubmit,
                    Err(e) => Next::Finish(Err(e)),
                }
            }
        };
        match step {
            Next::Resubmit => self.submit_remainder(id),
            Next::Finish(result) => self.finish(id, result),
        }
    }

    /// Removes op `id` (whose buffer the kernel no longer uses) and sends its
    /// completion; a successful read has the tail after the data zeroed.
    fn finish(&mut self, id: u64, result: io::Result<usize>) {
        let Some(InFlight { mut op, .. }) = self.in_flight.0.remove(&id) else {
            return;
        };
        if let (IoBuf::Owned(buf), false, Ok(n)) = (&mut op.buf, op.write, &result) {
            buf.as_mut_slice()[*n..].fill(0);
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
    fn die(&mut self, cause: &io::Error) {
        eprintln!("writeback: io_uring ring failed ({cause}); failing all I/O");
        let err = || io::Error::other(format!("io_uring ring failed: {cause}"));
        for (id, fl) in self.in_flight.0.drain() {
            let buf = match &fl.op.buf {
                IoBuf::Owned(b) => IoBuf::Owned(AlignedBuf::new(b.len())),
                // The leaked original keeps the pages' owner alive.
                IoBuf::Lent(pages) => IoBuf::Lent(pages.clone()),
            };
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
        // Then whatever is still queued for us, until the sender is gone.
        for op in self.rx.iter() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{open_direct, supports_direct, PAGE_SIZE};
    use std::os::unix::fs::FileExt;
    use std::path::PathBuf;

    /// A fresh directory beside the test binary (on the disk the build is
    /// on, as `/tmp` may be a tmpfs), or `None` with a note without O_DIRECT.
    fn test_dir(name: &str) -> Option<PathBuf> {
        let exe = std::env::current_exe().unwrap();
        let dir = exe
            .parent()
            .unwrap()
            .join(format!("wb-uring-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        if supports_direct(&dir) {
            Some(dir)
        } else {
            let _ = std::fs::remove_dir_all(&dir);
            wb_testkit::skip(&format!("{name}: {} has no O_DIRECT", dir.display()));
            None
        }
    }

    fn write_op(id: u64, file: &Arc<File>, offset: u64, fill: u8) -> IoOp {
        let mut buf = AlignedBuf::new(4 * PAGE_SIZE);
        buf.as_mut_slice().fill(fill);
        IoOp {
            id,
            file: Arc::clone(file),
            write: true,
            offset,
            buf: buf.into(),
            len: 4 * PAGE_SIZE,
            blocks: false,
        }
    }

    /// `pages` pages filled with `fill`, lent (as the cache's frames are).
    fn lent_pages(pages: usize, fill: u8) -> crate::io::IoPages {
        let frames = Arc::new({
            let mut b = AlignedBuf::new(pages * PAGE_SIZE);
            b.as_mut_slice().fill(fill);
            b
        });
        let owner: Arc<dyn Send + Sync> = frames.clone();
        // SAFETY: the pages lie inside `frames`, which `owner` keeps alive.
        unsafe {
            crate::io::IoPages::new(
                owner,
                (0..pages).map(|p| (frames.as_ptr().wrapping_add(p * PAGE_SIZE), PAGE_SIZE)),
            )
        }
        .unwrap()
    }

    /// A ring thread driven by the test (`start`, then `run` to the end),
    /// or None (skipped) without O_DIRECT or io_uring.
    struct Rig {
        dir: PathBuf,
        ring: RingThread,
        ops_tx: SyncSender<IoOp>,
        done_rx: Receiver<IoDone>,
    }

    fn rig(name: &str) -> Option<Rig> {
        let dir = test_dir(name)?;
        let ring = match setup_ring() {
            Ok(ring) => ring,
            Err(e) => {
                wb_testkit::skip(&format!("io_uring unavailable: {e}"));
                return None;
            }
        };
        // SAFETY: plain syscall with no pointer arguments.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        assert!(efd >= 0);
        // SAFETY: `efd` is a fresh descriptor nothing else owns.
        let wake = Arc::new(File::from(unsafe { OwnedFd::from_raw_fd(efd) }));
        let (ops_tx, ops_rx) = mpsc::sync_channel(QUEUE_DEPTH);
        let (done_tx, done_rx) = mpsc::channel();
        let ring = RingThread::new(ring, ops_rx, wake, done_tx);
        Some(Rig {
            dir,
            ring,
            ops_tx,
            done_rx,
        })
    }

    /// Three writes making one file longer and one another, started before
    /// the ring runs: the ring holds none back (their order is the
    /// engine's, wb-engine's dispatch/extending.rs), those marked as
    /// blocking in the kernel included. An id in flight is refused. All
    /// complete, and each file holds its writes.
    #[test]
    fn writes_that_make_a_file_longer_all_go_at_once() {
        let Some(mut rig) = rig("growing") else {
            return;
        };
        let file = Arc::new(open_direct(&rig.dir.join("f"), true).unwrap());
        let other = Arc::new(open_direct(&rig.dir.join("g"), true).unwrap());
        let chunk = 4 * PAGE_SIZE as u64;
        for id in 0..3 {
            rig.ring.start(IoOp {
                blocks: id % 2 == 1,
                ..write_op(id, &file, id * chunk, id as u8 + 1)
            });
        }
        rig.ring.start(write_op(10, &other, 0, 0xAA));
        assert_eq!(rig.ring.in_flight.0.len(), 4, "none held");
        // An id in flight is in use: an op reusing it fails at once.
        rig.ring.start(write_op(2, &file, 0, 9));
        let dup = rig.done_rx.try_recv().expect("duplicate failed at once");
        assert_eq!(dup.id, 2);
        assert_eq!(dup.result.unwrap_err().kind(), io::ErrorKind::InvalidInput);
        let Rig {
            dir,
            mut ring,
            ops_tx,
            done_rx,
        } = rig;
        drop(ops_tx);
        ring.run();
        let mut ids: Vec<u64> = done_rx
            .try_iter()
            .map(|d| {
                assert_eq!(d.result.expect("write succeeds"), chunk as usize);
                d.id
            })
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, [0, 1, 2, 10]);
        assert_eq!(file.metadata().unwrap().len(), 3 * chunk);
        let mut back = AlignedBuf::new(3 * chunk as usize);
        file.read_exact_at(back.as_mut_slice(), 0).unwrap();
        for (i, page) in back.as_slice().chunks(chunk as usize).enumerate() {
            assert!(page.iter().all(|&b| b == i as u8 + 1), "chunk {i}");
        }
        drop((file, other));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A write whose last page is partial grows the file to its last byte
    /// (the page's bytes past it are not written), from owned buffers and
    /// lent pages alike. (Two files: the ring does not order two writes of
    /// one page, which the engine never has in flight at once.)
    #[test]
    fn a_partial_last_page_ends_the_file_at_the_writes_last_byte() {
        let Some(rig) = rig("tail") else {
            return;
        };
        let file = Arc::new(open_direct(&rig.dir.join("f"), true).unwrap());
        let other = Arc::new(open_direct(&rig.dir.join("g"), true).unwrap());
        let lent = lent_pages(2, 0x33);
        let Rig {
            dir,
            mut ring,
            ops_tx,
            done_rx,
        } = rig;
        ring.start(IoOp {
            len: 2 * PAGE_SIZE + 100,
            ..write_op(1, &file, 0, 0x11)
        });
        ring.start(IoOp {
            buf: IoBuf::Lent(lent),
            len: PAGE_SIZE + 7,
            ..write_op(2, &other, 2 * PAGE_SIZE as u64, 0)
        });
        drop(ops_tx);
        ring.run();
        let mut lens: Vec<(u64, usize)> = done_rx
            .try_iter()
            .map(|d| (d.id, d.result.unwrap()))
            .collect();
        lens.sort_unstable();
        assert_eq!(lens, [(1, 2 * PAGE_SIZE + 100), (2, PAGE_SIZE + 7)]);
        let bytes = std::fs::read(dir.join("f")).unwrap();
        assert_eq!(bytes.len(), 2 * PAGE_SIZE + 100);
        assert!(bytes.iter().all(|&b| b == 0x11));
        let bytes = std::fs::read(dir.join("g")).unwrap();
        assert_eq!(bytes.len(), 3 * PAGE_SIZE + 7);
        assert!(bytes[..2 * PAGE_SIZE].iter().all(|&b| b == 0));
        assert!(bytes[2 * PAGE_SIZE..].iter().all(|&b| b == 0x33));
        drop((file, other));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A commit's small writes of whole pages are carried out on the
    /// caller, side by side on its own ring (owned buffers and lent pages
    /// alike; twice, the ring being kept), or one after the other (the
    /// threads backend's way), one that makes the file longer too (the
    /// engine orders those); a partial last page, a large write and a
    /// read are handed back.
    #[test]
    fn only_small_writes_of_whole_pages_are_written_on_the_caller() {
        use super::super::on_caller::{writes_now, WRITE_ON_CALLER_MAX_BYTES};
        let Some(dir) = test_dir("on-caller") else {
            return;
        };
        let file = Arc::new(open_direct(&dir.join("f"), true).unwrap());
        let chunk = 4 * PAGE_SIZE as u64;
        file.set_len(4 * chunk).unwrap();
        let lent = lent_pages(4, 0x6B);
        for round in 0..3u8 {
            let mut read = write_op(3, &file, 0, 0);
            read.write = false;
            let ops = vec![
                write_op(1, &file, chunk, 0x5A + round),
                write_op(2, &file, 4 * chunk, 1),
                read,
                IoOp {
                    buf: AlignedBuf::new(WRITE_ON_CALLER_MAX_BYTES + PAGE_SIZE).into(),
                    ..write_op(4, &file, 0, 0)
                },
                IoOp {
                    buf: IoBuf::Lent(lent.clone()),
                    ..write_op(5, &file, 3 * chunk, 0)
                },
                write_op(6, &file, 2 * chunk, 0x7C + round),
                IoOp {
                    len: chunk as usize - 100,
                    ..write_op(7, &file, 0, 0x11)
                },
            ];
            let (done, others) = writes_now(ops, round < 2);
            let done: Vec<(u64, usize)> = done
                .into_iter()
                .map(|d| (d.id, d.result.unwrap()))
                .collect();
            let c = chunk as usize;
            assert_eq!(
                done,
                [(1, c), (2, c), (5, c), (6, c)],
                "whole pages, on the caller"
            );
            let others: Vec<u64> = others.iter().map(|op| op.id).collect();
            assert_eq!(others, [3, 4, 7], "a read, over 32 KiB, a partial page");
            assert_eq!(file.metadata().unwrap().len(), 5 * chunk, "op 2 grew it");
            for (at, fill) in [(1, 0x5A + round), (3, 0x6B), (2, 0x7C + round), (4, 1)] {
                let mut back = AlignedBuf::new(c);
                file.read_exact_at(back.as_mut_slice(), at * chunk).unwrap();
                assert!(back.as_slice().iter().all(|&b| b == fill), "chunk {at}");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
