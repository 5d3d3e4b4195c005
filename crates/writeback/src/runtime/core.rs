//! The state behind one lock: the engine, the frames holding cached data,
//! the backing files, and what is in flight. Everything here runs with the
//! lock held and never blocks: I/O is handed to the backend after the lock
//! is released.

use super::executor::{Deferred, Flush, LengthSet, Out, Release};
use super::frames::Frames;
use super::page_map::PageMap;
use crate::io::{BufPool, IoBuf, IoDone, IoOp};
use crate::Writeout;
use std::collections::BTreeMap;
use std::fs::File as StdFile;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use wb_engine::{
    Action, DeviceId, Engine, FileId, IoDir, IoId, IoRequest, PageIndex as Page, TaskId, PAGE_SIZE,
};

const PAGE: usize = PAGE_SIZE as usize;
/// Bytes of finished I/O buffers kept for reuse (io/pool.rs). A fresh
/// buffer costs an allocation and a zeroing pass (and page faults when the
/// allocator got its memory back from the kernel); the pool reuses any
/// spare at least as large as an op, so it misses only while more is in
/// flight than ever before. It is a cap, not a reservation: buffers are
/// only made when no spare fits, so the pool holds at most the peak of
/// I/O in flight at once. 64 MiB is what one device can have in flight
/// with the default knobs (nr_requests 128 x max_sectors_kb 512), 4x the
/// deepest queue wbt allows for writes (16 MiB at 512 KiB each), so
/// steady writeback at the defaults never allocates; larger buffers
/// (a raised max_sectors_kb) are still reused while they fit.
const SPARE_BUF_BYTES_MAX: usize = 64 << 20;
/// At most this many spare buffers (keeps the pool's sorted insert cheap
/// when ops are small): the default nr_requests.
const SPARE_BUFS_MAX: usize = 128;

pub(crate) struct Core {
    pub engine: Engine,
    /// `memory_pages` frames of PAGE_SIZE bytes; the engine assigns them.
    pub frames: std::sync::Arc<Frames>,
    /// Giving memory back under a lowered budget: free frames below this
    /// one are released next (`give_back_memory`); 0: no sweep under way.
    release_below: u32,
    /// The engine's count of freed frames when the last sweep began.
    swept_at_freed: Option<u64>,
    /// The cached pages whose frames hold their data, for reads that do
    /// not take this lock (page_map.rs).
    pub index: Arc<PageMap>,
    /// Backing file of each engine file, by FileId; None once evicted.
    backing: Vec<Option<Arc<StdFile>>>,
    /// (st_dev, st_ino) of each engine file, by FileId.
    keys: Vec<(u64, u64)>,
    /// Length of each engine file, by FileId, for reads that do not take
    /// this lock: published after the data it covers is in the frames.
    pub sizes: Vec<Arc<AtomicU64>>,
    /// When each engine file was last changed through the cache, by
    /// FileId (times.rs).
    pub modified: Vec<super::times::Modified>,
    /// Files whose backing mtime a write-back moved since the last drain:
    /// stamped back once the lock is released (times.rs).
    stamps: Vec<FileId>,
    /// Finished I/O buffers for the next ops (see SPARE_BUF_BYTES_MAX).
    spare_bufs: BufPool,
    /// Whether write requests lend their frames or copy them.
    writeout: Writeout,
    /// Engine files by (st_dev, st_ino), so every handle of a file shares its pages.
    pub by_inode: BTreeMap<(u64, u64), FileId>,
    /// Engine devices by st_dev.
    pub devices: BTreeMap<u64, DeviceId>,
    /// A directory on each engine device's filesystem, by DeviceId (for
    /// its free space, `Action::StatFs`).
    pub device_dirs: Vec<std::path::PathBuf>,
    /// By DeviceId: whether the device's filesystem runs extending
    /// O_DIRECT writes synchronously (`IoOp::blocks`).
    pub extends_synchronously: Vec<bool>,
    inflight: BTreeMap<u64, IoRequest>,
    /// Per task: woken since its last engine call.
    pub woken: Vec<bool>,
    /// Per task: the thread sleeping for it (`Shared::wait`), to be
    /// unparked when the engine wakes the task; None while none sleeps.
    pub sleepers: Vec<Option<std::thread::Thread>>,
    /// When the timer thread means to look at the engine's timeout next
    /// (None: it is not sleeping); an earlier timeout armed meanwhile
    /// wakes it (`Deferred::KickTimer`).
    pub timer_wake_at: Option<wb_engine::Instant>,
    /// Engine tasks of the callers threads act for (caller.rs).
    pub callers: super::caller::CallerTasks,
    pub closed: bool,
    /// Files whose last name is gone while handles were open: unlinked in
    /// the engine when their last handle closes (`Shared::close`).
    pub unlink_on_close: std::collections::BTreeSet<FileId>,
    /// Names to remove at the last step of a file's release (files handed
    /// over by `Cache::remove_later`, still named while they are cut).
    pub remove_at_release: BTreeMap<FileId, std::path::PathBuf>,
    /// Block-layer statistics of each device that has them, for wbt.
    pub diskstats: Vec<(DeviceId, super::diskstats::DiskStats)>,
    /// The trace being recorded, if any (`Cache::start_trace`).
    pub trace: Option<super::trace::RuntimeTrace>,
}

