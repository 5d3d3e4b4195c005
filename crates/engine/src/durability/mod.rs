//! Durability: making landed writes survive a crash.
//!
//! - A file is marked unsynced (a mark from a counter) when a write to it
//!   lands or its length changes: its backing file changed and only the
//!   device's cache may hold the change.
//! - `fsync` and `sync`, once their writes are done (sync/), emit
//!   [`Action::MakeDurable`] for each of their files that is marked; the
//!   runtime sets the backing file's length (backing_len/) and flushes it (fdatasync, or
//!   fsync with metadata) and reports with `durable_done`. The sync waits
//!   (reason `sync`) until all are done.
//! - A mark is cleared only if nothing landed since the flush began (the
//!   mark is unchanged); a failed flush fails the sync with
//!   `EngineError::Durability` and leaves the mark, so the next sync tries
//!   again. Acknowledged data is never claimed durable when it is not.
//! - Linux: fsync's `filemap_write_and_wait` then the filesystem's flush;
//!   here the flush is the runtime's, the decision when and of what is ours.

pub(crate) mod state;

use crate::action::{Action, IoErrorKind};
use crate::durability::state::{Durability, FlushFor, PendingFlush};
use crate::ids::FileId;
use crate::page_cache::CachedFile;
use std::collections::VecDeque;

impl Durability {
    /// The backing file of `f` changed: it needs a flush to be durable.
    pub fn mark_unsynced(&mut self, f: &mut CachedFile) {
        self.next_mark += 1;
        f.unsynced = Some(self.next_mark);
    }

    /// Asks the runtime to flush `file` (`f`, unsynced), setting its
    /// backing file's length to `len` first if given.
    pub fn request_flush(
        &mut self,
        file: FileId,
        f: &CachedFile,
        purpose: FlushFor,
        metadata: bool,
        len: Option<u64>,
        out: &mut VecDeque<Action>,
    ) {
        let mark = f.unsynced.expect("only unsynced files are flushed");
        self.next_id += 1;
        let id = self.next_id;
        let flush = PendingFlush {
            file,
            mark,
            purpose,
            len,
        };
        self.pending.insert(id, flush);
        out.push_back(Action::MakeDurable {
            id,
            file,
            metadata,
            len,
        });
    }

    /// Flush `flush` ended with `result`: `f` (its file) is durable up
    /// to what landed before it began; its mark goes if nothing landed
    /// since. A failed flush leaves the mark for the next sync.
    pub fn flushed(
        &self,
        flush: &PendingFlush,
        result: Result<(), IoErrorKind>,
        f: &mut CachedFile,
    ) {
        if result.is_ok() && f.unsynced == Some(flush.mark) {
            f.unsynced = None;
        }
    }
}
