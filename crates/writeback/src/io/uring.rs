//! io_uring backend: one thread owns a ring of [`RING_ENTRIES`] entries,
//! takes ops from a bounded queue of [`QUEUE_DEPTH`], submits them
//! (`user_data` = op id) and reaps their completions itself.
//!
//! The ring thread sleeps in `io_uring_enter` waiting for at least one
//! completion. To wake it when a new op is queued, it keeps a `POLL_ADD` on
//! an eventfd armed in the ring (`user_data` = `u64::MAX`, reserved) and
//! [`IoBackend::submit`] writes to that eventfd after queueing.
//!
//! At most `RING_ENTRIES - 1` ops are in flight or held back (one slot is
//! for the wake poll), so the submission queue can never overflow and the
//! completion queue (twice as large) never drops entries.
//!
//! On ext2/3/4, a write that extends a file first has its range allocated
//! (see [`Serial`]): the filesystem runs extending writes one at a time and
//! synchronously, writes within the file's size in parallel.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;

use io_uring::{opcode, squeue, types, IoUring, Probe};

use super::aligned::AlignedBuf;
use super::backend::{
    at_eof, enqueue, lent_read_error, send_done, IoBackend, IoDone, IoOp, QUEUE_DEPTH,
};
use super::pages::IoBuf;

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

/// Creates a ring and checks it supports the opcodes this backend needs;
/// also tells whether it can allocate (`FALLOCATE`, optional).
fn setup_ring() -> io::Result<(IoUring, bool)> {
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
    let fallocate = probe.is_supported(opcode::Fallocate::CODE);
    Ok((ring, fallocate))
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
        let (ring, fallocate) = setup_ring()?;
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
                .spawn(move || RingThread::new(ring, fallocate, rx, wake, done).run())?
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
        super::backend::read_now(op)
    }

    /// Writes within their files' sizes, on the caller's own ring: such
    /// writes are never held by [`Serial`], which orders only extending
    /// ones.
    fn writes_on_caller(&self, ops: Vec<IoOp>) -> (Vec<IoDone>, Vec<IoOp>) {
        super::backend::writes_now(ops, true)
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
    /// The file (st_dev, st_ino) if this is the extending write [`Serial`]
    /// lets through on it.
    serial: Option<FileKey>,
}

/// A file's (st_dev, st_ino).
type FileKey = (u64, u64);

/// Writes that extend a file, on filesystems that run them one at a time.
///
/// ext4 (and ext2/3, same driver) performs an O_DIRECT write that extends
/// the file synchronously, holding the inode's lock exclusively until the
/// device has completed it: one such write at a time per file, each
/// waiting for the device. A sequential writer's writeback is all
/// extending writes, so it gets one write in flight where the device takes
/// dozens (`wb bench dontcache --dir` on the root ext4: 0.33–0.53× the
/// kernel's RWF_DONTCACHE writer).
///
/// So the ring first allocates what extending writes will cover
/// (`IORING_OP_FALLOCATE`, mode 0: unwritten extents, the size grows to
/// the end) and starts them once that is done: no longer extending, they
/// run in parallel under the inode's shared lock (0.87–0.90× in the same
/// bench). One allocation at a time per file; the extending writes that
/// arrive meanwhile wait and are covered by the next one, so allocations
/// batch as the writer gets ahead. The size grows only to the end of
/// writes being started, before their data lands: a crash meanwhile leaves
/// zeros there (unwritten extents), as a crash during ext4's own writeback
/// does (it sets the on-disk size when it submits).
///
/// Where allocation is not supported (no `FALLOCATE` in the ring, or the
/// filesystem refuses: ext2/3 without extents), the extending writes of a
/// file go one at a time instead: letting io_uring start them together
/// only makes its io-wq workers fight over the inode's lock (`wb bench
/// cpu`, a 4 GiB file written sequentially with about 24 writes in flight
/// on 2 CPUs: 1.5 to 3 s of system time more than with one worker).
///
/// Writes within the file's size, reads, and other files' writes are not
/// held.
#[derive(Default)]
struct Serial {
    /// By st_dev: does that filesystem serialise extending writes?
    serialising_fs: HashMap<u64, bool>,
    /// By st_dev: the filesystem does not allocate (EOPNOTSUPP); extending
    /// writes go one at a time instead.
    no_allocate: HashSet<u64>,
    /// Files with an allocation or an extending write in flight, with the
    /// extending writes waiting for it, oldest first.
    busy: HashMap<FileKey, VecDeque<IoOp>>,
    /// Allocations in flight, by `user_data`: the id of a waiting write
    /// (held, so no op in flight has it), and the file.
    allocating: HashMap<u64, FileKey>,
    /// Ids of the writes waiting, over all files: in flight for the caller,
    /// so no other op may use them.
    held: HashSet<u64>,
    /// Allocations started (for tests).
    allocations: u64,
}