/// Bytes of the caller's write from file offset `pos`, `len` long, to go
/// into frames `frame, frame + 1, ...` (the engine's `Action::CopyIn`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CopyIn {
    pub file: FileId,
    pub pos: u64,
    pub len: u64,
    pub frame: u32,
}

/// The bytes of the caller's write, for the engine's `CopyIn` actions:
/// the data and the file offset of its first byte; `deferred` when the
/// write asked the engine to let it copy outside the lock
/// (`WriteFlags::deferred_copy`).
#[derive(Clone, Copy)]
pub(crate) struct WriteData<'a> {
    pub offset: u64,
    pub data: &'a [u8],
    pub deferred: bool,
}

impl WriteData<'_> {
    /// Copies the bytes of `c` into their frames and indexes their pages.
    /// Holding the lock or not: the pages are the writer's until the
    /// engine hears it is done (`Engine::write_end`), when deferred.
    pub fn copy_in(&self, frames: &Frames, index: &PageMap, c: CopyIn) {
        let from = (c.pos - self.offset) as usize;
        let data = &self.data[from..from + c.len as usize];
        let mut done = 0;
        let mut frame = c.frame;
        while done < data.len() {
            let at = c.pos + done as u64;
            let in_page = (at % PAGE_SIZE) as usize;
            let n = (PAGE - in_page).min(data.len() - done);
            let mut w = frames.write(frame);
            w.bytes()[in_page..in_page + n].copy_from_slice(&data[done..done + n]);
            // The page is dirty and no request has copied it since.
            w.set_overwritable(true);
            drop(w);
            index.insert(c.file, at / PAGE_SIZE, frame);
            done += n;
            frame += 1;
        }
    }
}

impl Core {
    pub fn new(
        engine: Engine,
        frames: Arc<Frames>,
        index: Arc<PageMap>,
        writeout: Writeout,
    ) -> Core {
        Core {
            engine,
            frames,
            index,
            backing: Vec::new(),
            keys: Vec::new(),
            sizes: Vec::new(),
            modified: Vec::new(),
            stamps: Vec::new(),
            spare_bufs: BufPool::new(SPARE_BUF_BYTES_MAX, SPARE_BUFS_MAX),
            writeout,
            by_inode: BTreeMap::new(),
            devices: BTreeMap::new(),
            device_dirs: Vec::new(),
            extends_synchronously: Vec::new(),
            inflight: BTreeMap::new(),
            woken: Vec::new(),
            sleepers: Vec::new(),
            timer_wake_at: None,
            callers: Default::default(),
            closed: false,
            unlink_on_close: Default::default(),
            remove_at_release: Default::default(),
            diskstats: Vec::new(),
            trace: None,
            release_below: 0,
            swept_at_freed: None,
        }
    }

