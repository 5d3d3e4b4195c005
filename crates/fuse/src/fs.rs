//! The FUSE filesystem: routes each kernel request to the backing
//! directory (meta.rs, dir.rs, xattr.rs), the engine (data.rs) or the
//! virtual `.writeback` tree (control.rs), and turns results into replies.
//! No request panics: failures become errno replies.

use crate::attr::SetAttr;
use crate::control::{Control, Node, CONTROL_DIR};
use crate::handles::{ControlHandle, Handle, HandleTable};
use crate::inode::{Inode, InodeTable, ROOT_ID};
use crate::orphans::{Orphans, ORPHAN_DIR};
use crate::requests::{Opcode, Requests};
use crate::sys::{Errno, SetTime};
use fuser::{
    FileAttr, FileHandle, Filesystem, FopenFlags, Generation, INodeNo, InitFlags, KernelConfig,
    LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow,
    WriteFlags,
};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};
use writeback::Cache;

/// How long the kernel may keep names (also of names that do not exist),
/// attributes and directory listings without asking again, when every
/// change to the backing directory goes through the mount
/// (`Backing::Exclusive`): the kernel sees each change it makes and
/// updates or drops what it cached, and what the server changes on its
/// own it is told of (`attrs_changed`, the orphan pruner's
/// `inval_entry`). Each request saved is a round trip through
/// /dev/fuse, the cost of a metadata operation on the mount.
pub const ATTR_TTL_EXCLUSIVE: Duration = Duration::from_secs(60);
/// The same when other programs change the backing directory too
/// (`Backing::Shared`): their changes show within this long; nothing is
/// known not to exist and listings are read again at each open.
pub const ATTR_TTL_SHARED: Duration = Duration::from_secs(1);
/// Largest write the kernel sends in one request (a larger write() comes
/// as several). Why not more: a serving thread copies a request's data
/// without yielding the CPU (the kernel into our buffer, we into the
/// cache); at 1 MiB that took 400-600 us, and a thread woken to finish a
/// database's commit beside a copy waited that long for a core (traced:
/// the commits slower than 800 us spent 460 us of it waiting to run). At
/// 256 KiB, `wb bench db-copy` during the copy: p99 2.5-2.8 ms against
/// 3.2-3.5 (BENCHMARKS.md); sequential writes through the mount still
/// 1.3 GB/s. 128 KiB was no better for the commits and slower in bulk.
pub const MAX_WRITE_BYTES: u32 = 256 << 10;
/// The largest read buffer a serving thread keeps between requests (the
/// kernel asks for at most `MAX_WRITE_BYTES`, max_pages being derived from it).
const READ_BUF_KEEP_BYTES: usize = 2 * MAX_WRITE_BYTES as usize;
/// Largest xattr value or list we return.
const MAX_XATTR_BYTES: u32 = 64 * 1024;

fn open_flags_for_data() -> FopenFlags {
    // Direct I/O: the kernel's page cache is bypassed, ours is the only
    // one. Parallel direct writes: writes to one file are not serialised
    // by the kernel (the engine orders them).
    FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
}

/// The filesystem served at the mount point.
pub struct WbFs {
    pub(crate) cache: Arc<Cache>,
    pub(crate) inodes: Arc<InodeTable>,
    pub(crate) handles: HandleTable,
    /// The backing directory (for messages and as a last-resort path).
    pub(crate) backing: PathBuf,
    /// Set once shutdown begins: data changes are refused from then on.
    pub(crate) stopping: Arc<RwLock<bool>>,
    /// The writeback domain of each opener's cgroup.
    pub(crate) domains: crate::cgroup::CgroupDomains,
    /// Where removed files' last names wait for their release.
    pub(crate) orphans: Orphans,
    /// The cache's fault seam, for tests (`wb mount --fault-seam`).
    pub(crate) faults: Option<writeback::io::Faults>,
    /// Tells the kernel what changed behind its caches (set once the
    /// session exists).
    pub(crate) notifier: Arc<std::sync::OnceLock<fuser::Notifier>>,
    /// Whether others change the backing directory (how long the kernel
    /// may cache what it learns).
    pub(crate) backing_use: Backing,
    /// `wb mount --trace FILE` (control.rs, `.writeback/trace`).
    pub(crate) trace: Option<crate::control::TraceTarget>,
    /// The kernel's requests by opcode (`.writeback/stats`).
    pub(crate) requests: Requests,
}

