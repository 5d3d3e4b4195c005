//! fsync and sync with Linux's integrity semantics: write what was dirty
//! when the call began (tagged up front, so a writer that keeps dirtying
//! cannot livelock us), then wait for every write of those files issued up
//! to the point our own writing finished, and report write-back errors.
//!
//! Files here: the operations in progress and the ranges they tagged
//! (table.rs); this file holds the engine's side: starting, writing,
//! waiting and finishing them.

use crate::action::WbReason;
use crate::action::{StallReason, Step};
use crate::durability::state::FlushFor;
use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::{DeviceId, FileId, HandleId, IoId, PageIndex, TaskId};
use crate::page_cache::{PG_LOCKED, PG_WRITEBACK};
use crate::task::{Op, WaitKey};
use crate::time::Instant;

/// Planted bugs (features `planted-skip-flush`, `planted-early-ack`, for
/// the simulator's oracle tests only): a sync that does not flush the
/// device, and one acknowledged before its writes complete.
const PLANTED_SKIP_FLUSH: bool = cfg!(feature = "planted-skip-flush");
const PLANTED_EARLY_ACK: bool = cfg!(feature = "planted-early-ack");

pub(crate) mod table;

pub(crate) use table::{SyncFile, SyncOp};

impl Engine {
    /// Makes the file's data durable (fsync). Reports a write-back error
    /// this handle has not seen yet.
    pub fn fsync(
        &mut self,
        now: Instant,
        task: TaskId,
        handle: HandleId,
    ) -> Result<Step, EngineError> {
        self.fsync_handle(now, task, handle, false)
    }

    /// Writes back one file and makes it durable, for a runtime about to
    /// let go of it (no handle: like `sync`, it reports write-back errors
    /// since the call began).
    pub fn sync_file(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
    ) -> Result<Step, EngineError> {
        self.sync_one(now, task, file, false)
    }

    /// Writes back one file's dirty data and waits until it has landed,
    /// without a flush (Linux's filemap_write_and_wait): a crash of the
    /// process then loses none of it (a power cut still may). For a front
    /// end about to replace a file by renaming this one over it, as ext4's
    /// auto_da_alloc does. Reports write-back errors since the call began
    /// (no handle's error sequence moves: the next fsync still reports
    /// them).
    pub fn write_back_file(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
    ) -> Result<Step, EngineError> {
        self.sync_one(now, task, file, true)
    }

    /// `sync_file` (with a flush) or `write_back_file` (without).
    fn sync_one(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
        no_flush: bool,
    ) -> Result<Step, EngineError> {
        if file.index() >= self.cache.files.len() {
            return Err(EngineError::BadFile(file));
        }
        self.start_sync(now, task, None, vec![file], false, no_flush)
    }

    /// As `fsync`, and the file's metadata too (fsync rather than fdatasync).
    pub fn fsync_all(
        &mut self,
        now: Instant,
        task: TaskId,
        handle: HandleId,
    ) -> Result<Step, EngineError> {
        self.fsync_handle(now, task, handle, true)
    }

    fn fsync_handle(
        &mut self,
        now: Instant,
        task: TaskId,
        handle: HandleId,
        metadata: bool,
    ) -> Result<Step, EngineError> {
        let file = self.handle(handle)?.file;
        self.start_sync(now, task, Some(handle), vec![file], metadata, false)
    }

    /// Writes back and waits for every file (sync).
    pub fn sync(&mut self, now: Instant, task: TaskId) -> Result<Step, EngineError> {
        let files = (0..self.cache.files.len() as u32)
            .map(FileId)
            .filter(|f| {
                let f = &self.cache.files[f.index()];
                f.counts().dirty > 0 || !f.inflight_writes.is_empty() || f.unsynced.is_some()
            })
            .collect();
        self.start_sync(now, task, None, files, false, false)
    }