    /// Under a budget lowered below the frames the cache started with,
    /// gives the memory of free frames back to the system, at most
    /// the `release_batch` knob per call: a sweep from the highest frame
    /// down, started again from the top once it reaches frame 0 if frames
    /// were freed since the last sweep began (frames freed meanwhile are
    /// released by the next sweep; ones handed out again take memory
    /// again, within the budget). Each call holds the cache's lock for
    /// one batch of madvise, under a millisecond; ranges without memory
    /// are skipped. Returns whether the sweep has more to do.
    pub fn give_back_memory(&mut self) -> bool {
        let frames = self.engine.frame_pages();
        if self.engine.memory_pages() >= frames {
            self.release_below = 0;
            return false;
        }
        if self.release_below == 0 {
            let freed = self.engine.frames_freed_total();
            if self.swept_at_freed == Some(freed) {
                return false;
            }
            self.swept_at_freed = Some(freed);
            self.release_below = u32::try_from(frames).unwrap_or(u32::MAX);
        }
        // Never beside populating (populate.rs), which would undo it; that
        // lasts a huge page at most, and the next round comes soon.
        let Some(populating) = self.frames.try_populating() else {
            return true;
        };
        let batch_pages = self.engine.config().release_batch_bytes / PAGE_SIZE;
        let ranges = self
            .engine
            .free_frames_below(self.release_below, batch_pages);
        let mut given_back = 0;
        for &(first, count) in &ranges {
            given_back += self.frames.release(&populating, first, count);
        }
        self.engine.note_memory_given_back(given_back);
        self.release_below = ranges.last().map_or(0, |&(first, _)| first);
        self.release_below > 0
    }

    /// Puts the cached pages `first..end` of `file` in the page map (their
    /// frames hold their data: the engine has finished reading them).
    pub fn index_pages(&mut self, file: FileId, first: Page, end: Page) {
        for page in first..end {
            if let Some(frame) = self.engine.page_frame(file, page) {
                self.index.insert(file, page, frame);
            }
        }
    }

    /// Publishes the file's length to readers that do not take this lock;
    /// call after the data it covers is in the frames.
    pub fn publish_size(&self, file: FileId) {
        // The file is the runtime's own, known to the engine.
        if let Some(size) = self.engine.file_size(file) {
            self.sizes[file.index()].store(size, Ordering::Release);
        }
    }

    /// Takes the engine's actions in the order it emitted them. What needs
    /// no I/O is done here, under the lock: pages that left the cache
    /// leave the page map before any frame is written; frames are copied
    /// or zeroed, and the caller's bytes (`write`) copied in, before any
    /// request is built from them; woken tasks are marked; evicted files
    /// are let go. The rest becomes steps of the returned `Out`, in the
    /// same order, carried out once the lock is released (executor.rs).
    /// A write that defers its copies gets them in `Out::copies`.
    ///
    /// Two steps are not the engine's actions and go first. The timer
    /// thread's kick: it should not wait behind a slow step. Then the
    /// mtimes to set back after write-backs: those writes completed
    /// before the engine calls whose actions follow (and a flush among
    /// these then makes the right mtime durable).
    pub fn drain(&mut self, write: Option<WriteData<'_>>) -> Out {
        let mut out = Out::default();
        self.take_stamps(&mut out);
        let mut copied: Option<FileId> = None;
        while let Some(action) = self.engine.poll_action() {
            if let Some(file) = self.apply_action(action, write, &mut out) {
                copied = Some(file);
            }
        }
        if let Some(file) = copied {
            // After the data it covers is in the frames.
            self.publish_size(file);
        }
        if self.timer_kick_needed() {
            out.steps.insert(0, Deferred::KickTimer);
        }
        out
    }

