//! I/O done on the caller's thread instead of a backend's: a commit's
//! small writes within the files' sizes (`IoBackend::writes_on_caller`)
//! and reads (`IoBackend::read_on_caller`), with blocking calls or the
//! caller's own ring.

use super::backend::{at_eof, lent_read_error, IoDone, IoOp};
use super::pages::IoBuf;
use super::tail;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// The largest write [`IoBackend::writes_on_caller`](super::IoBackend::writes_on_caller) carries out: the
/// engine's largest commit.
pub const WRITE_ON_CALLER_MAX_BYTES: usize =
    (wb_engine::COMMIT_WRITE_MAX_PAGES as u64 * wb_engine::PAGE_SIZE) as usize;

/// `writes_on_caller` for backends whose writes within a file's size need
/// no ordering with what they have in flight (the engine never writes a
/// page twice at once): side by side on the caller's own ring if `ring`
/// (an io_uring backend), else one after the other.
pub(crate) fn writes_now(ops: Vec<IoOp>, ring: bool) -> (Vec<IoDone>, Vec<IoOp>) {
    // A commit's writes are mostly to one file: its size is asked once.
    let mut size: Option<(*const File, Option<u64>)> = None;
    let (mine, others): (Vec<IoOp>, Vec<IoOp>) = ops.into_iter().partition(|op| {
        // A partial last page goes through the backend (`tail.rs`).
        if !op.write || op.buf.len() > WRITE_ON_CALLER_MAX_BYTES || op.len != op.buf.len() {
            return false;
        }
        let file = Arc::as_ptr(&op.file);
        let len = match size {
            Some((f, len)) if f == file => len,
            _ => {
                let len = op.file.metadata().ok().map(|m| m.len());
                size = Some((file, len));
                len
            }
        };
        let end = op.offset.saturating_add(op.buf.len() as u64);
        len.is_some_and(|len| end <= len)
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