    fn start_sync(
        &mut self,
        now: Instant,
        task: TaskId,
        handle: Option<HandleId>,
        files: Vec<FileId>,
        metadata: bool,
        no_flush: bool,
    ) -> Result<Step, EngineError> {
        let id = self.syncs.next_id;
        self.tasks.begin(task, Op::Sync { op: id })?;
        self.syncs.next_id += 1;
        let mut devices: Vec<DeviceId> = Vec::new();
        let files = files
            .into_iter()
            .map(|file| {
                let f = &self.cache.files[file.index()];
                if !devices.contains(&f.device) {
                    devices.push(f.device);
                }
                SyncFile::new(file, f)
            })
            .collect();
        self.syncs.ops.insert(
            id,
            SyncOp {
                handle,
                files,
                barrier: None,
                metadata,
                flushes_asked: false,
                flushes_left: 0,
                flush_error: None,
                reason: WbReason::Sync,
                issue_only: false,
                no_flush,
                commit: None,
            },
        );
        let op = self.syncs.ops.get_mut(&id).expect("just inserted");
        if op.handle.is_some() && devices.len() == 1 && op.is_commit() {
            op.commit = Some((devices[0], now));
        }
        for device in devices {
            self.pump(now, device);
        }
        self.continue_sync(now, task, id)
    }

    /// Starts submitting the dirty pages of `first..end` of `file` without
    /// waiting for them (an uncached write's inline flush); returns the
    /// op's id, which `submission_done` answers for.
    pub(crate) fn start_submission(
        &mut self,
        now: Instant,
        file: FileId,
        first: PageIndex,
        end: PageIndex,
    ) -> u64 {
        let id = self.syncs.next_id;
        self.syncs.next_id += 1;
        let f = &self.cache.files[file.index()];
        let device = f.device;
        let sf = SyncFile::new_range(file, f, first, end);
        self.syncs.ops.insert(
            id,
            SyncOp {
                handle: None,
                files: vec![sf],
                barrier: None,
                metadata: false,
                flushes_asked: false,
                flushes_left: 0,
                flush_error: None,
                reason: WbReason::Dontcache,
                issue_only: true,
                no_flush: true,
                commit: None,
            },
        );
        self.pump(now, device);
        id
    }

    /// Whether submission op `id` has submitted everything; if so it is
    /// retired (an op that finished while pumped is retired already).
    pub(crate) fn submission_done(&mut self, id: u64) -> bool {
        if !self.syncs.ops.contains_key(&id) {
            return true;
        }
        self.sync_check_issued(id);
        let done = self.syncs.ops[&id].barrier.is_some();
        if done {
            self.syncs.ops.remove(&id);
        }
        done
    }

    pub(crate) fn continue_sync(
        &mut self,
        now: Instant,
        task: TaskId,
        id: u64,
    ) -> Result<Step, EngineError> {
        self.sync_check_issued(id);
        if !self.sync_done(id) && !PLANTED_EARLY_ACK {
            return Ok(self
                .tasks
                .wait_for(now, task, StallReason::Sync, WaitKey::Sync(id)));
        }
        // sync() also waits for the deferred releases of unlinked files
        // (as syncfs flushes XFS's inodegc queue).
        let op = &self.syncs.ops[&id];
        if op.handle.is_none() && !op.issue_only && !op.no_flush {
            if let Some(d) = self.devices.iter().position(|d| d.backlog.busy()) {
                let key = WaitKey::Backlog(DeviceId(d as u32));
                return Ok(self.tasks.wait_for(now, task, StallReason::Sync, key));
            }
        }
        // The writes are done: now make what landed durable.
        let op = &self.syncs.ops[&id];
        if !op.flushes_asked {
            let files: Vec<FileId> = op.files.iter().map(|sf| sf.file).collect();
            let metadata = op.metadata;
            let asked = if PLANTED_SKIP_FLUSH || op.no_flush {
                0
            } else {
                self.request_flushes(id, &files, metadata)
            };
            let op = self.syncs.ops.get_mut(&id).expect("sync op exists");
            op.flushes_asked = true;
            op.flushes_left = asked;
        }
        if self.syncs.ops[&id].flushes_left > 0 {
            return Ok(self
                .tasks
                .wait_for(now, task, StallReason::Sync, WaitKey::Sync(id)));
        }
        let op = self.syncs.ops.remove(&id).expect("sync op exists");
        let flushed = op
            .flush_error
            .map_or(Ok(()), |e| Err(EngineError::Durability(e)));
        let result = self.sync_result(&op).and(flushed);
        self.tasks.finish(task, result.map(|()| Step::Done))
    }