/// Who changes the backing directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Backing {
    /// Only this mount (the default): the kernel caches names, missing
    /// names, attributes and listings for `ATTR_TTL_EXCLUSIVE`.
    #[default]
    Exclusive,
    /// Other programs too: `ATTR_TTL_SHARED`, no negative entries, no
    /// cached listings.
    Shared,
}

/// Stops data changes on a filesystem that is being served.
#[derive(Clone, Debug)]
pub struct StopHandle(Arc<RwLock<bool>>);

impl StopHandle {
    /// Refuses data changes from now on, after waiting for the ones under
    /// way: every write acknowledged so far is in the cache when this returns.
    pub fn stop_writes(&self) {
        let mut stopping = self.0.write().unwrap_or_else(|p| p.into_inner());
        *stopping = true;
    }
}

impl WbFs {
    /// A filesystem serving `backing` (a directory) through `cache`.
    pub fn new(cache: Arc<Cache>, backing: &Path) -> std::io::Result<WbFs> {
        let root = nix::fcntl::open(
            backing,
            nix::fcntl::OFlag::O_PATH
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(std::io::Error::from)?;
        let orphans = Orphans::open(std::os::fd::AsFd::as_fd(&root), backing);
        let inodes = InodeTable::new(root).map_err(std::io::Error::from_raw_os_error)?;
        let inodes = Arc::new(inodes);
        Ok(WbFs {
            cache,
            inodes,
            handles: HandleTable::default(),
            backing: backing.to_path_buf(),
            stopping: Arc::new(RwLock::new(false)),
            domains: Default::default(),
            orphans,
            faults: None,
            notifier: Default::default(),
            backing_use: Backing::Exclusive,
            trace: None,
            requests: Requests::default(),
        })
    }

    /// Lets `.writeback/trace` start and stop traces written to `target`.
    pub fn with_trace(mut self, target: Option<crate::control::TraceTarget>) -> WbFs {
        self.trace = target;
        self
    }

    /// Says whether other programs change the backing directory too.
    pub fn with_backing(mut self, backing_use: Backing) -> WbFs {
        self.backing_use = backing_use;
        self
    }

    /// How long the kernel may keep names and attributes.
    pub(crate) fn ttl(&self) -> Duration {
        match self.backing_use {
            Backing::Exclusive => ATTR_TTL_EXCLUSIVE,
            Backing::Shared => ATTR_TTL_SHARED,
        }
    }

    fn reply_entry(&self, reply: ReplyEntry, result: Result<FileAttr, Errno>) {
        match result {
            Ok(attr) => reply.entry(&self.ttl(), &attr, Generation(0)),
            Err(e) => reply.error(err(e)),
        }
    }

    /// A lookup's reply: as `reply_entry`, and a name that is not there
    /// is remembered as missing.
    fn reply_lookup(&self, reply: ReplyEntry, result: Result<FileAttr, Errno>) {
        match result {
            Ok(attr) => reply.entry(&self.ttl(), &attr, Generation(0)),
            // A name that does not exist, remembered as such (a negative
            // entry: node id 0): creating files asks for each name first.
            Err(libc::ENOENT) if self.backing_use == Backing::Exclusive => {
                reply.entry(&self.ttl(), &negative_entry(), Generation(0))
            }
            Err(e) => reply.error(err(e)),
        }
    }

    /// Lets `user.writeback.fail_writes` arm the cache's fault seam
    /// (`faults`: the rules the cache was built with).
    pub fn with_fault_seam(mut self, faults: Option<writeback::io::Faults>) -> WbFs {
        self.faults = faults;
        self
    }

    /// Hands what an earlier mount left in the orphan directory (it did
    /// not end cleanly) to the cache's backlog, from a thread of its own
    /// (the backlog may hold a producer back), saying so on standard
    /// error. Returns how many there were.
    pub fn remove_leftover_orphans(&self) -> usize {
        let leftovers = self.orphans.leftovers();
        let count = leftovers.len();
        if count == 0 {
            return 0;
        }
        eprintln!(
            "wb mount: removing {count} files left in {} by a mount that did not end cleanly",
            self.orphans.path().display()
        );
        let cache = Arc::clone(&self.cache);
        let spawned = std::thread::Builder::new()
            .name("wb-orphans".into())
            .spawn(move || {
                for path in leftovers {
                    if let Err(e) = cache.remove_later(&path) {
                        eprintln!("wb mount: removing {}: {e}", path.display());
                    }
                }
            });
        if let Err(e) = spawned {
            eprintln!("wb mount: cannot start removing the orphans: {e}");
        }
        count
    }

    /// The inode table, for the thread that keeps it within its budget.
    pub(crate) fn inode_table(&self) -> Arc<InodeTable> {
        Arc::clone(&self.inodes)
    }

    /// Where the session's notifier goes once the session exists.
    pub(crate) fn notifier_slot(&self) -> Arc<std::sync::OnceLock<fuser::Notifier>> {
        Arc::clone(&self.notifier)
    }

    /// The kernel's cached attributes of `ino` are stale (the server
    /// changed them on its own, e.g. cleared a setuid bit): it asks again.
    pub(crate) fn attrs_changed(&self, ino: u64) {
        if let Some(notifier) = self.notifier.get() {
            // Offset -1: the attributes only, no page cache range. A
            // failure (the inode is gone from the kernel) leaves nothing stale.
            let _ = notifier.inval_inode(INodeNo(ino), -1, 0);
        }
    }

    /// A handle to stop data changes once the filesystem is being served.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle(Arc::clone(&self.stopping))
    }

