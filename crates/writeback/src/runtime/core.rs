//! The state behind one lock: the engine, the frames holding cached data,
//! the backing files, and what is in flight. Everything here runs with the
//! lock held and never blocks: I/O is handed to the backend after the lock
//! is released.

use super::frames::Frames;
use crate::io::{BufPool, IoDone};
use crate::Writeout;
use std::collections::BTreeMap;
use std::fs::File as StdFile;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use wb_engine::{DeviceId, Engine, FileId, IoDir, IoId, IoRequest, PageMap, TaskId, PAGE_SIZE};

pub(super) const PAGE: usize = PAGE_SIZE as usize;
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
    /// The cached pages whose frames hold their data, for reads and
    /// overwrites that do not take this lock (`wb_engine::page_map`).
    pub page_map: Arc<PageMap>,
    /// Backing file of each engine file, by FileId; None once evicted.
    pub(super) backing: Vec<Option<Arc<StdFile>>>,
    /// (st_dev, st_ino) of each engine file, by FileId.
    pub(super) keys: Vec<(u64, u64)>,
    /// Length of each engine file, by FileId, for reads that do not take
    /// this lock: published after the data it covers is in the frames.
    pub sizes: Vec<Arc<AtomicU64>>,
    /// When each engine file was last changed through the cache, by
    /// FileId (times.rs).
    pub modified: Vec<super::times::Modified>,
    /// Files whose backing mtime a write-back moved since the last drain:
    /// stamped back once the lock is released (times.rs).
    pub(super) stamps: Vec<FileId>,
    /// Finished I/O buffers for the next ops (see SPARE_BUF_BYTES_MAX).
    pub(super) spare_bufs: BufPool,
    /// Whether write requests lend their frames or copy them.
    pub(super) writeout: Writeout,
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
    pub(super) inflight: BTreeMap<u64, IoRequest>,
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
    /// Copies the bytes of `c` into their frames and maps their pages.
    /// Holding the lock or not: the pages are the writer's until the
    /// engine hears it is done (`Engine::write_end`), when deferred
    /// (page_map, rule 1).
    pub fn copy_in(&self, frames: &Frames, page_map: &PageMap, c: CopyIn) {
        let from = (c.pos - self.offset) as usize;
        let data = &self.data[from..from + c.len as usize];
        let mut done = 0;
        let mut frame = c.frame;
        while done < data.len() {
            let at = c.pos + done as u64;
            let in_page = (at % PAGE_SIZE) as usize;
            let n = (PAGE - in_page).min(data.len() - done);
            frames.write(frame).bytes()[in_page..in_page + n]
                .copy_from_slice(&data[done..done + n]);
            // The page is dirty and no request has copied it since.
            page_map.copied_in(c.file, at, n as u64, frame);
            done += n;
            frame += 1;
        }
    }
}

impl Core {
    pub fn new(
        engine: Engine,
        frames: Arc<Frames>,
        page_map: Arc<PageMap>,
        writeout: Writeout,
    ) -> Core {
        Core {
            engine,
            frames,
            page_map,
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

    /// Publishes the file's length to readers that do not take this lock;
    /// call after the data it covers is in the frames.
    pub fn publish_size(&self, file: FileId) {
        // The file is the runtime's own, known to the engine.
        if let Some(size) = self.engine.file_size(file) {
            self.sizes[file.index()].store(size, Ordering::Release);
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