    /// Sets the barrier once every tagged page is written or being written
    /// (also when there was nothing to write at all).
    fn sync_check_issued(&mut self, id: u64) {
        let op = &self.syncs.ops[&id];
        if op.barrier.is_some() {
            return;
        }
        let all_issued = op
            .files
            .iter()
            .all(|sf| sf.first_dirty(&self.cache.files[sf.file.index()]).is_none());
        if all_issued {
            self.syncs.ops.get_mut(&id).expect("exists").barrier = Some(IoId(self.io.next_io - 1));
        }
    }

    fn sync_done(&self, id: u64) -> bool {
        let op = &self.syncs.ops[&id];
        let Some(barrier) = op.barrier else {
            return false;
        };
        op.files.iter().all(|sf| {
            self.cache.files[sf.file.index()]
                .inflight_writes
                .first()
                .is_none_or(|&first| first > barrier)
        })
    }

    fn sync_result(&mut self, op: &SyncOp) -> Result<(), EngineError> {
        if let Some(handle) = op.handle {
            // errseq: report each error once per handle.
            let file = self.handle(handle)?.file;
            let (seq, err) = {
                let f = &self.cache.files[file.index()];
                (f.err_seq, f.last_err)
            };
            let h = self.handles.get_mut(handle).expect("checked");
            if h.err_seen != seq {
                h.err_seen = seq;
                return Err(EngineError::WriteBack(err.expect("an error was recorded")));
            }
            return Ok(());
        }
        for sf in &op.files {
            let f = &self.cache.files[sf.file.index()];
            if f.err_seq != sf.err_seq_start {
                return Err(EngineError::WriteBack(
                    f.last_err.expect("an error was recorded"),
                ));
            }
        }
        Ok(())
    }

    /// Wakes sync callers whose writes are all done.
    pub(crate) fn check_syncs(&mut self) {
        let done: Vec<u64> = self
            .syncs
            .ops
            .keys()
            .copied()
            .filter(|&id| self.sync_done(id))
            .collect();
        for id in done {
            self.tasks.wake(WaitKey::Sync(id), &mut self.actions);
        }
    }

    /// Issues integrity writes for sync ops on `device`. Returns true if one was issued.
    pub(crate) fn pump_syncs(&mut self, now: Instant, device: DeviceId) -> bool {
        let ids: Vec<u64> = self.syncs.ops.keys().copied().collect();
        for id in ids {
            if self.syncs.ops[&id].barrier.is_some() {
                continue;
            }
            match self.sync_next(device, id) {
                SyncNext::Write {
                    slot,
                    file,
                    start,
                    pages,
                } => {
                    let reason = self.syncs.ops[&id].reason;
                    let class = crate::flusher::class_of(reason);
                    let recent = self.devices[device.index()].recent_dirty_sleep(now);
                    // A commit (an fsync of a few pages) is someone waiting,
                    // as a read is, and like a read it is never held by
                    // wbt (ours; Linux does not throttle O_DIRECT sync
                    // writes either): at depth 1 it would wait for the
                    // flusher's write in flight before it could even go.
                    let commit = self.syncs.ops[&id].is_commit();
                    let wbt = &mut self.devices[device.index()].wbt;
                    if !commit && !wbt.may_issue(class, now, recent) {
                        wbt.note_refused(class, now);
                        return false;
                    }
                    // Only now are the pages taken off the op's list.
                    self.syncs.ops.get_mut(&id).expect("exists").files[slot].pos = start + pages;
                    let req = self.start_writeback(file, start, pages, class, reason);
                    self.issue(now, req, true, commit);
                    return true;
                }
                SyncNext::Blocked => {}
                SyncNext::Finished => {
                    // Everything tagged is issued: from here on only wait.
                    let barrier = IoId(self.io.next_io - 1);
                    let op = self.syncs.ops.get_mut(&id).expect("exists");
                    op.barrier = Some(barrier);
                    if op.issue_only {
                        // Nothing to wait for: retire it now, so an op
                        // whose starter does not come back (a direct
                        // write's flush) does not stay behind.
                        self.syncs.ops.remove(&id);
                        self.tasks.wake(WaitKey::Sync(id), &mut self.actions);
                    } else if self.sync_done(id) {
                        self.tasks.wake(WaitKey::Sync(id), &mut self.actions);
                    }
                }
            }
        }
        false
    }

