//! The state behind one lock: the engine, the frames holding cached data,
//! the backing files, and what is in flight. Everything here runs with the
//! lock held and never blocks: I/O is handed to the backend after the lock
//! is released.

use super::frames::Frames;
use super::page_index::PageIndex;
use crate::io::{AlignedBuf, IoDone, IoOp};
use std::collections::BTreeMap;
use std::fs::File as StdFile;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use wb_engine::{
    Action, DeviceId, Engine, FileId, IoDir, IoId, IoRequest, PageIndex as Page, TaskId, PAGE_SIZE,
};

const PAGE: usize = PAGE_SIZE as usize;
/// I/O buffers kept for reuse. Fresh large buffers come from the kernel as
/// new zeroed pages, and zeroing them cost a third of a FUSE writer's CPU
/// time; 32 covers the deepest queue wbt allows (16 MiB at 512 KiB each).
const SPARE_BUFS_MAX: usize = 32;

pub(crate) struct Core {
    pub engine: Engine,
    /// `memory_pages` frames of PAGE_SIZE bytes; the engine assigns them.
    pub frames: std::sync::Arc<Frames>,
    /// The cached pages whose frames hold their data, for reads that do
    /// not take this lock (page_index.rs).
    pub index: Arc<PageIndex>,
    /// Backing file of each engine file, by FileId; None once evicted.
    backing: Vec<Option<Arc<StdFile>>>,
    /// (st_dev, st_ino) of each engine file, by FileId.
    keys: Vec<(u64, u64)>,
    /// Files with writes completed since their backing file was last made
    /// durable (fdatasync), with the mark of the latest: what `Cache::sync`
    /// must sync, and what may not be evicted.
    unsynced: BTreeMap<FileId, u64>,
    next_mark: u64,
    /// Length of each engine file, by FileId, for reads that do not take
    /// this lock: published after the data it covers is in the frames.
    pub sizes: Vec<Arc<AtomicU64>>,
    /// Scratch for the engine's unmapped pages: (file, first, end).
    unmapped: Vec<(FileId, Page, Page)>,
    /// Finished I/O buffers for the next ops (see SPARE_BUFS_MAX).
    spare_bufs: Vec<AlignedBuf>,
    /// Engine files by (st_dev, st_ino), so every handle of a file shares its pages.
    pub by_inode: BTreeMap<(u64, u64), FileId>,
    /// Engine devices by st_dev.
    pub devices: BTreeMap<u64, DeviceId>,
    inflight: BTreeMap<u64, IoRequest>,
    /// Per task: woken since its last engine call.
    pub woken: Vec<bool>,
    pub closed: bool,
    /// Block-layer statistics of each device that has them, for wbt.
    pub diskstats: Vec<(DeviceId, super::diskstats::DiskStats)>,
}

/// Actions left after frames were zeroed: submits and wakes.
pub(crate) struct Pending(Vec<Action>);

impl Core {
    pub fn new(mut engine: Engine, frames: Arc<Frames>, index: Arc<PageIndex>) -> Core {
        engine.report_unmapped();
        Core {
            engine,
            frames,
            index,
            backing: Vec::new(),
            keys: Vec::new(),
            unsynced: BTreeMap::new(),
            next_mark: 0,
            sizes: Vec::new(),
            unmapped: Vec::new(),
            spare_bufs: Vec::new(),
            by_inode: BTreeMap::new(),
            devices: BTreeMap::new(),
            inflight: BTreeMap::new(),
            woken: Vec::new(),
            closed: false,
            diskstats: Vec::new(),
        }
    }

    /// Drops the pages the engine let go from the page index. Runs after
    /// every engine call and before any frame is written, so the index
    /// never maps a page to a frame that was given to another.
    pub fn apply_unmaps(&mut self) {
        self.engine.take_unmapped(&mut self.unmapped);
        for (file, first, end) in self.unmapped.drain(..) {
            for page in first..end {
                self.index.remove(file, page);
            }
        }
    }