    pub(crate) fn control(&self) -> Control<'_> {
        Control {
            cache: &self.cache,
            server: self.handles.counts(self.inodes.len()),
            requests: &self.requests,
            trace: self.trace.as_ref(),
        }
    }

    /// The kernel dropped `nlookup` references to `ino` (FORGET, or one
    /// of a BATCH_FORGET's).
    fn forget_one(&self, ino: INodeNo, nlookup: u64) {
        if Node::from_ino(ino.0).is_none() {
            self.inodes.forget(ino.0, nlookup);
        }
    }

    fn inode(&self, ino: INodeNo) -> Result<Arc<Inode>, Errno> {
        self.inodes.get(ino.0)
    }

    fn lookup_any(&self, parent: INodeNo, name: &OsStr) -> Result<FileAttr, Errno> {
        if let Some(node) = Node::from_ino(parent.0) {
            let child = self.control().lookup(node, name)?;
            return self.control().attr(child);
        }
        if parent.0 == ROOT_ID && name == CONTROL_DIR {
            return self.control().attr(Node::Dir);
        }
        if parent.0 == ROOT_ID && name == ORPHAN_DIR {
            return Err(libc::ENOENT);
        }
        let parent = self.inode(parent)?;
        self.lookup_backing(&parent, name)
    }

    fn getattr_any(&self, ino: INodeNo) -> Result<FileAttr, Errno> {
        match Node::from_ino(ino.0) {
            Some(node) => self.control().attr(node),
            None => self.inode_attr(&*self.inode(ino)?),
        }
    }

    fn open_any(&self, ino: INodeNo, flags: i32, pid: u32) -> Result<u64, Errno> {
        if let Some(node) = Node::from_ino(ino.0) {
            if node.is_dir() {
                return Err(libc::EISDIR);
            }
            let content = if flags & libc::O_ACCMODE == libc::O_WRONLY {
                Vec::new()
            } else {
                self.control().read(node)?
            };
            return Ok(self
                .handles
                .insert(Handle::Control(ControlHandle { node, content })));
        }
        let inode = self.inode(ino)?;
        if !inode.is_regular() {
            return Err(libc::EINVAL);
        }
        self.open_regular(inode, flags, pid)
    }

    fn setattr_any(&self, ino: INodeNo, set: SetAttr) -> Result<FileAttr, Errno> {
        if let Some(node) = Node::from_ino(ino.0) {
            // `echo 1 > knob` truncates first; nothing else may change.
            let only_size = set.mode.is_none()
                && !set.ctime
                && set.uid.is_none()
                && set.gid.is_none()
                && set.atime.is_none()
                && set.mtime.is_none();
            if node.is_dir() || !only_size {
                return Err(libc::EPERM);
            }
            return self.control().attr(node);
        }
        self.setattr(&self.inode(ino)?, set)
    }

    fn backing_parent(&self, parent: INodeNo) -> Result<Arc<Inode>, Errno> {
        if Node::from_ino(parent.0).is_some() {
            return Err(libc::EPERM);
        }
        self.inode(parent)
    }

    fn entries(
        &self,
        ino: INodeNo,
        offset: u64,
    ) -> Result<Vec<(u64, crate::dir_entry::DirEntry)>, Errno> {
        match Node::from_ino(ino.0) {
            Some(node) => self.readdir_control(node, offset),
            None => self.readdir(&*self.inode(ino)?, offset),
        }
    }

    /// The inode whose extended attributes are asked for (a symlink's
    /// own, as the backing filesystem has them: see xattr.rs).
    fn xattr_inode(&self, ino: INodeNo) -> Result<Arc<Inode>, Errno> {
        if Node::from_ino(ino.0).is_some() {
            return Err(libc::EOPNOTSUPP);
        }
        self.inode(ino)
    }
}

