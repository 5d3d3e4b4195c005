//! [`File`]: a handle on a file through the cache.

use crate::error::Error;
use crate::runtime::core::WriteData;
use crate::runtime::shared::Shared;
use crate::runtime::times::{self, Modified};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use wb_engine::{FileId, HandleId, WriteFlags, PAGE_SIZE};

/// Largest piece of a read handed to the engine at once.
const READ_CHUNK: usize = 256 * 1024;

/// An open file. Reads see every write made through any handle of the
/// same file; lengths include extensions not yet written back.
pub struct File {
    pub(crate) shared: Arc<Shared>,
    pub(crate) file: FileId,
    pub(crate) handle: HandleId,
    /// The file's length as published for reads without the engine's lock.
    size: Arc<AtomicU64>,
    /// When the file was last changed through the cache (times.rs).
    pub(crate) modified: Modified,
    pub(crate) path: PathBuf,
}

impl File {
    pub(crate) fn new(
        shared: Arc<Shared>,
        file: FileId,
        handle: HandleId,
        size: Arc<AtomicU64>,
        modified: Modified,
        path: PathBuf,
    ) -> File {
        File {
            shared,
            file,
            handle,
            size,
            modified,
            path,
        }
    }

    /// Another handle of the same file, as a second open(2) of it gives:
    /// the same pages and length, its own cursor of write-back errors
    /// (each handle's next sync reports an error once).
    pub fn reopen(&self) -> Result<File, Error> {
        let handle = {
            let mut core = self.shared.lock();
            if core.closed {
                return Err(Error::Closed);
            }
            core.engine
                .open(self.file)
                .map_err(|e| Error::Internal(format!("opening {}: {e}", self.path.display())))?
        };
        Ok(File::new(
            Arc::clone(&self.shared),
            self.file,
            handle,
            Arc::clone(&self.size),
            Arc::clone(&self.modified),
            self.path.clone(),
        ))
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Writes all of `data` at `offset` into the cache. May sleep when the
    /// dirty throttle says so (bounded, counted in stats).
    pub fn write_at(&self, data: &[u8], offset: u64) -> Result<(), Error> {
        self.write_at_with(data, offset, WriteFlags::default())
    }

    /// As `write_at`, with `flags`. `WriteFlags::DONTCACHE` writes
    /// uncached (Linux's RWF_DONTCACHE): the pages leave the cache once
    /// written back, and the flusher is kicked to write them soon (or,
    /// with the knob `dontcache_flush=inline`, this call submits them).
    ///
    /// ```
    /// use writeback::{Cache, OpenOptions, WriteFlags};
    /// # let dir = std::env::temp_dir().join(format!("wb-doc-dc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # if !writeback::io::supports_direct(&dir) { wb_testkit::skip("no O_DIRECT in the temp dir"); return Ok(()); }
    /// let cache = Cache::builder().knob("memory", "64MiB")?.calibrate(false).build()?;
    /// let file = cache.open(dir.join("log"), OpenOptions { create: true })?;
    /// file.write_at_with(&[7u8; 1 << 20], 0, WriteFlags::DONTCACHE)?;
    /// file.sync_data()?; // written back: the pages have left the cache
    /// assert_eq!(cache.stats().cached_pages, 0);
    /// # drop(file); drop(cache); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_at_with(&self, data: &[u8], offset: u64, flags: WriteFlags) -> Result<(), Error> {
        let len = data.len() as u64;
        offset
            .checked_add(len)
            .ok_or(Error::OutOfRange { offset, len })?;
        // The write's time is the file's mtime, whenever it is written back.
        times::note(&self.modified);
        // Bytes of pages that are dirty already need nothing of the engine.
        let done = if flags == WriteFlags::default() {
            self.overwrite_dirty(data, offset)?
        } else {
            0
        };
        if done == data.len() {
            return Ok(());
        }
        let (data, offset) = (&data[done..], offset + done as u64);
        let len = data.len() as u64;
        let handle = self.handle;
        // A long copy (the `deferred_copy_min` knob) goes outside the
        // engine's lock, so other threads' reads, writes and completions
        // do not wait behind it; a short one costs less than the second
        // lock round trip that takes.
        let deferred = !flags.dontcache && self.shared.tuning.defers_copy(data.len());
        let flags = WriteFlags {
            deferred_copy: deferred,
            ..flags
        };
        let write = WriteData {
            offset,
            data,
            deferred,
        };
        self.shared.run_op(
            |e, now, task| e.write_with(now, task, handle, offset, len, flags),
            Some(write),
            |_, _, _| {},
        )
    }