    /// Puts the cached pages `first..end` of `file` in the page index (their
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
        self.sizes[file.index()].store(self.engine.file_size(file), Ordering::Release);
    }

    /// Takes the engine's actions, zeroing fresh frames at once (before any
    /// caller copies into them).
    pub fn take_actions(&mut self) -> Pending {
        self.apply_unmaps();
        let mut rest = Vec::new();
        let mut zero = Vec::new();
        while let Some(action) = self.engine.poll_action() {
            match action {
                Action::ZeroFrames { first, count } => zero.extend(first..first + count),
                other => rest.push(other),
            }
        }
        for frame in zero {
            self.frames.write(frame).bytes().fill(0);
        }
        Pending(rest)
    }

    /// Turns submits into backend ops (copying data of writes out of the
    /// frames) and records wakes. Returns the ops to hand to the backend
    /// once the lock is released, and whether anyone was woken.
    pub fn finish_actions(&mut self, pending: Pending, ops: &mut Vec<IoOp>) -> bool {
        let mut woke = false;
        if pending.0.is_empty() {
            return false;
        }
        for action in pending.0 {
            match action {
                Action::Submit(req) => ops.push(self.build_op(req)),
                Action::Wake(task) => {
                    self.woken[task.index()] = true;
                    woke = true;
                }
                Action::ZeroFrames { .. } => unreachable!("zeroed in take_actions"),
            }
        }
        woke
    }

    /// Takes actions and finishes them in one go (no caller data to copy).
    pub fn drain(&mut self, ops: &mut Vec<IoOp>) -> bool {
        let pending = self.take_actions();
        self.finish_actions(pending, ops)
    }

    fn build_op(&mut self, req: IoRequest) -> IoOp {
        let len = req.pages as usize * PAGE;
        // A reused buffer holds old data: a write overwrites all of it, a
        // read is filled by the device (the backends zero a short read's tail).
        let mut buf = match self.spare_bufs.iter().position(|b| b.len() == len) {
            Some(i) => self.spare_bufs.swap_remove(i),
            None => AlignedBuf::new(len),
        };
        let write = req.dir == IoDir::Write;
        if write {
            let page_frames: Vec<u32> = (0..req.pages as u64)
                .map(|i| {
                    self.engine
                        .page_frame(req.file, req.first_page + i)
                        .expect("page under writeback is cached")
                })
                .collect();
            let frames = self.frames.read(&page_frames);
            for (i, &frame) in page_frames.iter().enumerate() {
                buf.as_mut_slice()[i * PAGE..(i + 1) * PAGE].copy_from_slice(frames.frame(frame));
            }
        }
        let op = IoOp {
            id: req.id.0,
            file: self.backing(req.file),
            write,
            offset: req.first_page * PAGE_SIZE,
            buf,
        };
        self.inflight.insert(req.id.0, req);
        op
    }

    /// A backend op finished: fill the frames of a read, tell the engine.
    pub fn complete(&mut self, done: IoDone, now: wb_engine::Instant) {
        let Some(req) = self.inflight.remove(&done.id) else {
            return;
        };
        let result = match &done.result {
            Ok(_) => Ok(()),
            Err(e) => Err(crate::error::io_error_kind(e)),
        };
        if req.dir == IoDir::Write && result.is_ok() {
            self.mark_unsynced(req.file);
        }
        // A finished read fills its frames before the engine calls them valid.
        if req.dir == IoDir::Read && result.is_ok() {
            self.apply_unmaps();
            for i in 0..req.pages as u64 {
                if let Some(frame) = self.engine.page_frame(req.file, req.first_page + i) {
                    let at = i as usize * PAGE;
                    self.frames
                        .write(frame)
                        .bytes()
                        .copy_from_slice(&done.buf.as_slice()[at..at + PAGE]);
                }
            }
        }
        self.engine.io_complete(now, IoId(done.id), result);
        if self.spare_bufs.len() < SPARE_BUFS_MAX {
            self.spare_bufs.push(done.buf);
        }
    }

    /// Adds a file the engine does not know yet.
    pub fn add_file(&mut self, file: FileId, backing: StdFile, key: (u64, u64), size: u64) {
        assert_eq!(file.index(), self.backing.len(), "files are added in order");
        self.backing.push(Some(Arc::new(backing)));
        self.keys.push(key);
        self.sizes.push(Arc::new(AtomicU64::new(size)));
        self.by_inode.insert(key, file);
    }

    /// The backing file of `file` changed (a write landed, its length was
    /// set): it needs an fdatasync to be durable.
    pub fn mark_unsynced(&mut self, file: FileId) {
        self.next_mark += 1;
        self.unsynced.insert(file, self.next_mark);
    }

    /// Files needing an fdatasync, with their marks.
    pub fn unsynced(&self) -> Vec<(FileId, u64)> {
        self.unsynced.iter().map(|(&f, &m)| (f, m)).collect()
    }

    /// The mark of `file` if it needs an fdatasync.
    pub fn unsynced_mark(&self, file: FileId) -> Option<u64> {
        self.unsynced.get(&file).copied()
    }

    /// An fdatasync of `file` begun when its mark was `mark` succeeded:
    /// unless something changed it since, it is durable.
    pub fn synced(&mut self, file: FileId, mark: u64) {
        if self.unsynced.get(&file) == Some(&mark) {
            self.unsynced.remove(&file);
        }
    }

    /// The backing file of a file in use (open, or with I/O).
    pub fn backing(&self, file: FileId) -> Arc<StdFile> {
        let backing = self.backing[file.index()].as_ref();
        Arc::clone(backing.expect("a file in use is not evicted"))
    }

    /// Files the cache has not evicted.
    pub fn live_files(&self) -> usize {
        self.by_inode.len()
    }

    /// Evicts `file` if it is idle and its writes are durable: its pages
    /// go, its backing file is closed, and its inode maps to nothing (a
    /// later open adds it anew). Returns whether it went.
    pub fn evict(&mut self, file: FileId) -> bool {
        if self.unsynced.contains_key(&file) || self.engine.evict_file(file).is_err() {
            return false;
        }
        self.apply_unmaps();
        self.backing[file.index()] = None;
        self.by_inode.remove(&self.keys[file.index()]);
        true
    }

    pub fn add_task(&mut self) -> TaskId {
        let task = self.engine.add_task();
        self.woken.push(false);
        task
    }

    /// Copies bytes into the cached pages of `file` at `offset` (the pages
    /// must be cached: the engine has prepared them), indexes the pages and
    /// publishes the length.
    pub fn copy_in(&mut self, file: FileId, offset: u64, data: &[u8]) {
        self.apply_unmaps();
        let mut done = 0;
        while done < data.len() {
            let pos = offset + done as u64;
            let page = pos / PAGE_SIZE;
            let in_page = (pos % PAGE_SIZE) as usize;
            let n = (PAGE - in_page).min(data.len() - done);
            let frame = self
                .engine
                .page_frame(file, page)
                .expect("written page is cached");
            self.frames.write(frame).bytes()[in_page..in_page + n]
                .copy_from_slice(&data[done..done + n]);
            self.index.insert(file, page, frame);
            done += n;
        }
        self.publish_size(file);
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
