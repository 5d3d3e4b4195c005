//! The I/O backend abstraction: asynchronous positional reads and writes of
//! [`IoBuf`]s (a buffer of the op's own, or pages lent for a write), with
//! completions delivered on a channel.
//!
//! Two implementations exist: [`crate::io::uring`] (one thread owning an
//! io_uring) and [`crate::io::threads`] (a pool of threads doing
//! `pread`/`pwrite`). [`open_backend`](super::open_backend) (open.rs)
//! picks io_uring when the kernel allows it and falls back to threads
//! otherwise; on_caller.rs holds what both do on the caller's thread.
//!
//! # Contract common to all backends
//! - [`IoBackend::submit`] queues the op and returns. Each backend has a
//!   bounded queue ([`QUEUE_DEPTH`] ops waiting to be started, plus whatever
//!   the backend has in flight); when it is full, `submit` blocks the caller
//!   until the backend has taken an op off the queue. It never waits for an
//!   op to *complete*.
//! - Exactly one [`IoDone`] is sent per submitted op, carrying the buffer back.
//!   If the receiver has been dropped, the completion (and its buffer) is
//!   silently discarded.
//! - Reads: `result` is the number of bytes read. A read that reaches end of
//!   file is *not* an error: it returns the bytes available and the rest of
//!   the buffer is zeroed. A read that starts at or past end of file returns
//!   `Ok(0)` with an all-zero buffer.
//! - Writes: a short write is continued until `len` bytes are written or
//!   an error occurs; `result` is then `Ok(len)`. A partial last page
//!   goes after the whole ones, without O_DIRECT (`tail.rs`). Ops are
//!   carried out as they come, side by side: a backend orders nothing.
//!   Whether a file's writes that make it longer go one at a time (so
//!   that a killed process leaves no hole below a later write) is the
//!   engine's decision (`extending_writes`): it submits the next only
//!   once the one before has completed. Lent pages ([`IoBuf::Lent`]) are
//!   written with vectored writes, in their order.
//! - A read into lent pages fails at once with `InvalidInput`: only writes
//!   may lend pages.
//! - Errors are the raw OS error (`EIO`, `ENOSPC`, `EBADF`, ...) as
//!   [`std::io::Error`]. After an error, bytes already transferred by the op
//!   are unspecified (for a write, part of it may have reached the file).
//! - `id` is opaque to the backend and echoed in the completion. Ids must be
//!   unique among the ops in flight on one backend (the io_uring backend uses
//!   it as the SQE `user_data`; a duplicate in-flight id, or `u64::MAX`, is
//!   completed at once with an `InvalidInput` error there).
//! - Dropping the backend stops accepting ops, completes every op already
//!   submitted (queued ops are still performed), then joins its threads.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::sync::mpsc::Sender;
use std::sync::Arc;

use super::pages::IoBuf;

/// Capacity of each backend's queue of submitted-but-not-started ops. A
/// submitter finding it full blocks until the backend takes one.
pub const QUEUE_DEPTH: usize = 1024;

/// One positional read or write of an [`IoBuf`] at `offset`.
#[derive(Debug)]
pub struct IoOp {
    /// Caller's tag, echoed in [`IoDone::id`].
    pub id: u64,
    /// The file; kept alive by the backend until the op completes.
    pub file: Arc<File>,
    /// `true` to write `buf` to the file, `false` to read into `buf`.
    pub write: bool,
    /// Byte offset in the file (multiple of the logical block size for
    /// O_DIRECT files).
    pub offset: u64,
    /// Data to write, or destination of the read.
    pub buf: IoBuf,
    /// Bytes transferred: a read's is the buffer's whole length; a write's
    /// may end inside its last page (a file's partial last page, whose
    /// bytes past the file's end must not reach the file: a crash would
    /// leave a page-rounded length with a zero tail). The whole pages go
    /// through `file`, the partial one after them through a descriptor of
    /// the same file without O_DIRECT (`tail.rs`), so the file never grows
    /// past `offset + len`.
    pub len: usize,
    /// The kernel will run this write synchronously: it makes the file
    /// longer on a filesystem that performs such O_DIRECT writes under
    /// the inode's lock (ext2/3/4; the runtime knows the filesystem, the
    /// engine which writes extend, `IoRequest::extends`). The io_uring
    /// backend hands it straight to a worker instead of first trying to
    /// issue it without blocking; the threads backend ignores it.
    pub blocks: bool,
}