    /// Carries out one engine action (`drain`), or leaves it in `out` for
    /// after the lock; the file whose bytes it copied in under the lock,
    /// if it did.
    fn apply_action(
        &mut self,
        action: Action,
        write: Option<WriteData<'_>>,
        out: &mut Out,
    ) -> Option<FileId> {
        match action {
            Action::Unmapped { file, first, end } => self.unmap_pages(file, first, end),
            Action::CopyFrames { from, to, count } => self.copy_frames(from, to, count),
            Action::ZeroFrames { first, count } => self.zero_frames(first, count),
            Action::CopyIn {
                file,
                pos,
                len,
                frame,
                ..
            } => {
                let c = CopyIn {
                    file,
                    pos,
                    len,
                    frame,
                };
                return self.copy_in_or_defer(c, write, out);
            }
            Action::Submit(req) if req.direct => out.push(Deferred::Refuse(req.id)),
            Action::Submit(req) => {
                let commit = req.commit;
                let op = self.build_op(req);
                out.push(Deferred::Submit { op, commit });
            }
            Action::Wake(task) => {
                self.woken[task.index()] = true;
                if let Some(thread) = self.sleepers[task.index()].clone() {
                    out.push(Deferred::Wake(task, thread));
                }
            }
            Action::Release { id, file, step } => {
                let release = self.release_step(id, file, step);
                out.push(Deferred::Release(release));
            }
            Action::StatFs { device } => match self.device_dirs.get(device.index()) {
                Some(dir) => out.push(Deferred::StatFs(device, dir.clone())),
                // No directory to ask: unlimited, rather than writers
                // waiting for a report that never comes.
                None => {
                    let _ = self.engine.space_unknown(device);
                }
            },
            Action::Evict { file } => {
                // Its pages are gone; the engine will not use the id again.
                self.backing[file.index()] = None;
                self.forget_inode(file);
            }
            Action::MakeDurable {
                id,
                file,
                metadata,
                len,
            } => out.push(Deferred::Flush(Flush {
                id,
                backing: self.backing(file),
                len,
                metadata,
                modified: Arc::clone(&self.modified[file.index()]),
            })),
            Action::SetLength { id, file, len } => out.push(Deferred::SetLength(LengthSet {
                id,
                backing: self.backing(file),
                len,
                modified: Arc::clone(&self.modified[file.index()]),
            })),
        }
        None
    }

    /// Takes the pages `first..end` of `file`, which left the cache, out
    /// of the page map.
    fn unmap_pages(&self, file: FileId, first: Page, end: Page) {
        for page in first..end {
            if let Some(frame) = self.index.remove(file, page) {
                // Gone: later writes of the page take the engine.
                self.frames.write(frame).set_overwritable(false);
            }
        }
    }

    /// Copies `count` frames from `from` on to `to` on.
    fn copy_frames(&self, from: u32, to: u32, count: u32) {
        // A page under writeback goes on in a copy (stable.rs);
        // through a buffer, as both frames may share a lock.
        let mut page = [0u8; wb_engine::PAGE_SIZE as usize];
        for i in 0..count {
            page.copy_from_slice(self.frames.read_one(from + i).bytes());
            self.frames.write(to + i).bytes().copy_from_slice(&page);
        }
    }

    /// Zeroes the fresh frames `first..first + count`.
    fn zero_frames(&self, first: u32, count: u32) {
        for frame in first..first + count {
            let mut w = self.frames.write(frame);
            w.bytes().fill(0);
            w.set_overwritable(false);
        }
    }

    /// Copies the caller's bytes of `c` into their frames now, or leaves
    /// the copy in `out` for after the lock when the write defers it; the
    /// file, if copied now.
    fn copy_in_or_defer(
        &mut self,
        c: CopyIn,
        write: Option<WriteData<'_>>,
        out: &mut Out,
    ) -> Option<FileId> {
        // Only the writer's own engine calls copy in; they pass
        // their data.
        let Some(w) = write else {
            debug_assert!(false, "CopyIn without the writer's data");
            return None;
        };
        if w.deferred {
            out.copies.push(c);
            None
        } else {
            w.copy_in(&self.frames, &self.index, c);
            Some(c.file)
        }
    }

    /// A release step of `file` to carry out without the lock: a removal
    /// takes the backing file out of the table (its last close frees the
    /// blocks there) with the name to remove.
    fn release_step(&mut self, id: u64, file: FileId, step: wb_engine::ReleaseStep) -> Release {
        let slot = &mut self.backing[file.index()];
        let (backing, name) = match step {
            wb_engine::ReleaseStep::Remove => (slot.take(), self.remove_at_release.remove(&file)),
            wb_engine::ReleaseStep::Truncate { .. } => (slot.clone(), None),
            wb_engine::ReleaseStep::Start => (None, None),
        };
        Release {
            id,
            backing,
            modified: Arc::clone(&self.modified[file.index()]),
            name,
            step,
        }
    }

    /// Leaves in `out` the mtimes to set back on the files write-backs
    /// moved since the last drain, once each (`Deferred::Stamp`).
    fn take_stamps(&mut self, out: &mut Out) {
        self.stamps.sort_unstable();
        self.stamps.dedup();
        for file in self.stamps.drain(..) {
            // A file evicted meanwhile was stamped before it went.
            if let Some(backing) = &self.backing[file.index()] {
                out.push(Deferred::Stamp(super::times::Stamp {
                    backing: Arc::clone(backing),
                    modified: Arc::clone(&self.modified[file.index()]),
                }));
            }
        }
    }