/// The range to allocate for the extending writes `waiting` of one file:
/// from the largest end down through the writes that touch or overlap it
/// (a gap stays a hole: writes are what the file is allowed to grow by).
fn allocation_range(waiting: &VecDeque<IoOp>) -> (u64, u64) {
    let mut spans: Vec<(u64, u64)> = waiting
        .iter()
        .map(|op| (op.offset, op.offset.saturating_add(op.buf.len() as u64)))
        .collect();
    spans.sort_unstable_by_key(|&(_, end)| std::cmp::Reverse(end));
    let (mut lo, hi) = spans.first().copied().unwrap_or((0, 0));
    for &(start, end) in spans.iter().skip(1) {
        if end >= lo {
            lo = lo.min(start);
        }
    }
    (lo, hi)
}

/// Whether the filesystem of `file` performs extending O_DIRECT writes
/// synchronously under the inode's exclusive lock (ext2/3/4). False if it
/// cannot be told.
fn serialises_extending_writes(file: &File) -> bool {
    // SAFETY: statfs is plain integers and arrays of them, for which all
    // zeroes is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatfs only writes into `st`, which outlives the call; the
    // descriptor is open (borrowed from `file`).
    let rc = unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) };
    rc == 0 && st.f_type == libc::EXT4_SUPER_MAGIC
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
    serial: Serial,
    ring: IoUring,
    /// The ring takes `IORING_OP_FALLOCATE`.
    can_allocate: bool,
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
    fn new(
        ring: IoUring,
        can_allocate: bool,
        rx: Receiver<IoOp>,
        wake: Arc<File>,
        done_tx: Sender<IoDone>,
    ) -> Self {
        Self {
            in_flight: InFlightMap::default(),
            serial: Serial::default(),
            ring,
            can_allocate,
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
            while !self.closed && self.in_flight.0.len() + self.serial.held.len() < MAX_IN_FLIGHT {
                match self.rx.try_recv() {
                    Ok(op) => self.start(op),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => self.closed = true,
                }
            }
            if self.closed && self.in_flight.0.is_empty() && self.serial.held.is_empty() {
                // Writes wait only for an op in flight on their file.
                debug_assert!(self.serial.allocating.is_empty());
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
                } else if let Some(key) = self.serial.allocating.remove(&id) {
                    self.allocated(key, res);
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
        } else if self.in_flight.0.contains_key(&id) || self.serial.held.contains(&id) {
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
        let serial = if op.write { self.extends(&op) } else { None };
        if let Some(key) = serial {
            if let Some(waiting) = self.serial.busy.get_mut(&key) {
                self.serial.held.insert(id);
                waiting.push_back(op);
                return;
            }
            if self.can_allocate && !self.serial.no_allocate.contains(&key.0) {
                self.serial.held.insert(id);
                self.serial.busy.insert(key, VecDeque::from([op]));
                self.allocate(key);
                return;
            }
            self.serial.busy.insert(key, VecDeque::new());
        }
        self.launch(op, serial);
    }

    /// Starts allocating what the writes waiting on `key` cover (see
    /// [`Serial`]); its completion is [`Self::allocated`].
    fn allocate(&mut self, key: FileKey) {
        let Some(waiting) = self.serial.busy.get(&key) else {
            return;
        };
        // Any waiting write's id will do: held, so no op in flight has it.
        let Some((token, fd)) = waiting.front().map(|op| (op.id, op.file.as_raw_fd())) else {
            return;
        };
        let (lo, hi) = allocation_range(waiting);
        debug_assert!(lo < hi, "an extending write is never empty");
        let sqe = opcode::Fallocate::new(types::Fd(fd), hi - lo)
            .offset(lo)
            .mode(0)
            .build()
            .user_data(token);
        self.serial.allocating.insert(token, key);
        self.serial.allocations += 1;
        // SAFETY: an allocation points to no memory. Its descriptor stays
        // open until the SQE is submitted (the kernel then holds its own
        // reference): the waiting writes, each holding the `Arc<File>`,
        // stay held until its completion is reaped, or, if the ring dies
        // first, are dropped after the last submission.
        if let Err(e) = unsafe { self.push(&sqe) } {
            self.serial.allocating.remove(&token);
            self.allocated(key, -e.raw_os_error().unwrap_or(libc::EIO));
        }
    }

    /// The allocation for `key` has completed with `res`: starts the
    /// writes it covered, and allocates for those that arrived since and
    /// extend further. If it failed, the writes waiting go one at a time
    /// (any real error, such as ENOSPC, they meet again and report); if
    /// the filesystem does not allocate at all, its extending writes go
    /// one at a time from now on.
    fn allocated(&mut self, key: FileKey, res: i32) {
        if res < 0 {
            if matches!(-res, libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL) {
                self.serial.no_allocate.insert(key.0);
            }
            self.release(key);
            return;
        }
        let Some(waiting) = self.serial.busy.remove(&key) else {
            return;
        };
        let mut still = VecDeque::new();
        for op in waiting {
            if self.extends(&op) == Some(key) {
                still.push_back(op);
            } else {
                self.serial.held.remove(&op.id);
                self.launch(op, None);
            }
        }
        if !still.is_empty() {
            self.serial.busy.insert(key, still);
            self.allocate(key);
        }
    }

    /// The file of write `op` if the op extends it and its filesystem
    /// serialises extending writes (see [`Serial`]). None if that cannot be
    /// told (the op then just goes; the kernel reports any error).
    fn extends(&mut self, op: &IoOp) -> Option<FileKey> {
        let meta = op.file.metadata().ok()?;
        let serialising = *self
            .serial
            .serialising_fs
            .entry(meta.dev())
            .or_insert_with(|| serialises_extending_writes(&op.file));
        let end = op.offset.saturating_add(op.buf.len() as u64);
        (serialising && end > meta.size()).then_some((meta.dev(), meta.ino()))
    }

    /// Hands `op` (whose id no op in flight or held uses) to the kernel;
    /// `serial` as in [`InFlight`].
    fn launch(&mut self, op: IoOp, serial: Option<FileKey>) {
        let id = op.id;
        let Entry::Vacant(slot) = self.in_flight.0.entry(id) else {
            // Cannot happen (`start` checks ids against both), and must not
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
            serial,
        });
        self.submit_remainder(id);
    }

    /// The extending write let through on `key` has finished: starts the
    /// writes waiting for it, oldest first, until one still extends the
    /// file (it becomes the one let through) or none is left.
    fn release(&mut self, key: FileKey) {
        loop {
            let Some(waiting) = self.serial.busy.get_mut(&key) else {
                return;
            };
            let Some(op) = waiting.pop_front() else {
                self.serial.busy.remove(&key);
                return;
            };
            self.serial.held.remove(&op.id);
            // `key` stays busy meanwhile, so nothing queues behind a write
            // that no longer extends the file and goes on its own.
            if self.extends(&op) == Some(key) {
                // If it fails at once, its `finish` releases `key` again.
                self.launch(op, Some(key));
                return;
            }
            self.launch(op, None);
        }
    }

    /// Queues an SQE for the part of op `id` not yet transferred.
    fn submit_remainder(&mut self, id: u64) {
        let Some(fl) = self.in_flight.0.get_mut(&id) else {
            return;
        };
        let len = (fl.op.buf.len() - fl.done).min(MAX_CHUNK_BYTES);
        let offset = fl.op.offset + fl.done as u64;
        let fd = types::Fd(fl.op.file.as_raw_fd());
        let sqe = match (&mut fl.op.buf, fl.op.write) {
            (IoBuf::Lent(pages), _) => {
                // Reads into lent pages were refused in `start`.
                fl.iovecs = pages.iovecs_from(fl.done, len);
                opcode::Writev::new(fd, fl.iovecs.as_ptr(), fl.iovecs.len() as u32)
                    .offset(offset)
                    .build()
            }
            (IoBuf::Owned(buf), write) => {
                // `fl.done < buf.len()` here, so the pointer stays inside the block.
                let ptr = buf.as_mut_ptr().wrapping_add(fl.done);
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
        .user_data(id);
        // An extending write on a serialising filesystem always ends up on
        // an io-wq worker: skip the attempt to issue it without blocking.
        let sqe = if fl.serial.is_some() {
            sqe.flags(squeue::Flags::ASYNC)
        } else {
            sqe
        };
        // SAFETY: for an owned buffer, `ptr..ptr+len` lies inside the heap
        // block of `fl.op.buf` (done + len <= buf.len()); for lent pages,
        // the iovecs (in `fl.iovecs`, not touched again before this SQE's
        // CQE) point into memory the `IoPages` keeps allocated and readable
        // (IoPages::new), and the kernel only reads it. Both are owned by
        // the `InFlight` entry in `self.in_flight`, which is removed (and
        // the buffer handed back) only in `finish`, called when the CQE for
        // this SQE has been reaped or when the push below fails (then the
        // kernel never saw the SQE). Moving the `AlignedBuf` or the Vec
        // inside the map does not move their heap blocks. Nothing else
        // touches an owned buffer meanwhile. If the thread unwinds,
        // `InFlightMap::drop` leaks the buffers instead of freeing them.
        // The fd stays open because the entry also holds the `Arc<File>`.
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
        let Some(InFlight { mut op, serial, .. }) = self.in_flight.0.remove(&id) else {
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
        if let Some(key) = serial {
            self.release(key);
        }
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
        // Held-back writes never reached the kernel: their buffers are free.
        let waiting = std::mem::take(&mut self.serial.busy)
            .into_values()
            .flatten();
        // Then whatever is still queued for us, until the sender is gone.
        for op in waiting.chain(self.rx.iter()) {
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
        }
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
        let (ring, can_allocate) = match setup_ring() {
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
        let ring = RingThread::new(ring, can_allocate, ops_rx, wake, done_tx);
        Some(Rig {
            dir,
            ring,
            ops_tx,
            done_rx,
        })
    }

    /// Three extending writes of one file and one of another, started
    /// before the ring runs; `check_held` sees the ring then. All complete
    /// and each file holds its writes.
    fn extending_writes(name: &str, allocate: bool, check_held: impl FnOnce(&mut Rig, bool)) {
        let Some(mut rig) = rig(name) else {
            return;
        };
        let file = Arc::new(open_direct(&rig.dir.join("f"), true).unwrap());
        let other = Arc::new(open_direct(&rig.dir.join("g"), true).unwrap());
        let serialising = serialises_extending_writes(&file);
        if !allocate {
            rig.ring
                .serial
                .no_allocate
                .insert(file.metadata().unwrap().dev());
        }
        let chunk = 4 * PAGE_SIZE as u64;
        for id in 0..3 {
            rig.ring
                .start(write_op(id, &file, id * chunk, id as u8 + 1));
        }
        rig.ring.start(write_op(10, &other, 0, 0xAA));
        if serialising {
            let can_allocate = rig.ring.can_allocate;
            check_held(&mut rig, can_allocate);
        } else {
            eprintln!("not ext2/3/4 here: extending writes are not held back");
        }
        let allocating = serialising && allocate && rig.ring.can_allocate;
        // Runs everything started, then returns (no more ops will come).
        let Rig {
            dir,
            ring,
            ops_tx,
            done_rx,
        } = rig;
        drop(ops_tx);
        let mut ring = ring;
        ring.run();
        let allocations = ring.serial.allocations;
        let mut ids: Vec<u64> = done_rx
            .try_iter()
            .map(|d| {
                assert_eq!(d.result.expect("write succeeds"), chunk as usize);
                d.id
            })
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, [0, 1, 2, 10]);
        if allocating {
            // One for `other`; for `f` one for the first write, one for the
            // two that waited behind it.
            assert_eq!(allocations, 3);
        } else {
            assert_eq!(allocations, 0);
        }
        assert_eq!(file.metadata().unwrap().len(), 3 * chunk);
        let mut back = AlignedBuf::new(3 * chunk as usize);
        file.read_exact_at(back.as_mut_slice(), 0).unwrap();
        for (i, page) in back.as_slice().chunks(chunk as usize).enumerate() {
            assert!(page.iter().all(|&b| b == i as u8 + 1), "chunk {i}");
        }
        drop((file, other));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A commit's small writes within the file's size are carried out on
    /// the caller, side by side on its own ring (owned buffers and lent
    /// pages alike; twice, the ring being kept), or one after the other
    /// (the threads backend's way);
    /// an extending write, a large one and a read are handed back.
    #[test]
    fn only_small_writes_within_the_size_are_written_on_the_caller() {
        use super::super::backend::{writes_now, WRITE_ON_CALLER_MAX_BYTES};
        let Some(dir) = test_dir("on-caller") else {
            return;
        };
        let file = Arc::new(open_direct(&dir.join("f"), true).unwrap());
        let chunk = 4 * PAGE_SIZE as u64;
        file.set_len(4 * chunk).unwrap();
        let frames = Arc::new({
            let mut b = AlignedBuf::new(4 * PAGE_SIZE);
            b.as_mut_slice().fill(0x6B);
            b
        });
        let owner: Arc<dyn Send + Sync> = frames.clone();
        // SAFETY: the pages lie inside `frames`, which `owner` keeps alive.
        let lent = unsafe {
            crate::io::IoPages::new(
                owner,
                (0..4).map(|p| (frames.as_ptr().wrapping_add(p * PAGE_SIZE), PAGE_SIZE)),
            )
        }
        .unwrap();
        for round in 0..3u8 {
            let mut read = write_op(3, &file, 0, 0);
            read.write = false;
            let ops = vec![
                write_op(1, &file, chunk, 0x5A + round),
                write_op(2, &file, 4 * chunk - PAGE_SIZE as u64, 1),
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
            ];
            let (done, others) = writes_now(ops, round < 2);
            let done: Vec<(u64, usize)> = done
                .into_iter()
                .map(|d| (d.id, d.result.unwrap()))
                .collect();
            let c = chunk as usize;
            assert_eq!(
                done,
                [(1, c), (5, c), (6, c)],
                "within the size, on the caller"
            );
            let others: Vec<u64> = others.iter().map(|op| op.id).collect();
            assert_eq!(others, [2, 3, 4], "extending, a read, over 32 KiB");
            assert_eq!(file.metadata().unwrap().len(), 4 * chunk);
            for (at, fill) in [(1, 0x5A + round), (3, 0x6B), (2, 0x7C + round)] {
                let mut back = AlignedBuf::new(c);
                file.read_exact_at(back.as_mut_slice(), at * chunk).unwrap();
                assert!(back.as_slice().iter().all(|&b| b == fill), "chunk {at}");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// On ext2/3/4, an extending write waits for its range to be
    /// allocated, and the extending writes arriving meanwhile wait for
    /// that allocation (their ids count as in flight); one more allocation
    /// covers them all.
    #[test]
    fn extending_writes_wait_for_an_allocation_on_ext4() {
        extending_writes("allocate", true, |rig, can_allocate| {
            if !can_allocate {
                wb_testkit::skip("this kernel's io_uring has no FALLOCATE");
                return;
            }
            assert_eq!(rig.ring.in_flight.0.len(), 0);
            assert_eq!(rig.ring.serial.held.len(), 4);
            assert_eq!(rig.ring.serial.allocating.len(), 2);
            // A held id is in use: an op reusing it fails at once.
            let file = Arc::clone(&rig.ring.serial.busy.values().next().unwrap()[0].file);
            rig.ring.start(write_op(2, &file, 0, 9));
            let dup = rig.done_rx.try_recv().expect("duplicate failed at once");
            assert_eq!(dup.id, 2);
            assert_eq!(dup.result.unwrap_err().kind(), io::ErrorKind::InvalidInput);
        });
    }

    /// Where allocation fails, the second and later extending writes of a
    /// file wait for the one before instead.
    #[test]
    fn extending_writes_wait_for_each_other_without_allocation_on_ext4() {
        extending_writes("serial", false, |rig, _| {
            assert_eq!(rig.ring.in_flight.0.len(), 2);
            assert_eq!(rig.ring.serial.held.len(), 2);
            assert!(rig.ring.serial.allocating.is_empty());
        });
    }

    /// From the largest end down through every write touching or
    /// overlapping the range so far, in any order; a write beyond a gap
    /// below stays out.
    #[test]
    fn an_allocation_spans_the_writes_that_touch_the_last() {
        let file = Arc::new(File::open("/dev/null").unwrap());
        let chunk = 4 * PAGE_SIZE as u64;
        let at = |offsets: &[u64]| -> VecDeque<IoOp> {
            offsets
                .iter()
                .map(|&offset| write_op(offset, &file, offset, 0))
                .collect()
        };
        assert_eq!(allocation_range(&at(&[0])), (0, chunk));
        assert_eq!(
            allocation_range(&at(&[3 * chunk, chunk, 2 * chunk])),
            (chunk, 4 * chunk)
        );
        // Overlapping (not page-multiple offsets are not O_DIRECT's, but the
        // range does not care).
        assert_eq!(
            allocation_range(&at(&[2 * chunk + 100, 2 * chunk])),
            (2 * chunk, 3 * chunk + 100)
        );
        assert_eq!(
            allocation_range(&at(&[0, 5 * chunk, 6 * chunk])),
            (5 * chunk, 7 * chunk)
        );
    }
}