    /// Copies the leading bytes of a write that fall in pages the cache
    /// holds dirty and not yet copied for writeback, without the engine's
    /// lock (as cached reads are served): their state does not change, and
    /// their next write request copies them (`wb_engine::page_map`, rule
    /// 8). Stops at the first page that is not so, or if the write would
    /// extend the file; returns the bytes copied.
    fn overwrite_dirty(&self, data: &[u8], offset: u64) -> Result<usize, Error> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        let size = self.size.load(Ordering::Acquire);
        if offset + data.len() as u64 > size {
            return Ok(0);
        }
        let mut done = 0;
        while done < data.len() {
            let pos = offset + done as u64;
            let in_page = (pos % PAGE_SIZE) as usize;
            let n = (PAGE_SIZE as usize - in_page).min(data.len() - done);
            // The frame's write lock, taken with the page's shard held;
            // the bit read holding it (rule 8).
            let found =
                self.shared
                    .page_map
                    .with_frame(self.file, pos / PAGE_SIZE, |frame, bit| {
                        (self.shared.frames.write(frame), bit)
                    });
            let Some((mut frame, overwritable)) = found else {
                break;
            };
            if !overwritable.get() {
                break;
            }
            frame.bytes()[in_page..in_page + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
        Ok(done)
    }

    /// Reads into `buf` at `offset`; returns the bytes read (short at end of file).
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize, Error> {
        offset
            .checked_add(buf.len() as u64)
            .ok_or(Error::OutOfRange {
                offset,
                len: buf.len() as u64,
            })?;
        let mut total = 0;
        // In pieces: one engine read needs all its pages cached at once,
        // which a range larger than the cache could never have.
        for chunk in buf.chunks_mut(READ_CHUNK) {
            let n = self.read_chunk(chunk, offset + total as u64)?;
            total += n;
            if n < chunk.len() {
                break;
            }
        }
        Ok(total)
    }

    fn read_chunk(&self, buf: &mut [u8], offset: u64) -> Result<usize, Error> {
        if let Some(n) = self.read_cached(buf, offset)? {
            return Ok(n);
        }
        let len = buf.len() as u64;
        let (file, handle) = (self.file, self.handle);
        let frames = &self.shared.frames;
        let mut held = None;
        let mut pieces = Vec::new();
        self.shared.run_op(
            |e, now, task| e.read(now, task, handle, offset, len),
            None,
            |core, _task, done| {
                // Done: every page of the range (up to the end of the file)
                // is cached. Note where, and hold the frames for reading
                // before the engine's lock goes, so they cannot be reused;
                // the copy itself runs without the engine's lock.
                if done {
                    let end = (offset + len).min(core.engine.file_size(file).unwrap_or(0));
                    if end > offset {
                        pieces = core.pieces(file, offset, (end - offset) as usize);
                        let (first, end) = (offset / PAGE_SIZE, end.div_ceil(PAGE_SIZE));
                        core.page_map.read_done(&core.engine, file, first, end);
                    }
                    let wanted: Vec<u32> = pieces.iter().map(|&(f, _, _)| f).collect();
                    held = Some(frames.read(&wanted));
                }
            },
        )?;
        let Some(frames) = held else { return Ok(0) };
        let mut n = 0;
        for (frame, in_page, len) in pieces {
            buf[n..n + len].copy_from_slice(&frames.frame(frame)[in_page..in_page + len]);
            n += len;
        }
        Ok(n)
    }

    /// The fast path for data that is all cached: the pages are found in
    /// the page map and copied one by one, without the engine's lock;
    /// the engine hears of the read later, in a batch. None if a page is
    /// missing (some bytes may have been copied; the slow path redoes them).
    fn read_cached(&self, buf: &mut [u8], offset: u64) -> Result<Option<usize>, Error> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        // The length is published after the data it covers: every page
        // below it that the page map has holds data at least that new.
        let size = self.size.load(Ordering::Acquire);
        let end = (offset + buf.len() as u64).min(size);
        if end <= offset {
            return Ok(Some(0));
        }
        let n = (end - offset) as usize;
        // At most READ_CHUNK / PAGE_SIZE + 1 pages (an unaligned chunk).
        let mut frames = [0u32; READ_CHUNK / PAGE_SIZE as usize + 1];
        let mut pages = 0;
        let mut at = 0;
        while at < n {
            let pos = offset + at as u64;
            let in_page = (pos % PAGE_SIZE) as usize;
            let piece = (PAGE_SIZE as usize - in_page).min(n - at);
            // The frame's read lock, taken with the page's shard held (rule 7).
            let found = self
                .shared
                .page_map
                .with_frame(self.file, pos / PAGE_SIZE, |frame, _| {
                    self.shared.frames.read_one(frame)
                });
            let Some(frame) = found else {
                return Ok(None);
            };
            buf[at..at + piece].copy_from_slice(&frame.bytes()[in_page..in_page + piece]);
            frames[pages] = frame.frame();
            pages += 1;
            at += piece;
        }
        self.shared.note_hit(
            self.file,
            offset / PAGE_SIZE,
            end.div_ceil(PAGE_SIZE),
            &frames[..pages],
        );
        Ok(Some(n))
    }