    /// Whether the timer thread is to be woken (`Deferred::KickTimer`):
    /// the engine's next timeout comes before the thread means to look.
    fn timer_kick_needed(&mut self) -> bool {
        if let (Some(next), Some(wake)) = (self.engine.poll_timeout(), self.timer_wake_at) {
            if next < wake {
                self.timer_wake_at = Some(next);
                return true;
            }
        }
        false
    }

    fn build_op(&mut self, req: IoRequest) -> IoOp {
        let write = req.dir == IoDir::Write;
        let buf = if write {
            self.write_buf(&req)
        } else {
            // A reused buffer holds old data: a read is filled by the
            // device (the backends zero a short read's tail). Its capacity
            // may be larger: only its length is transferred.
            IoBuf::Owned(self.spare_bufs.take(req.pages as usize * PAGE))
        };
        let op = IoOp {
            id: req.id.0,
            file: self.backing(req.file),
            write,
            offset: req.first_page * PAGE_SIZE,
            buf,
            // A write of the file's partial last page stops at its end.
            len: req.bytes as usize,
            // The engine says which writes extend their file (and hands
            // those over one per file at a time); the filesystem, whether
            // the kernel then runs them synchronously.
            blocks: req.extends
                && self
                    .extends_synchronously
                    .get(req.device.index())
                    .copied()
                    .unwrap_or(false),
        };
        if let Some(trace) = self.trace.as_mut() {
            trace.submitted(&self.engine, &req);
        }
        self.inflight.insert(req.id.0, req);
        op
    }

    /// The memory a write request is written from: its pages' frames,
    /// lent as they are (zero-copy), or copied into a buffer
    /// (`Writeout::Copy`).
    fn write_buf(&mut self, req: &IoRequest) -> IoBuf {
        let page_frames: Vec<u32> = (0..req.pages as u64)
            .map(|i| {
                self.engine
                    .page_frame(req.file, req.first_page + i)
                    .expect("page under writeback is cached")
            })
            .collect();
        let frames = self.frames.read(&page_frames);
        // What the request carries is what is written back; later writes
        // of these pages go through the engine, which dirties them again
        // (and, per stable_writes, waits or gives them a copy).
        self.frames.clear_overwritable(&page_frames);
        match self.writeout {
            Writeout::ZeroCopy => {
                drop(frames);
                IoBuf::Lent(self.frames.lend(&page_frames))
            }
            Writeout::Copy => {
                // A reused buffer holds old data: all of its length is
                // overwritten here.
                let mut buf = self.spare_bufs.take(page_frames.len() * PAGE);
                for (i, &frame) in page_frames.iter().enumerate() {
                    buf.as_mut_slice()[i * PAGE..(i + 1) * PAGE]
                        .copy_from_slice(frames.frame(frame));
                }
                IoBuf::Owned(buf)
            }
        }
    }

    /// The frames (first, end) a finished read of at least the
    /// `prefault_read_min` knob will be copied into, as the engine holds
    /// them now: a hint for backing them with memory before `complete`
    /// copies under this lock (populate.rs). None for other ops, for
    /// frames scattered over the arena, or while the budget is lowered
    /// (memory is then being given back).
    pub fn read_frames_hint(&self, id: u64) -> Option<(u64, u64)> {
        let req = self.inflight.get(&id)?;
        let min_bytes = self.engine.config().prefault_read_min_bytes;
        if req.dir != IoDir::Read
            || min_bytes == 0
            || (req.pages as u64) * PAGE_SIZE < min_bytes
            || self.engine.memory_pages() < self.engine.frame_pages()
        {
            return None;
        }
        let min_pages = min_bytes.div_ceil(PAGE_SIZE);
        let frames = (0..req.pages as u64)
            .filter_map(|i| self.engine.page_frame(req.file, req.first_page + i));
        let (first, last) = frames.fold((u32::MAX, 0), |(lo, hi), f| (lo.min(f), hi.max(f)));
        // Only frames together (as first fit gives a read of a fresh
        // cache): scattered ones would span memory the read does not use.
        let span = (last as u64 + 1).saturating_sub(first as u64);
        (first <= last && span <= req.pages as u64 + min_pages)
            .then_some((first as u64, last as u64 + 1))
    }

