//! File data: open, create, read, write, flush, fsync, release, fallocate
//! and truncation. Data goes through the engine (`writeback::File`);
//! every open gets FOPEN_DIRECT_IO so the kernel's page cache stays out of
//! the way and there is one cache (a mapping excepted: it uses the kernel's
//! page cache, which the kernel keeps coherent with reads and writes, see
//! `init` in fs.rs).

use crate::attr::EngineView;
use crate::fs::WbFs;
use crate::handles::{FileHandle, Handle};
use crate::inode::{Inode, Orphan};
use crate::sys::{self, Errno};
use nix::fcntl::OFlag;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use writeback::File;

impl WbFs {
    /// The inode's engine file, opening it through the cache if no handle
    /// has it yet (`data_fd`: a read/write O_DIRECT descriptor already
    /// opened, as create has). Pair with [`WbFs::put_file`].
    /// A file the cache does not know yet goes to the writeback domain of
    /// `opener`'s cgroup (none: the root domain).
    pub(crate) fn get_file(
        &self,
        inode: &Arc<Inode>,
        data_fd: Option<OwnedFd>,
        opener: Option<u32>,
    ) -> Result<Arc<File>, Errno> {
        let mut state = inode.open_state();
        if let Some(file) = state.file.clone() {
            state.handles += 1;
            return Ok(file);
        }
        if matches!(state.orphan, Orphan::Released) {
            // Removed, and its blocks are being freed (say, a reopen
            // through /proc/PID/fd after the last close).
            return Err(libc::ENOENT);
        }
        let fd = match data_fd {
            Some(fd) => fd,
            None => sys::reopen(inode.fd(), OFlag::O_RDWR | OFlag::O_DIRECT)?,
        };
        // The path names the file in errors and places a new device's calibration.
        let path = std::fs::read_link(sys::proc_path(fd.as_fd()).to_string_lossy().as_ref())
            .unwrap_or_else(|_| self.backing.clone());
        let domain = opener.map_or(writeback::Domain::ROOT, |pid| {
            self.domains.domain_of(&self.cache, pid)
        });
        let file = self
            .cache
            .open_backing_in(std::fs::File::from(fd), path, domain)
            .map_err(|e| e.errno())?;
        let file = Arc::new(file);
        state.file = Some(Arc::clone(&file));
        state.handles = 1;
        Ok(file)
    }

    /// One user of the inode's engine file is done. The last one closes
    /// it; if the file's last name is in the orphan directory, or it has
    /// none left, its release (cached data dropped without being written
    /// back, blocks freed in steps) goes to the cache's backlog, so the
    /// closing call does not wait for the backing filesystem to free a
    /// large file.
    pub(crate) fn put_file(&self, inode: &Inode) {
        let mut state = inode.open_state();
        state.handles = state.handles.saturating_sub(1);
        if state.handles > 0 {
            return;
        }
        let Some(file) = state.file.take() else {
            return;
        };
        let orphan = match &state.orphan {
            Orphan::Pending(path) => Some(path.clone()),
            Orphan::No | Orphan::Released => None,
        };
        if orphan.is_some() {
            state.orphan = Orphan::Released;
        }
        drop(state);
        if let Some(orphan) = orphan {
            drop(file);
            self.release_orphan(&orphan);
            return;
        }
        let unlinked = sys::stat_fd(inode.fd()).is_ok_and(|st| st.st_nlink == 0);
        drop(file);
        if unlinked {
            // An error means the cache is closing: it writes back what is
            // dirty, which is harmless.
            let _ = self.cache.release_unlinked(inode.key.0, inode.key.1);
        }
    }

    /// Runs `f` on the inode's engine file, opened for the call if needed.
    pub(crate) fn with_file<T>(
        &self,
        inode: &Arc<Inode>,
        f: impl FnOnce(&File) -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        let file = self.get_file(inode, None, None)?;
        let result = f(&file);
        drop(file);
        self.put_file(inode);
        result
    }

