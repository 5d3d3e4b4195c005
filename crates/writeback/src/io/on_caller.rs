//! I/O done on the caller's thread instead of a backend's: a commit's
//! small writes of whole pages (`IoBackend::writes_on_caller`)
//! and reads (`IoBackend::read_on_caller`), with blocking calls or the
//! caller's own ring.

use super::backend::{at_eof, lent_read_error, IoDone, IoOp};
use super::pages::IoBuf;
use super::tail;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// The largest write [`IoBackend::writes_on_caller`](super::IoBackend::writes_on_caller) carries out: the
/// engine's largest commit.
pub const WRITE_ON_CALLER_MAX_BYTES: usize =
    (wb_engine::COMMIT_WRITE_MAX_PAGES as u64 * wb_engine::PAGE_SIZE) as usize;

/// `writes_on_caller` for backends whose writes need no ordering with
/// what they have in flight (the engine never writes a page twice at once,
/// and orders the writes that make a file longer itself: `IoRequest::
/// extends`, the device's `extending_writes`): side by side on the
/// caller's own ring if `ring` (an io_uring backend), else one after the
/// other. Whole pages only: a partial last page goes through the backend
/// (`tail.rs`).
pub(crate) fn writes_now(ops: Vec<IoOp>, ring: bool) -> (Vec<IoDone>, Vec<IoOp>) {
    let (mine, others): (Vec<IoOp>, Vec<IoOp>) = ops.into_iter().partition(|op| {
        op.write && op.buf.len() <= WRITE_ON_CALLER_MAX_BYTES && op.len == op.buf.len()
    });
    (super::caller_ring::write_together(mine, ring), others)
}

/// `read_on_caller` for backends that read with blocking calls anyway.
pub(crate) fn read_now(mut op: IoOp) -> Result<IoDone, IoOp> {
    if op.write {
        return Err(op);
    }
    let result = match &mut op.buf {
        IoBuf::Owned(buf) => read_at_eof_ok(&op.file, buf.as_mut_slice(), op.offset),
        IoBuf::Lent(_) => Err(lent_read_error()),
    };
    Ok(IoDone {
        id: op.id,
        buf: op.buf,
        result,
    })
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
            Err(e) if tail::retryable(&e) => {}
            Err(e) => return Err(e),
        }
    }
    buf[done..].fill(0);
    Ok(done)
}