    /// A backend op finished: fill the frames of a read, tell the engine.
    pub fn complete(&mut self, done: IoDone, now: wb_engine::Instant) {
        let Some(req) = self.inflight.remove(&done.id) else {
            return;
        };
        if let Some(trace) = self.trace.as_mut() {
            trace.completed(done.id);
        }
        let result = match &done.result {
            Ok(_) => Ok(()),
            Err(e) => Err(crate::error::io_error_kind(e)),
        };
        // A finished read fills its frames before the engine calls them valid.
        if let (IoDir::Read, Ok(()), Some(buf)) = (req.dir, &result, done.buf.owned()) {
            for i in 0..req.pages as u64 {
                if let Some(frame) = self.engine.page_frame(req.file, req.first_page + i) {
                    let at = i as usize * PAGE;
                    self.frames
                        .write(frame)
                        .bytes()
                        .copy_from_slice(&buf.as_slice()[at..at + PAGE]);
                }
            }
        }
        // A landed write moved the backing file's mtime (times.rs).
        if req.dir == IoDir::Write
            && result.is_ok()
            && self.modified[req.file.index()].load(Ordering::Relaxed) != 0
        {
            self.stamps.push(req.file);
        }
        self.engine.io_complete(now, IoId(done.id), result);
        // The backend has handed the buffer back: no op uses it any more
        // (lent frames are the engine's again once it knows the write ended).
        if let Some(buf) = done.buf.into_owned() {
            self.spare_bufs.give(buf);
        }
    }

    /// Adds a file the engine does not know yet.
    /// The engine may give a new file the id of one it evicted (evict/):
    /// its slots are then taken over, after its Evict was carried out.
    pub fn add_file(&mut self, file: FileId, backing: StdFile, key: (u64, u64), size: u64) {
        let (backing, size) = (Some(Arc::new(backing)), Arc::new(AtomicU64::new(size)));
        let modified = super::times::Modified::default();
        let i = file.index();
        if i < self.backing.len() {
            assert!(self.backing[i].is_none(), "a reused id was evicted first");
            self.backing[i] = backing;
            self.keys[i] = key;
            self.sizes[i] = size;
            self.modified[i] = modified;
        } else {
            assert_eq!(i, self.backing.len(), "new ids come in order");
            self.backing.push(backing);
            self.keys.push(key);
            self.sizes.push(size);
            self.modified.push(modified);
        }
        self.by_inode.insert(key, file);
    }

    /// `file` no longer stands for its (st_dev, st_ino): it was evicted,
    /// or its last name is gone and its inode number may soon belong to a
    /// new file. Leaves a newer file's entry alone.
    pub fn forget_inode(&mut self, file: FileId) {
        let key = self.keys[file.index()];
        if self.by_inode.get(&key) == Some(&file) {
            self.by_inode.remove(&key);
        }
    }

    /// The backing file of a file in use (open, or with I/O).
    pub fn backing(&self, file: FileId) -> Arc<StdFile> {
        let backing = self.backing[file.index()].as_ref();
        Arc::clone(backing.expect("a file in use is not evicted"))
    }

    pub fn add_task(&mut self) -> TaskId {
        let task = self.engine.add_task();
        self.add_task_slots();
        task
    }

    /// The runtime's per-task state for a task the engine just added.
    pub fn add_task_slots(&mut self) {
        self.woken.push(false);
        self.sleepers.push(None);
    }

    /// The frames of the cached bytes of `file` from `offset`, `len` long,
    /// as (frame, offset in page, length) pieces.
    pub fn pieces(&self, file: FileId, offset: u64, len: usize) -> Vec<(u32, usize, usize)> {
        let mut pieces = Vec::new();
        let mut done = 0;
        while done < len {
            let pos = offset + done as u64;
            let in_page = (pos % PAGE_SIZE) as usize;
            let n = (PAGE - in_page).min(len - done);
            let frame = self
                .engine
                .page_frame(file, pos / PAGE_SIZE)
                .expect("read page is cached");
            pieces.push((frame, in_page, n));
            done += n;
        }
        pieces
    }
}
