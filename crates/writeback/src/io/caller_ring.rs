//! A commit's writes carried out by its caller, side by side: a small
//! io_uring owned by the calling thread (made on its first commit, kept
//! for the thread's life).
//!
//! Why: an fsync that finds a few clients' pages dirty (a group commit)
//! has two to eight small writes. Through the backend's ring they cost
//! three thread hand-offs (the caller to the ring thread, the ring thread
//! to the completion thread, that thread back to the caller), each a
//! wake-up that waits for a core when a copy keeps both busy; written one
//! after the other on the caller they cost the sum of their latencies.
//! Here they go out together in one `io_uring_enter`, which also waits for
//! all of them: the device's time for the slowest, no hand-off.
//!
//! Soundness: the kernel reads the ops' buffers until their CQEs are
//! reaped. [`write_together`] owns the ops (and the iovec arrays it builds)
//! for that whole time and reaps every CQE it submitted before it hands
//! anything back. Should the ring fail while writes are in flight (an
//! `io_uring_enter` error other than an interruption, which a working ring
//! never returns), the ring and the buffers are leaked, never freed.

use std::cell::RefCell;
use std::io;
use std::os::fd::AsRawFd;

use io_uring::{opcode, types, IoUring};

use super::backend::{IoDone, IoOp};
use super::pages::IoBuf;

/// Entries of a caller's ring: a commit's most pages.
pub(crate) const CALLER_RING_ENTRIES: u32 = wb_engine::COMMIT_WRITE_MAX_PAGES;
/// Interrupted `io_uring_enter` calls retried before the ring is given up.
const MAX_ENTER_RETRIES: u32 = 1000;

/// A thread's ring, made on its first commit.
enum Ring {
    NotYet,
    /// io_uring is unavailable here: the writes go one after the other.
    Unavailable,
    Ready(Box<IoUring>),
}

thread_local! {
    static RING: RefCell<Ring> = const { RefCell::new(Ring::NotYet) };
}

/// Writes every op (all writes, at most [`CALLER_RING_ENTRIES`]) on the
/// calling thread, in parallel where io_uring allows, and returns their
/// completions in the ops' order; one after the other unless `ring`. A
/// write the ring did not finish (short, interrupted, or no ring) is done
/// again with a blocking call.
pub(crate) fn write_together(ops: Vec<IoOp>, ring: bool) -> Vec<IoDone> {
    debug_assert!(ops.iter().all(|op| op.write));
    let mut results = vec![None; ops.len()];
    // More ops than the ring holds (the runtime never hands them) go one
    // after the other.
    if ring && (2..=CALLER_RING_ENTRIES as usize).contains(&ops.len()) {
        // (No ring while the thread's locals are being destroyed.)
        let lost = RING.try_with(|cell| {
            let mut ring = cell.borrow_mut();
            if let Ring::NotYet = *ring {
                *ring = match IoUring::new(CALLER_RING_ENTRIES) {
                    Ok(r) => Ring::Ready(Box::new(r)),
                    Err(_) => Ring::Unavailable,
                };
            }
            let Ring::Ready(r) = &mut *ring else {
                return false;
            };
            match submit_and_reap(r, &ops) {
                Ok(written) => {
                    results = written;
                    false
                }
                Err(RingLost) => {
                    // Never used again, so never submits what it holds.
                    std::mem::forget(std::mem::replace(&mut *ring, Ring::Unavailable));
                    true
                }
            }
        });
        if lost == Ok(true) {
            return ops.into_iter().map(leak).collect();
        }
    }
    ops.into_iter()
        .zip(results)
        .map(|(op, written)| finish(op, written))
        .collect()
}

/// The ring failed with writes in flight; their buffers must not be freed.
struct RingLost;

/// The failed completion of `op`, whose buffer the kernel may still read:
/// leaked, and a stand-in handed back (as the backend's ring does when it
/// dies).
fn leak(op: IoOp) -> IoDone {
    let buf = match &op.buf {
        IoBuf::Owned(b) => IoBuf::Owned(super::aligned::AlignedBuf::new(b.len())),
        // The leaked original keeps the pages' owner alive.
        IoBuf::Lent(pages) => IoBuf::Lent(pages.clone()),
    };
    let id = op.id;
    std::mem::forget(op);
    IoDone {
        id,
        buf,
        result: Err(io::Error::other("a commit's io_uring failed")),
    }
}

/// Submits one SQE per op and reaps all of their CQEs. Per op: `Some(n)`
/// if the kernel wrote `n` bytes, `None` if it must be done again
/// (interrupted, or an error the blocking call will report).
fn submit_and_reap(ring: &mut IoUring, ops: &[IoOp]) -> Result<Vec<Option<usize>>, RingLost> {
    // Every earlier call reaped all it submitted (else it lost the ring).
    debug_assert!(ring.submission().is_empty() && ring.completion().is_empty());
    let mut iovecs: Vec<Vec<libc::iovec>> = Vec::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        let fd = types::Fd(op.file.as_raw_fd());
        let sqe = match &op.buf {
            IoBuf::Owned(buf) => opcode::Write::new(fd, buf.as_slice().as_ptr(), buf.len() as u32)
                .offset(op.offset)
                .build(),
            IoBuf::Lent(pages) => {
                iovecs.push(pages.iovecs_from(0, usize::MAX));
                let iov = iovecs.last().expect("just pushed");
                opcode::Writev::new(fd, iov.as_ptr(), iov.len() as u32)
                    .offset(op.offset)
                    .build()
            }
        }
        .user_data(i as u64);
        // SAFETY: the SQE points into `op.buf` (an owned buffer's heap
        // block, or memory its `IoPages` keeps allocated and readable) and
        // into `iovecs`' heap blocks (pushing another Vec does not move
        // them); the kernel only reads them. `ops` is borrowed and
        // `iovecs` lives until this function returns, which it does only
        // after every submitted SQE's CQE is reaped, or with `RingLost`,
        // whereupon the caller leaks the ops and the ring. The fds stay
        // open: each op holds its `Arc<File>`.
        if unsafe { ring.submission().push(&sqe) }.is_err() {
            // Cannot happen (at most CALLER_RING_ENTRIES ops on an empty
            // queue); the SQEs queued so far must never be submitted.
            return Err(RingLost);
        }
    }
    let mut results = vec![None; ops.len()];
    let mut reaped = 0;
    let mut failures = 0;
    while reaped < ops.len() {
        match ring.submit_and_wait(ops.len() - reaped) {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                ) =>
            {
                failures += 1;
                if failures > MAX_ENTER_RETRIES {
                    return Err(RingLost);
                }
            }
            Err(_) => return Err(RingLost),
        }
        for cqe in ring.completion() {
            let Some(slot) = results.get_mut(cqe.user_data() as usize) else {
                continue;
            };
            reaped += 1;
            *slot = usize::try_from(cqe.result()).ok();
        }
    }
    Ok(results)
}

/// The completion of `op`: the ring's if it wrote everything, else the
/// blocking call's (which rewrites the same bytes at the same offset).
fn finish(op: IoOp, written: Option<usize>) -> IoDone {
    let result = match written {
        Some(n) if n == op.len => Ok(n),
        _ => super::tail::write_blocking(&op),
    };
    IoDone {
        id: op.id,
        buf: op.buf,
        result,
    }
}
