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
use crate::durability::state::{FlushFor, PendingFlush};
use crate::engine::Engine;
use crate::ids::FileId;
use crate::task::WaitKey;
use crate::time::Instant;

impl Engine {
    /// The backing file of `file` changed: it needs a flush to be durable.
    pub(crate) fn mark_unsynced(&mut self, file: FileId) {
        self.durability.next_mark += 1;
        self.cache.files[file.index()].unsynced = Some(self.durability.next_mark);
    }

    /// Asks the runtime to flush every marked file of sync op `sync`;
    /// returns how many flushes it asked for.
    pub(crate) fn request_flushes(&mut self, sync: u64, files: &[FileId], metadata: bool) -> u32 {
        let mut asked = 0;
        for &file in files {
            if self.cache.files[file.index()].unsynced.is_some() {
                self.request_flush(file, FlushFor::Sync(sync), metadata);
                asked += 1;
            }
        }
        asked
    }

    /// Asks the runtime to flush one unsynced file.
    pub(crate) fn request_flush(&mut self, file: FileId, purpose: FlushFor, metadata: bool) {
        let mark = self.cache.files[file.index()]
            .unsynced
            .expect("only unsynced files are flushed");
        self.durability.next_id += 1;
        let id = self.durability.next_id;
        let len = self.durable_len(file);
        self.durability.pending.insert(
            id,
            PendingFlush {
                file,
                mark,
                purpose,
                len,
            },
        );
        self.actions.push_back(Action::MakeDurable {
            id,
            file,
            metadata,
            len,
        });
    }

    /// The runtime finished flush `id` at `now`. Unknown ids are ignored: a
    /// runtime bug must not corrupt the cache.
    pub fn durable_done(&mut self, now: Instant, id: u64, result: Result<(), IoErrorKind>) {
        let Some(flush) = self.durability.pending.remove(&id) else {
            return;
        };
        if let (Ok(()), Some(len)) = (result, flush.len) {
            self.backing_len_set(flush.file, len);
        }
        let f = &mut self.cache.files[flush.file.index()];
        if result.is_ok() && f.unsynced == Some(flush.mark) {
            f.unsynced = None;
        }
        match flush.purpose {
            FlushFor::Sync(sync) => {
                if let Some(op) = self.syncs.ops.get_mut(&sync) {
                    op.flushes_left -= 1;
                    if let Err(e) = result {
                        op.flush_error.get_or_insert(e);
                    }
                    if op.flushes_left == 0 {
                        // A commit's time, for wbt: from its call to here.
                        if let Some((device, began)) = op.commit {
                            let latency_ns = now.since_ns(began);
                            self.devices[device.index()]
                                .wbt
                                .on_commit_done(now, latency_ns);
                        }
                        self.tasks.wake(WaitKey::Sync(sync), &mut self.actions);
                    }
                }
            }
            FlushFor::Eviction => self.eviction_flushed(flush.file),
        }
    }

    /// Whether `file` has changes a flush has not made durable.
    pub fn file_unsynced(&self, file: FileId) -> bool {
        self.cache
            .files
            .get(file.index())
            .is_some_and(|f| f.unsynced.is_some())
    }
}