    /// A data change is allowed: the server is not shutting down. Holds
    /// shutdown off until dropped, so every write acknowledged before it
    /// begins is in the cache when the final sync starts.
    pub(crate) fn data_gate(&self) -> Result<std::sync::RwLockReadGuard<'_, bool>, Errno> {
        let stopping = self.stopping.read().unwrap_or_else(|p| p.into_inner());
        if *stopping {
            return Err(libc::EIO);
        }
        Ok(stopping)
    }

    /// A FUSE handle for `inode`, whose engine file `shared` was taken
    /// for it (`get_file`). The handle gets an engine handle of its own,
    /// as an open(2) does: each FUSE handle's fsync reports a write-back
    /// error once, whatever its other handles heard.
    fn new_file_handle(
        &self,
        inode: Arc<Inode>,
        shared: Arc<File>,
        flags: i32,
    ) -> Result<u64, Errno> {
        let file = match shared.reopen() {
            Ok(file) => Arc::new(file),
            Err(e) => {
                drop(shared);
                self.put_file(&inode);
                return Err(e.errno());
            }
        };
        drop(shared);
        let dontcache = flags & libc::O_DIRECT != 0 || crate::xattr::wants_dontcache(inode.fd());
        Ok(self.handles.insert(Handle::File(FileHandle {
            inode,
            file,
            dontcache,
        })))
    }

    pub(crate) fn open_regular(
        &self,
        inode: Arc<Inode>,
        flags: i32,
        opener: u32,
    ) -> Result<u64, Errno> {
        let truncate = flags & libc::O_TRUNC != 0 && flags & libc::O_ACCMODE != libc::O_RDONLY;
        let _gate = if truncate {
            Some(self.data_gate()?)
        } else {
            None
        };
        let file = self.get_file(&inode, None, Some(opener))?;
        if truncate {
            let had_data = !file.is_empty();
            if let Err(e) = file.set_len(0) {
                self.put_file(&inode);
                return Err(e.errno());
            }
            if had_data {
                inode.rewritten.store(true, Ordering::Relaxed);
            }
        }
        self.new_file_handle(inode, file, flags)
    }

    /// Creates (or, racing another creator, opens) a regular file and opens it.
    pub(crate) fn create_regular(
        &self,
        parent: &Inode,
        name: &std::ffi::OsStr,
        mode: u32,
        owner: (u32, u32),
        flags: i32,
        opener: u32,
    ) -> Result<(Arc<Inode>, libc::stat, u64), Errno> {
        let _gate = self.data_gate()?;
        let exclusive = flags & libc::O_EXCL != 0;
        let (fd, created) = match sys::open_data(parent.fd(), name, Some((mode, true))) {
            Ok(fd) => (fd, true),
            Err(libc::EEXIST) if !exclusive => (sys::open_data(parent.fd(), name, None)?, false),
            Err(e) => return Err(e),
        };
        if created {
            self.set_new_owner(fd.as_fd(), owner, mode)?;
        }
        let path_fd = sys::reopen(fd.as_fd(), OFlag::O_PATH)?;
        let st = sys::stat_fd(path_fd.as_fd())?;
        let inode = self.inodes.remember(path_fd, &st, parent.nodeid, name);
        let file = self.get_file(&inode, Some(fd), Some(opener))?;
        if !created && flags & libc::O_TRUNC != 0 {
            let had_data = !file.is_empty();
            if let Err(e) = file.set_len(0) {
                self.put_file(&inode);
                return Err(e.errno());
            }
            if had_data {
                inode.rewritten.store(true, Ordering::Relaxed);
            }
        }
        let fh = self.new_file_handle(Arc::clone(&inode), file, flags)?;
        Ok((inode, st, fh))
    }

    /// Reads up to `size` bytes at `offset` into `buf` (resized to what
    /// was read). The caller keeps `buf` from one request to the next:
    /// no allocation and no zeroing per read.
    pub(crate) fn read(
        &self,
        fh: u64,
        offset: u64,
        size: u32,
        buf: &mut Vec<u8>,
    ) -> Result<(), Errno> {
        match &*self.handles.file(fh)? {
            Handle::File(h) => {
                let len = h.file.len();
                let want = len.saturating_sub(offset).min(size as u64) as usize;
                buf.resize(want, 0);
                let n = h.file.read_at(buf, offset).map_err(|e| e.errno())?;
                buf.truncate(n);
            }
            Handle::Control(h) => {
                let start = (offset.min(h.content.len() as u64)) as usize;
                let end = (start + size as usize).min(h.content.len());
                buf.clear();
                buf.extend_from_slice(&h.content[start..end]);
            }
        }
        Ok(())
    }

    pub(crate) fn write(
        &self,
        fh: u64,
        offset: u64,
        data: &[u8],
        writer: (u32, u32),
    ) -> Result<u32, Errno> {
        match &*self.handles.file(fh)? {
            Handle::File(h) => {
                let _gate = self.data_gate()?;
                self.remove_privs(&h.inode, writer)?;
                let flags = if h.dontcache {
                    writeback::WriteFlags::DONTCACHE
                } else {
                    writeback::WriteFlags::default()
                };
                h.file
                    .write_at_with(data, offset, flags)
                    .map_err(|e| e.errno())?;
                Ok(data.len() as u32)
            }
            Handle::Control(h) => {
                self.control().write(h.node, offset, data)?;
                Ok(data.len() as u32)
            }
        }
    }

    /// fsync / fdatasync: the engine writes the file's dirty data back and
    /// makes it durable, and reports a write-back error not yet reported
    /// to this handle (errseq: each FUSE handle has an engine handle of its
    /// own, so every handle hears of an error once). Failed pages stay
    /// dirty: a later fsync returns Ok only once they are written.
    pub(crate) fn fsync(&self, fh: u64, datasync: bool) -> Result<(), Errno> {
        match &*self.handles.file(fh)? {
            Handle::File(h) => {
                let result = if datasync {
                    h.file.sync_data()
                } else {
                    h.file.sync_all()
                };
                result.map_err(|e| e.errno())
            }
            _ => Ok(()),
        }
    }

    /// The kernel let go of a handle (every descriptor of it closed). A
    /// file truncated to zero and written again since the last release is
    /// written back first, as ext4's auto_da_alloc does at close: a crash
    /// of the mount after the program rewrote a file and closed it finds
    /// the new content, not an empty file. The program's close() does not
    /// wait for it (the kernel sends RELEASE in the background); a
    /// write-back error is the next fsync's to report.
    pub(crate) fn release(&self, fh: u64) {
        if let Some(handle) = self.handles.remove(fh) {
            if let Handle::File(h) = &*handle {
                if h.inode.rewritten.swap(false, Ordering::Relaxed) {
                    let _ = h.file.write_back();
                }
                self.put_file(&h.inode);
            }
        }
    }

    /// fallocate, every mode the backing filesystem supports; the cache
    /// follows (the library's `File::fallocate`: dirty data written back,
    /// the range's cached pages dropped, the length adjusted).
    pub(crate) fn fallocate(&self, fh: u64, offset: u64, len: u64, mode: i32) -> Result<(), Errno> {
        let handle = self.handles.file(fh)?;
        let Handle::File(h) = &*handle else {
            return Err(libc::EOPNOTSUPP);
        };
        let _gate = self.data_gate()?;
        h.file.fallocate(mode, offset, len).map_err(|e| e.errno())?;
        Ok(())
    }

    /// lseek with SEEK_DATA or SEEK_HOLE (the kernel answers the others).
    pub(crate) fn seek_data(&self, fh: u64, offset: i64, whence: i32) -> Result<i64, Errno> {
        let handle = self.handles.file(fh)?;
        let Handle::File(h) = &*handle else {
            return Err(libc::EINVAL);
        };
        let data = match whence {
            libc::SEEK_DATA => true,
            libc::SEEK_HOLE => false,
            _ => return Err(libc::EINVAL),
        };
        let offset = u64::try_from(offset).map_err(|_| libc::ENXIO)?;
        let pos = h.file.seek_data(offset, data).map_err(|e| e.errno())?;
        i64::try_from(pos).map_err(|_| libc::EOVERFLOW)
    }

    /// Truncation (or extension) through setattr, with or without a handle.
    pub(crate) fn truncate(&self, inode: &Arc<Inode>, size: u64) -> Result<(), Errno> {
        if !inode.is_regular() {
            return Err(if inode.kind == libc::S_IFDIR {
                libc::EISDIR
            } else {
                libc::EINVAL
            });
        }
        let _gate = self.data_gate()?;
        self.with_file(inode, |f| {
            let had_data = !f.is_empty();
            f.set_len(size).map_err(|e| e.errno())?;
            if size == 0 && had_data {
                inode.rewritten.store(true, Ordering::Relaxed);
            }
            Ok(())
        })
    }

    /// What the engine knows better than the backing file of `inode`: its
    /// length and mtime (if it knows the file), whether its last name is
    /// an orphan's.
    pub(crate) fn engine_view(&self, inode: &Inode) -> EngineView {
        if !inode.is_regular() {
            return EngineView::default();
        }
        let (file, orphaned) = {
            let state = inode.open_state();
            (
                state.file.clone(),
                matches!(state.orphan, Orphan::Pending(_)),
            )
        };
        let (len, modified) = match file {
            Some(file) => (Some(file.len()), file.modified()),
            None => match self.cache.cached_state(inode.key.0, inode.key.1) {
                Some((len, modified)) => (Some(len), modified),
                None => (None, None),
            },
        };
        EngineView {
            len,
            modified,
            orphaned,
        }
    }
}