    /// The next run of tagged pages to write for sync op `id` on `device`.
    fn sync_next(&mut self, device: DeviceId, id: u64) -> SyncNext {
        let max_pages = self.devices[device.index()].config.max_request_pages();
        let op = self.syncs.ops.get_mut(&id).expect("exists");
        let issue_only = op.issue_only;
        let mut all_done = true;
        for (slot, sf) in op.files.iter_mut().enumerate() {
            let f = &self.cache.files[sf.file.index()];
            let Some(mut start) = sf.skip_clean(f) else {
                continue;
            };
            if issue_only {
                // WB_SYNC_NONE: pages under writeback are somebody else's.
                while let Some((s, run)) =
                    f.run_at(start).filter(|(_, r)| r.flags & PG_WRITEBACK != 0)
                {
                    sf.pos = s + run.len;
                    match sf.skip_clean(f) {
                        Some(next) => start = next,
                        None => break,
                    }
                }
                if sf.range >= sf.ranges.len() {
                    continue;
                }
            }
            all_done = false;
            if f.device != device {
                continue;
            }
            if f.flags(start).is_some_and(|fl| fl & PG_WRITEBACK != 0) {
                // Dirty again while under writeback: wait for that write first.
                return SyncNext::Blocked;
            }
            if f.flags(start).is_some_and(|fl| fl & PG_LOCKED != 0) {
                // A writer is copying into it: write_end pumps the device.
                return SyncNext::Blocked;
            }
            if f.resizing.is_some() {
                // Its backing file's length is being set: length_set pumps
                // the device (backing_len/).
                return SyncNext::Blocked;
            }
            let tagged_end = sf.ranges[sf.range].1;
            let pages = f.writable_len(start, max_pages.min(tagged_end - start));
            return SyncNext::Write {
                slot,
                file: sf.file,
                start,
                pages,
            };
        }
        if all_done {
            SyncNext::Finished
        } else {
            SyncNext::Blocked
        }
    }

    /// Asks the runtime to flush every marked file of sync op `sync`;
    /// returns how many flushes it asked for.
    fn request_flushes(&mut self, sync: u64, files: &[FileId], metadata: bool) -> u32 {
        let mut asked = 0;
        for &file in files {
            if self.cache.files[file.index()].unsynced.is_some() {
                self.request_flush(file, FlushFor::Sync(sync), metadata);
                asked += 1;
            }
        }
        asked
    }

    /// Asks the runtime to flush one unsynced file (durability/), its
    /// backing file's length set first as backing_len/ says.
    pub(crate) fn request_flush(&mut self, file: FileId, purpose: FlushFor, metadata: bool) {
        let f = &self.cache.files[file.index()];
        let len = crate::backing_len::durable_len(f, &self.io);
        let out = &mut self.actions;
        self.durability
            .request_flush(file, f, purpose, metadata, len, out);
    }

    /// Whether `file` has changes a flush has not made durable.
    pub fn file_unsynced(&self, file: FileId) -> bool {
        self.cache
            .files
            .get(file.index())
            .is_some_and(|f| f.unsynced.is_some())
    }
}

enum SyncNext {
    /// Write `pages` pages from `start` of the op's file at `slot`.
    Write {
        slot: usize,
        file: FileId,
        start: PageIndex,
        pages: u64,
    },
    Blocked,
    Finished,
}
