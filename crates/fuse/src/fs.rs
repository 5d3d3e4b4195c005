//! The FUSE filesystem: routes each kernel request to the backing
//! directory (meta.rs, dir.rs, xattr.rs), the engine (data.rs) or the
//! virtual `.writeback` tree (control.rs), and turns results into replies.
//! No request panics: failures become errno replies.

use crate::attr::SetAttr;
use crate::control::{Control, Node};
use crate::handles::HandleTable;
use crate::inode::{Inode, InodeTable};
use crate::ops::{Caller, Xattr};
use crate::orphans::Orphans;
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

pub(crate) fn open_flags_for_data() -> FopenFlags {
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
    /// Ask the kernel for FUSE over io_uring in INIT (uring/).
    pub(crate) uring: bool,
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
            uring: false,
        })
    }

    /// Lets `.writeback/trace` start and stop traces written to `target`.
    pub fn with_trace(mut self, target: Option<crate::control::TraceTarget>) -> WbFs {
        self.trace = target;
        self
    }

    /// Asks for FUSE over io_uring in INIT (the kernel must have it on).
    pub fn with_uring(mut self, uring: bool) -> WbFs {
        self.uring = uring;
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

    fn reply_attr(&self, reply: ReplyAttr, result: Result<FileAttr, Errno>) {
        match result {
            Ok(attr) => reply.attr(&self.ttl(), &attr),
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

    pub(crate) fn inode(&self, ino: INodeNo) -> Result<Arc<Inode>, Errno> {
        self.inodes.get(ino.0)
    }

    pub(crate) fn backing_parent(&self, parent: INodeNo) -> Result<Arc<Inode>, Errno> {
        if Node::from_ino(parent.0).is_some() {
            return Err(libc::EPERM);
        }
        self.inode(parent)
    }

    /// The inode whose extended attributes are asked for (a symlink's
    /// own, as the backing filesystem has them: see xattr.rs).
    pub(crate) fn xattr_inode(&self, ino: INodeNo) -> Result<Arc<Inode>, Errno> {
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
pub(crate) fn negative_entry() -> FileAttr {
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

/// The filesystem as fuser serves it over /dev/fuse; the io_uring queues
/// (uring/) serve the same `WbFs`.
pub(crate) struct Fuser(pub Arc<WbFs>);

impl std::ops::Deref for Fuser {
    type Target = WbFs;

    fn deref(&self) -> &WbFs {
        &self.0
    }
}

impl Filesystem for Fuser {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _served = self.requests.start(Opcode::Init);
        if self.uring {
            // Offered by a kernel with it on (checked before mounting);
            // the queues register once this INIT is answered.
            if let Err(missing) = config.add_capabilities(InitFlags::FUSE_OVER_IO_URING) {
                eprintln!("wb-fuse: the kernel did not offer FUSE over io_uring ({missing:?}); serving over /dev/fuse");
            }
        }
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

    fn destroy(&mut self) {
        self.op_destroy();
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.reply_entry(reply, self.op_lookup(parent, name));
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.op_forget(ino, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.reply_attr(reply, self.op_getattr(ino));
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
        let set = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: set_time(atime),
            mtime: set_time(mtime),
            ctime: ctime.is_some(),
        };
        self.reply_attr(reply, self.op_setattr(ino, set));
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.op_readlink(ino) {
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
        let result = self.op_mknod(caller(req), parent, name, mode & !umask, rdev);
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
        let result = self.op_mkdir(caller(req), parent, name, mode & !umask);
        self.reply_entry(reply, result);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply_empty(reply, self.op_unlink(parent, name));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply_empty(reply, self.op_rmdir(parent, name));
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let result = self.op_symlink(caller(req), parent, link_name, target.as_os_str());
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
        reply_empty(
            reply,
            self.op_rename(parent, name, newparent, newname, flags.bits()),
        );
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.reply_entry(reply, self.op_link(ino, newparent, newname));
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.op_open(caller(req), ino, flags.0) {
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
        thread_local! {
            /// This serving thread's read buffer, kept between requests
            /// (at most `READ_BUF_KEEP_BYTES`).
            static READ_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        READ_BUF.with_borrow_mut(|buf| {
            match self.op_read(caller(req), fh.0, offset, size, buf) {
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
        match self.op_write(caller(req), fh.0, offset, data) {
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
        reply.error(err(self.op_flush()));
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
        self.op_release(fh.0);
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
        reply_empty(reply, self.op_fsync(caller(req), fh.0, datasync));
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.op_opendir(ino) {
            Ok(()) => reply.opened(FileHandle(0), FopenFlags::empty()),
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
        let entries = match self.op_readdir(ino, offset) {
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
        self.op_releasedir();
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
        reply_empty(reply, self.op_fsyncdir(ino));
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.op_statfs() {
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
        reply_empty(reply, self.op_setxattr(ino, name, value, flags));
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        reply_xattr(reply, self.op_getxattr(ino, name, size));
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        reply_xattr(reply, self.op_listxattr(ino, size));
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply_empty(reply, self.op_removexattr(ino, name));
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
        match self.op_create(caller(req), parent, name, mode & !umask, flags) {
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
        reply_empty(reply, self.op_fallocate(fh.0, offset, length, mode));
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
        match self.op_lseek(fh.0, offset, whence) {
            Ok(pos) => reply.offset(pos),
            Err(e) => reply.error(err(e)),
        }
    }

    // What fuser's defaults do (ENOSYS), counted, without their warning.

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        reply.error(err(self.op_unsupported(Opcode::Access)));
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
        reply.error(err(self.op_unsupported(Opcode::Getlk)));
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
        reply.error(err(self.op_unsupported(Opcode::Setlk)));
    }

    fn bmap(&self, _req: &Request, _ino: INodeNo, _bs: u32, _idx: u64, reply: fuser::ReplyBmap) {
        reply.error(err(self.op_unsupported(Opcode::Bmap)));
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
        reply.error(err(self.op_unsupported(Opcode::Ioctl)));
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
        reply.error(err(self.op_unsupported(Opcode::Poll)));
    }

    fn readdirplus(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        reply: fuser::ReplyDirectoryPlus,
    ) {
        reply.error(err(self.op_unsupported(Opcode::Readdirplus)));
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
        reply.error(err(self.op_unsupported(Opcode::CopyFileRange)));
    }
}

/// The request's sender, for the transport-neutral operations (ops.rs).
fn caller(req: &Request) -> Caller {
    Caller {
        uid: req.uid(),
        gid: req.gid(),
        pid: req.pid(),
    }
}

fn reply_xattr(reply: ReplyXattr, result: Result<Xattr, Errno>) {
    match result {
        Ok(Xattr::Size(n)) => reply.size(n),
        Ok(Xattr::Data(bytes)) => reply.data(&bytes),
        Err(e) => reply.error(err(e)),
    }
}