    /// Makes this file's data and length durable (fdatasync).
    pub fn sync_data(&self) -> Result<(), Error> {
        self.sync(false)
    }

    /// Makes this file's data and metadata durable (fsync).
    pub fn sync_all(&self) -> Result<(), Error> {
        self.sync(true)
    }

    fn sync(&self, all: bool) -> Result<(), Error> {
        let handle = self.handle;
        // The engine writes back, then asks for the flush (MakeDurable),
        // which the runtime performs and reports before the call returns.
        self.shared.run_op(
            |e, now, task| {
                if all {
                    e.fsync_all(now, task, handle)
                } else {
                    e.fsync(now, task, handle)
                }
            },
            None,
            |_, _, _| {},
        )
    }

    /// Sets the length; a shorter file drops cached data past the end.
    /// Freeing more than `RELEASE_STEP_BYTES` (16 MiB) of the backing file
    /// is deferred work on its device's backlog: this returns once the
    /// length is set, the blocks are freed in steps behind it, and a
    /// write or `set_len` that extends the file again waits for them.
    pub fn set_len(&self, len: u64) -> Result<(), Error> {
        let (file, handle) = (self.file, self.handle);
        times::note(&self.modified);
        // The engine has the runtime set the backing file's length before
        // this returns (or leaves it to the backlog or the next flush).
        self.shared.run_op(
            |e, now, task| e.set_len(now, task, handle, len),
            None,
            |core, _, done| {
                if !done {
                    return;
                }
                // A now partial last page is no longer overwritable (a
                // write past the new end must extend the file: through the
                // engine), and must read as zeros past the end if the file
                // grows again.
                if let Some((frame, from)) = core.page_map.truncated(&core.engine, file, len) {
                    core.frames.write(frame).bytes()[from..].fill(0);
                }
                core.publish_size(file);
            },
        )
    }

    /// Writes the file's dirty data back and waits until it has landed,
    /// without a flush (Linux's filemap_write_and_wait): a crash of this
    /// process then loses none of it; a power cut still may (`sync_data`
    /// guards against that). What a front end does before renaming the
    /// file over another (ext4's auto_da_alloc). Reports a write-back error
    /// met meanwhile; it does not count as reported to the handle (its next
    /// `sync_data` reports it too).
    pub fn write_back(&self) -> Result<(), Error> {
        let file = self.file;
        self.shared.run_op(
            |e, now, task| e.write_back_file(now, task, file),
            None,
            |_, _, _| {},
        )
    }

    /// When the file was last changed through the cache (a write, a
    /// truncation, fallocate) or set with [`Cache::set_modified`]; None if
    /// it has not been since the cache opened it (its backing file's mtime
    /// is then its mtime). Write-backs keep the backing file's mtime at
    /// this.
    ///
    /// [`Cache::set_modified`]: crate::Cache::set_modified
    pub fn modified(&self) -> Option<std::time::SystemTime> {
        times::to_system_time(self.modified.load(Ordering::Relaxed))
    }

    /// The length, including extensions not yet written back.
    pub fn len(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for File {
    fn drop(&mut self) {
        self.shared.close(self.file, self.handle);
    }
}