/// The completion of an [`IoOp`].
#[derive(Debug)]
pub struct IoDone {
    /// The op's `id`.
    pub id: u64,
    /// The op's buffer, handed back (holds the data for a read).
    pub buf: IoBuf,
    /// Bytes transferred, or the OS error.
    pub result: io::Result<usize>,
}

/// An asynchronous I/O engine. See the [module docs](self) for the contract.
pub trait IoBackend: Send + Sync {
    /// Queues `op`; its [`IoDone`] will arrive on the completion channel.
    /// Blocks only while the backend's bounded queue is full.
    fn submit(&self, op: IoOp);
    /// `"io_uring"` or `"threads"`.
    fn name(&self) -> &'static str;
    /// Carries out the read `op` on the calling thread, blocking until it
    /// is done, and returns its completion instead of sending it on the
    /// channel (the contract is otherwise the same); `Err(op)` hands back
    /// an op this backend will not do so (a write, or a backend that only
    /// queues), to be submitted. For a caller that would only sleep until
    /// the read completes: it saves the hand-offs to the backend's thread
    /// and back through the completion thread, two or three thread
    /// wake-ups, most of a 4 KiB read's time on a fast device.
    fn read_on_caller(&self, op: IoOp) -> Result<IoDone, IoOp> {
        Err(op)
    }
    /// As [`Self::read_on_caller`], for the small writes of whole pages
    /// of one commit (each at most
    /// [`WRITE_ON_CALLER_MAX_BYTES`](super::WRITE_ON_CALLER_MAX_BYTES);
    /// the engine's definition of a commit, `IoRequest::commit`, bounds
    /// their number and total to `COMMIT_WRITE_MAX_PAGES` pages): an
    /// fsync's writes, which its caller only waits for. Returns
    /// the completions of those it wrote, and hands back the others (a
    /// partial last page goes through the backend, `tail.rs`; a backend
    /// that only queues hands back all). A write that makes its file
    /// longer may go too: the engine hands those over in order
    /// (`extending_writes`), so nothing here orders them.
    fn writes_on_caller(&self, ops: Vec<IoOp>) -> (Vec<IoDone>, Vec<IoOp>) {
        (Vec::new(), ops)
    }
}

/// After a short read that ended at file position `pos`: is `pos` at or past
/// end of file? (Then the read is complete; otherwise it must be continued.)
pub(crate) fn at_eof(file: &File, pos: u64) -> io::Result<bool> {
    Ok(pos >= file.metadata()?.size())
}

/// The error of a read asked to fill lent pages.
pub(crate) fn lent_read_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "a read needs a buffer of its own: only writes may lend pages",
    )
}

/// Sends a completion, ignoring a dropped receiver (nobody wants it then).
pub(crate) fn send_done(tx: &Sender<IoDone>, done: IoDone) {
    let _ = tx.send(done);
}

/// Hands `op` to a backend's worker queue. If the queue is closed or its
/// workers are gone (they only exit after a panic), the op fails on its
/// completion with `why` rather than being lost. Returns whether it was queued.
pub(crate) fn enqueue(
    queue: Option<&std::sync::mpsc::SyncSender<IoOp>>,
    completions: &Sender<IoDone>,
    op: IoOp,
    why: &str,
) -> bool {
    let op = match queue {
        Some(queue) => match queue.send(op) {
            Ok(()) => return true,
            Err(std::sync::mpsc::SendError(op)) => op,
        },
        None => op,
    };
    send_done(
        completions,
        IoDone {
            id: op.id,
            buf: op.buf,
            result: Err(std::io::Error::other(why.to_string())),
        },
    );
    false
}