fn set_time(t: Option<TimeOrNow>) -> Option<SetTime> {
    t.map(|t| match t {
        TimeOrNow::Now => SetTime::Now,
        TimeOrNow::SpecificTime(at) => SetTime::At(at),
    })
}

fn err(e: Errno) -> fuser::Errno {
    fuser::Errno::from_i32(e)
}

/// The attributes of a negative entry: node id 0 tells the kernel the
/// name does not exist; the rest is not looked at.
fn negative_entry() -> FileAttr {
    FileAttr {
        ino: INodeNo(0),
        size: 0,
        blocks: 0,
        atime: SystemTime::UNIX_EPOCH,
        mtime: SystemTime::UNIX_EPOCH,
        ctime: SystemTime::UNIX_EPOCH,
        crtime: SystemTime::UNIX_EPOCH,
        kind: fuser::FileType::RegularFile,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

fn reply_empty(reply: ReplyEmpty, result: Result<(), Errno>) {
    match result {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(err(e)),
    }
}

fn reply_xattr(reply: ReplyXattr, size: u32, result: Result<(usize, Vec<u8>), Errno>) {
    match result {
        Ok((n, _)) if size == 0 => reply.size(n as u32),
        Ok((n, _)) if n > size as usize => reply.error(err(libc::ERANGE)),
        Ok((n, buf)) => reply.data(&buf[..n]),
        Err(e) => reply.error(err(e)),
    }
}

impl Filesystem for WbFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _served = self.requests.start(Opcode::Init);
        // Limits the kernel will not accept are left at its defaults.
        let _ = config.set_max_write(MAX_WRITE_BYTES);
        let _ = config.add_capabilities(InitFlags::FUSE_PARALLEL_DIROPS);
        // Files are opened FOPEN_DIRECT_IO (every read and write reaches the
        // engine); this lets them be mapped all the same (Linux >= 6.6): a
        // mapping uses the kernel's page cache, whose dirty pages reach us
        // as writes, and the kernel keeps the two views coherent (a
        // read() or write() first writes back the mapped range, and a
        // write() invalidates it). Older kernels refuse, and mmap gets
        // ENODEV as before.
        let _ = config.add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP);
        let _ = config.set_max_background(64);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _served = self.requests.start(Opcode::Lookup);
        self.reply_lookup(reply, self.lookup_any(parent, name));
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let _served = self.requests.start(Opcode::Forget);
        self.forget_one(ino, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let _served = self.requests.start(Opcode::Getattr);
        match self.getattr_any(ino) {
            Ok(attr) => reply.attr(&self.ttl(), &attr),
            Err(e) => reply.error(err(e)),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let _served = self.requests.start(Opcode::Setattr);
        let set = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: set_time(atime),
            mtime: set_time(mtime),
            ctime: ctime.is_some(),
        };
        match self.setattr_any(ino, set) {
            Ok(attr) => reply.attr(&self.ttl(), &attr),
            Err(e) => reply.error(err(e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let _served = self.requests.start(Opcode::Readlink);
        match self.inode(ino).and_then(|i| self.readlink(&i)) {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(err(e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let _served = self.requests.start(Opcode::Mknod);
        crate::sys::exact_modes();
        let result = self.backing_parent(parent).and_then(|p| {
            let owner = self.owner_in(&p, req.uid(), req.gid())?;
            self.mknod(&p, name, mode & !umask, rdev, owner)
        });
        self.reply_entry(reply, result);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let _served = self.requests.start(Opcode::Mkdir);
        crate::sys::exact_modes();
        let result = self.backing_parent(parent).and_then(|p| {
            let owner = self.owner_in(&p, req.uid(), req.gid())?;
            self.mkdir(&p, name, mode & !umask, owner)
        });
        self.reply_entry(reply, result);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _served = self.requests.start(Opcode::Unlink);
        let result = self
            .backing_parent(parent)
            .and_then(|p| WbFs::unlink(self, &p, name));
        reply_empty(reply, result);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _served = self.requests.start(Opcode::Rmdir);
        let result = self
            .backing_parent(parent)
            .and_then(|p| WbFs::rmdir(self, &p, name));
        reply_empty(reply, result);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let _served = self.requests.start(Opcode::Symlink);
        let result = self.backing_parent(parent).and_then(|p| {
            let owner = self.owner_in(&p, req.uid(), req.gid())?;
            WbFs::symlink(self, &p, link_name, target.as_os_str(), owner)
        });
        self.reply_entry(reply, result);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let _served = self.requests.start(Opcode::Rename);
        let result = self.backing_parent(parent).and_then(|p| {
            let np = self.backing_parent(newparent)?;
            WbFs::rename(self, &p, name, &np, newname, flags.bits())
        });
        reply_empty(reply, result);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let _served = self.requests.start(Opcode::Link);
        let result = self.backing_parent(ino).and_then(|inode| {
            let np = self.backing_parent(newparent)?;
            WbFs::link(self, &inode, &np, newname)
        });
        self.reply_entry(reply, result);
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let _served = self.requests.start(Opcode::Open);
        match self.open_any(ino, flags.0, req.pid()) {
            Ok(fh) => reply.opened(FileHandle(fh), open_flags_for_data()),
            Err(e) => reply.error(err(e)),
        }
    }

    fn read(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let _served = self.requests.start(Opcode::Read);
        thread_local! {
            /// This serving thread's read buffer, kept between requests
            /// (at most `READ_BUF_KEEP_BYTES`).
            static READ_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        READ_BUF.with_borrow_mut(|buf| {
            // Each request runs as its caller's task (readahead, throttling).
            match writeback::as_caller(req.pid(), || WbFs::read(self, fh.0, offset, size, buf)) {
                Ok(()) => reply.data(buf),
                Err(e) => reply.error(err(e)),
            }
            if buf.capacity() > READ_BUF_KEEP_BYTES {
                *buf = Vec::new();
            }
        });
    }

    fn write(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let _served = self.requests.start(Opcode::Write);
        let writer = (req.uid(), req.gid());
        match writeback::as_caller(req.pid(), || WbFs::write(self, fh.0, offset, data, writer)) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(err(e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let _served = self.requests.start(Opcode::Flush);
        // close(2) is not a durability point; fsync reports write-back
        // errors. ENOSYS tells the kernel never to send FLUSH again (it
        // still writes back a mapping's dirty pages at close): a round
        // trip saved on every close.
        reply.error(err(libc::ENOSYS));
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let _served = self.requests.start(Opcode::Release);
        WbFs::release(self, fh.0);
        reply.ok();
    }

    fn fsync(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let _served = self.requests.start(Opcode::Fsync);
        let result = writeback::as_caller(req.pid(), || WbFs::fsync(self, fh.0, datasync));
        reply_empty(reply, result);
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let _served = self.requests.start(Opcode::Opendir);
        // Listings need no handle (dir.rs).
        if self.backing_use == Backing::Exclusive {
            // ENOSYS: the kernel stops sending OPENDIR and RELEASEDIR for
            // good (two round trips per opendir(3) saved) and keeps the
            // listings it reads in its cache, dropped when the directory
            // changes through the mount (FOPEN_CACHE_DIR | KEEP_CACHE, its
            // default without OPENDIR).
            return reply.error(err(libc::ENOSYS));
        }
        // Shared backing: listings are read again at each open.
        match self.getattr_any(ino) {
            Ok(attr) if attr.kind == fuser::FileType::Directory => {
                reply.opened(FileHandle(0), FopenFlags::empty())
            }
            Ok(_) => reply.error(err(libc::ENOTDIR)),
            Err(e) => reply.error(err(e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let _served = self.requests.start(Opcode::Readdir);
        let entries = match self.entries(ino, offset) {
            Ok(entries) => entries,
            Err(e) => return reply.error(err(e)),
        };
        for (next, entry) in entries {
            if reply.add(INodeNo(entry.ino), next, entry.kind, &entry.name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        let _served = self.requests.start(Opcode::Releasedir);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let _served = self.requests.start(Opcode::Fsyncdir);
        if Node::from_ino(ino.0).is_some() {
            return reply.ok();
        }
        reply_empty(
            reply,
            self.inode(ino).and_then(|i| WbFs::fsyncdir(self, &i)),
        );
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let _served = self.requests.start(Opcode::Statfs);
        match WbFs::statfs(self) {
            Ok(s) => reply.statfs(
                s.blocks(),
                s.blocks_free(),
                s.blocks_available(),
                s.files(),
                s.files_free(),
                s.block_size() as u32,
                s.name_max() as u32,
                s.fragment_size() as u32,
            ),
            Err(e) => reply.error(err(e)),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let _served = self.requests.start(Opcode::Setxattr);
        let result = self.xattr_inode(ino).and_then(|i| match &self.faults {
            Some(faults) if name == crate::xattr::FAIL_WRITES_XATTR => {
                crate::xattr::arm_faults(faults, i.key, value)
            }
            _ => crate::xattr::set(i.fd(), name, value, flags),
        });
        reply_empty(reply, result);
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let _served = self.requests.start(Opcode::Getxattr);
        let result = self.xattr_inode(ino).and_then(|i| {
            let mut buf = vec![0u8; size.min(MAX_XATTR_BYTES) as usize];
            if name == crate::xattr::CACHED_XATTR {
                let (cached, active) = self.cache.cached_bytes(i.key.0, i.key.1).unwrap_or((0, 0));
                let value = format!("{cached} {active}");
                let n = value.len();
                // Too small a buffer: ERANGE (reply_xattr); none: the size.
                if buf.len() >= n {
                    buf[..n].copy_from_slice(value.as_bytes());
                }
                return Ok((n, buf));
            }
            let n = crate::xattr::get(i.fd(), name, &mut buf)?;
            Ok((n, buf))
        });
        reply_xattr(reply, size, result);
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let _served = self.requests.start(Opcode::Listxattr);
        let result = self.xattr_inode(ino).and_then(|i| {
            let mut buf = vec![0u8; size.min(MAX_XATTR_BYTES) as usize];
            let n = crate::xattr::list(i.fd(), &mut buf)?;
            Ok((n, buf))
        });
        reply_xattr(reply, size, result);
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _served = self.requests.start(Opcode::Removexattr);
        let result = self
            .xattr_inode(ino)
            .and_then(|i| crate::xattr::remove(i.fd(), name));
        reply_empty(reply, result);
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let _served = self.requests.start(Opcode::Create);
        crate::sys::exact_modes();
        let result = self.backing_parent(parent).and_then(|p| {
            let name = self.backing_name(&p, name)?;
            let owner = self.owner_in(&p, req.uid(), req.gid())?;
            let (inode, st, fh) =
                self.create_regular(&p, name, mode & !umask, owner, flags, req.pid())?;
            Ok((self.attr_of(&inode, &st), fh))
        });
        match result {
            Ok((attr, fh)) => reply.created(
                &self.ttl(),
                &attr,
                Generation(0),
                FileHandle(fh),
                open_flags_for_data(),
            ),
            Err(e) => reply.error(err(e)),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let _served = self.requests.start(Opcode::Fallocate);
        reply_empty(reply, WbFs::fallocate(self, fh.0, offset, length, mode));
    }

    fn lseek(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: fuser::ReplyLseek,
    ) {
        let _served = self.requests.start(Opcode::Lseek);
        match WbFs::seek_data(self, fh.0, offset, whence) {
            Ok(pos) => reply.offset(pos),
            Err(e) => reply.error(err(e)),
        }
    }

    // What fuser's defaults do (ENOSYS: the kernel does without, most
    // often for good), counted, and without their warning on the log.

    fn destroy(&mut self) {
        let _served = self.requests.start(Opcode::Destroy);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        let _served = self.requests.start(Opcode::Access);
        reply.error(err(libc::ENOSYS));
    }

    fn getlk(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        _start: u64,
        _end: u64,
        _typ: i32,
        _pid: u32,
        reply: fuser::ReplyLock,
    ) {
        let _served = self.requests.start(Opcode::Getlk);
        reply.error(err(libc::ENOSYS));
    }

    fn setlk(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        _start: u64,
        _end: u64,
        _typ: i32,
        _pid: u32,
        _sleep: bool,
        reply: ReplyEmpty,
    ) {
        let _served = self.requests.start(Opcode::Setlk);
        reply.error(err(libc::ENOSYS));
    }

    fn bmap(&self, _req: &Request, _ino: INodeNo, _bs: u32, _idx: u64, reply: fuser::ReplyBmap) {
        let _served = self.requests.start(Opcode::Bmap);
        reply.error(err(libc::ENOSYS));
    }

    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: fuser::IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        let _served = self.requests.start(Opcode::Ioctl);
        reply.error(err(libc::ENOSYS));
    }

    fn poll(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _ph: fuser::PollNotifier,
        _events: fuser::PollEvents,
        _flags: fuser::PollFlags,
        reply: fuser::ReplyPoll,
    ) {
        let _served = self.requests.start(Opcode::Poll);
        reply.error(err(libc::ENOSYS));
    }

    fn readdirplus(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        reply: fuser::ReplyDirectoryPlus,
    ) {
        let _served = self.requests.start(Opcode::Readdirplus);
        reply.error(err(libc::ENOSYS));
    }

    fn copy_file_range(
        &self,
        _req: &Request,
        _ino_in: INodeNo,
        _fh_in: FileHandle,
        _offset_in: u64,
        _ino_out: INodeNo,
        _fh_out: FileHandle,
        _offset_out: u64,
        _len: u64,
        _flags: fuser::CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        let _served = self.requests.start(Opcode::CopyFileRange);
        reply.error(err(libc::ENOSYS));
    }
}
