//! The filesystem's operations, one per FUSE opcode, as the transports
//! call them: each takes a request's decoded arguments and returns what
//! its reply carries, or an errno. Neither transport decides anything:
//! fuser's `Filesystem` (fs.rs, over /dev/fuse) and the io_uring queues
//! (uring/) decode a request, call its operation, and encode the answer.
//! Each operation counts its request (requests.rs).

use crate::attr::SetAttr;
use crate::control::{Node, CONTROL_DIR};
use crate::dir_entry::DirEntry;
use crate::fs::{negative_entry, Backing, WbFs};
use crate::handles::{ControlHandle, Handle};
use crate::inode::ROOT_ID;
use crate::orphans::ORPHAN_DIR;
use crate::requests::Opcode;
use crate::sys::Errno;
use fuser::{FileAttr, INodeNo};
use std::ffi::OsStr;

/// Who sent a request (its header's uid, gid and pid).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Caller {
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
}

/// An extended attribute operation's answer: the size the caller asked
/// for (a size of 0 in the request), or the bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Xattr {
    Size(u32),
    Data(Vec<u8>),
}

/// Largest xattr value or list returned.
const MAX_XATTR_BYTES: u32 = 64 * 1024;

/// `result` as an xattr answer for a buffer of `size` bytes: ERANGE when
/// it does not fit.
fn xattr_answer(size: u32, result: Result<(usize, Vec<u8>), Errno>) -> Result<Xattr, Errno> {
    let (n, mut buf) = result?;
    if size == 0 {
        return Ok(Xattr::Size(u32::try_from(n).unwrap_or(u32::MAX)));
    }
    if n > size as usize {
        return Err(libc::ERANGE);
    }
    buf.truncate(n);
    Ok(Xattr::Data(buf))
}

impl WbFs {
    pub(crate) fn op_lookup(&self, parent: INodeNo, name: &OsStr) -> Result<FileAttr, Errno> {
        let _served = self.requests.start(Opcode::Lookup);
        match self.lookup_any(parent, name) {
            // A name that does not exist, remembered as such (a negative
            // entry: node id 0): creating files asks for each name first.
            Err(libc::ENOENT) if self.backing_use == Backing::Exclusive => Ok(negative_entry()),
            result => result,
        }
    }

    pub(crate) fn op_forget(&self, ino: INodeNo, nlookup: u64) {
        let _served = self.requests.start(Opcode::Forget);
        if Node::from_ino(ino.0).is_none() {
            self.inodes.forget(ino.0, nlookup);
        }
    }

    pub(crate) fn op_getattr(&self, ino: INodeNo) -> Result<FileAttr, Errno> {
        let _served = self.requests.start(Opcode::Getattr);
        self.getattr_any(ino)
    }

    pub(crate) fn op_setattr(&self, ino: INodeNo, set: SetAttr) -> Result<FileAttr, Errno> {
        let _served = self.requests.start(Opcode::Setattr);
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

    pub(crate) fn op_readlink(&self, ino: INodeNo) -> Result<Vec<u8>, Errno> {
        let _served = self.requests.start(Opcode::Readlink);
        self.inode(ino).and_then(|i| self.readlink(&i))
    }

    pub(crate) fn op_mknod(
        &self,
        caller: Caller,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        rdev: u32,
    ) -> Result<FileAttr, Errno> {
        let _served = self.requests.start(Opcode::Mknod);
        crate::sys::exact_modes();
        let p = self.backing_parent(parent)?;
        let owner = self.owner_in(&p, caller.uid, caller.gid)?;
        self.mknod(&p, name, mode, rdev, owner)
    }

    pub(crate) fn op_mkdir(
        &self,
        caller: Caller,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
    ) -> Result<FileAttr, Errno> {
        let _served = self.requests.start(Opcode::Mkdir);
        crate::sys::exact_modes();
        let p = self.backing_parent(parent)?;
        let owner = self.owner_in(&p, caller.uid, caller.gid)?;
        self.mkdir(&p, name, mode, owner)
    }

    pub(crate) fn op_unlink(&self, parent: INodeNo, name: &OsStr) -> Result<(), Errno> {
        let _served = self.requests.start(Opcode::Unlink);
        let p = self.backing_parent(parent)?;
        WbFs::unlink(self, &p, name)
    }

    pub(crate) fn op_rmdir(&self, parent: INodeNo, name: &OsStr) -> Result<(), Errno> {
        let _served = self.requests.start(Opcode::Rmdir);
        let p = self.backing_parent(parent)?;
        WbFs::rmdir(self, &p, name)
    }

    pub(crate) fn op_symlink(
        &self,
        caller: Caller,
        parent: INodeNo,
        name: &OsStr,
        target: &OsStr,
    ) -> Result<FileAttr, Errno> {
        let _served = self.requests.start(Opcode::Symlink);
        let p = self.backing_parent(parent)?;
        let owner = self.owner_in(&p, caller.uid, caller.gid)?;
        WbFs::symlink(self, &p, name, target, owner)
    }

    pub(crate) fn op_rename(
        &self,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: u32,
    ) -> Result<(), Errno> {
        let _served = self.requests.start(Opcode::Rename);
        let p = self.backing_parent(parent)?;
        let np = self.backing_parent(newparent)?;
        WbFs::rename(self, &p, name, &np, newname, flags)
    }

    pub(crate) fn op_link(
        &self,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
    ) -> Result<FileAttr, Errno> {
        let _served = self.requests.start(Opcode::Link);
        let inode = self.backing_parent(ino)?;
        let np = self.backing_parent(newparent)?;
        WbFs::link(self, &inode, &np, newname)
    }

    /// Opens `ino`: the handle (its open flags are `open_flags_for_data`).
    pub(crate) fn op_open(&self, caller: Caller, ino: INodeNo, flags: i32) -> Result<u64, Errno> {
        let _served = self.requests.start(Opcode::Open);
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
        self.open_regular(inode, flags, caller.pid)
    }

    /// Reads into `buf` (cleared first), as the calling task.
    pub(crate) fn op_read(
        &self,
        caller: Caller,
        fh: u64,
        offset: u64,
        size: u32,
        buf: &mut Vec<u8>,
    ) -> Result<(), Errno> {
        let _served = self.requests.start(Opcode::Read);
        // Each request runs as its caller's task (readahead, throttling).
        writeback::as_caller(caller.pid, || WbFs::read(self, fh, offset, size, buf))
    }

    pub(crate) fn op_write(
        &self,
        caller: Caller,
        fh: u64,
        offset: u64,
        data: &[u8],
    ) -> Result<u32, Errno> {
        let _served = self.requests.start(Opcode::Write);
        let writer = (caller.uid, caller.gid);
        writeback::as_caller(caller.pid, || WbFs::write(self, fh, offset, data, writer))
    }

    /// close(2) is not a durability point; fsync reports write-back
    /// errors. ENOSYS tells the kernel never to send FLUSH again (it still
    /// writes back a mapping's dirty pages at close): a round trip saved
    /// on every close.
    pub(crate) fn op_flush(&self) -> Errno {
        let _served = self.requests.start(Opcode::Flush);
        libc::ENOSYS
    }

    pub(crate) fn op_release(&self, fh: u64) {
        let _served = self.requests.start(Opcode::Release);
        WbFs::release(self, fh);
    }

    pub(crate) fn op_fsync(&self, caller: Caller, fh: u64, datasync: bool) -> Result<(), Errno> {
        let _served = self.requests.start(Opcode::Fsync);
        writeback::as_caller(caller.pid, || WbFs::fsync(self, fh, datasync))
    }

    /// Ok: opened (handle 0: listings need no handle, dir.rs).
    pub(crate) fn op_opendir(&self, ino: INodeNo) -> Result<(), Errno> {
        let _served = self.requests.start(Opcode::Opendir);
        if self.backing_use == Backing::Exclusive {
            // ENOSYS: the kernel stops sending OPENDIR and RELEASEDIR for
            // good (two round trips per opendir(3) saved) and keeps the
            // listings it reads in its cache, dropped when the directory
            // changes through the mount (FOPEN_CACHE_DIR | KEEP_CACHE, its
            // default without OPENDIR).
            return Err(libc::ENOSYS);
        }
        // Shared backing: listings are read again at each open.
        match self.getattr_any(ino)?.kind {
            fuser::FileType::Directory => Ok(()),
            _ => Err(libc::ENOTDIR),
        }
    }

    /// The entries from `offset` on, each with the offset of the next.
    pub(crate) fn op_readdir(
        &self,
        ino: INodeNo,
        offset: u64,
    ) -> Result<Vec<(u64, DirEntry)>, Errno> {
        let _served = self.requests.start(Opcode::Readdir);
        match Node::from_ino(ino.0) {
            Some(node) => self.readdir_control(node, offset),
            None => self.readdir(&*self.inode(ino)?, offset),
        }
    }

    pub(crate) fn op_releasedir(&self) {
        let _served = self.requests.start(Opcode::Releasedir);
    }

    pub(crate) fn op_fsyncdir(&self, ino: INodeNo) -> Result<(), Errno> {
        let _served = self.requests.start(Opcode::Fsyncdir);
        if Node::from_ino(ino.0).is_some() {
            return Ok(());
        }
        self.inode(ino).and_then(|i| WbFs::fsyncdir(self, &i))
    }

    pub(crate) fn op_statfs(&self) -> Result<nix::sys::statvfs::Statvfs, Errno> {
        let _served = self.requests.start(Opcode::Statfs);
        WbFs::statfs(self)
    }

    pub(crate) fn op_setxattr(
        &self,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
    ) -> Result<(), Errno> {
        let _served = self.requests.start(Opcode::Setxattr);
        let i = self.xattr_inode(ino)?;
        match &self.faults {
            Some(faults) if name == crate::xattr::FAIL_WRITES_XATTR => {
                crate::xattr::arm_faults(faults, i.key, value)
            }
            _ => crate::xattr::set(i.fd(), name, value, flags),
        }
    }

    pub(crate) fn op_getxattr(
        &self,
        ino: INodeNo,
        name: &OsStr,
        size: u32,
    ) -> Result<Xattr, Errno> {
        let _served = self.requests.start(Opcode::Getxattr);
        let result = self.xattr_inode(ino).and_then(|i| {
            let mut buf = vec![0u8; size.min(MAX_XATTR_BYTES) as usize];
            if name == crate::xattr::CACHED_XATTR {
                let (cached, active) = self.cache.cached_bytes(i.key.0, i.key.1).unwrap_or((0, 0));
                let value = format!("{cached} {active}");
                let n = value.len();
                // Too small a buffer: ERANGE (xattr_answer); none: the size.
                if buf.len() >= n {
                    buf[..n].copy_from_slice(value.as_bytes());
                }
                return Ok((n, buf));
            }
            let n = crate::xattr::get(i.fd(), name, &mut buf)?;
            Ok((n, buf))
        });
        xattr_answer(size, result)
    }

    pub(crate) fn op_listxattr(&self, ino: INodeNo, size: u32) -> Result<Xattr, Errno> {
        let _served = self.requests.start(Opcode::Listxattr);
        let result = self.xattr_inode(ino).and_then(|i| {
            let mut buf = vec![0u8; size.min(MAX_XATTR_BYTES) as usize];
            let n = crate::xattr::list(i.fd(), &mut buf)?;
            Ok((n, buf))
        });
        xattr_answer(size, result)
    }

    pub(crate) fn op_removexattr(&self, ino: INodeNo, name: &OsStr) -> Result<(), Errno> {
        let _served = self.requests.start(Opcode::Removexattr);
        crate::xattr::remove(self.xattr_inode(ino)?.fd(), name)
    }

    /// Creates and opens a regular file: its attributes and handle.
    pub(crate) fn op_create(
        &self,
        caller: Caller,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        flags: i32,
    ) -> Result<(FileAttr, u64), Errno> {
        let _served = self.requests.start(Opcode::Create);
        crate::sys::exact_modes();
        let p = self.backing_parent(parent)?;
        let name = self.backing_name(&p, name)?;
        let owner = self.owner_in(&p, caller.uid, caller.gid)?;
        let (inode, st, fh) = self.create_regular(&p, name, mode, owner, flags, caller.pid)?;
        Ok((self.attr_of(&inode, &st), fh))
    }

    pub(crate) fn op_fallocate(
        &self,
        fh: u64,
        offset: u64,
        len: u64,
        mode: i32,
    ) -> Result<(), Errno> {
        let _served = self.requests.start(Opcode::Fallocate);
        WbFs::fallocate(self, fh, offset, len, mode)
    }

    pub(crate) fn op_lseek(&self, fh: u64, offset: i64, whence: i32) -> Result<i64, Errno> {
        let _served = self.requests.start(Opcode::Lseek);
        WbFs::seek_data(self, fh, offset, whence)
    }

    pub(crate) fn op_destroy(&self) {
        let _served = self.requests.start(Opcode::Destroy);
    }

    /// An opcode the mount does not serve: ENOSYS, after which the kernel
    /// does without (ACCESS: it checks permissions itself; locks: it keeps
    /// them locally; READDIRPLUS: READDIR and LOOKUP).
    pub(crate) fn op_unsupported(&self, op: Opcode) -> Errno {
        let _served = self.requests.start(op);
        libc::ENOSYS
    }

    pub(crate) fn lookup_any(&self, parent: INodeNo, name: &OsStr) -> Result<FileAttr, Errno> {
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

    pub(crate) fn getattr_any(&self, ino: INodeNo) -> Result<FileAttr, Errno> {
        match Node::from_ino(ino.0) {
            Some(node) => self.control().attr(node),
            None => self.inode_attr(&*self.inode(ino)?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_xattr_answer_is_its_size_its_bytes_or_erange() {
        let found = || Ok((5, b"hello and more".to_vec()));
        assert_eq!(xattr_answer(0, found()), Ok(Xattr::Size(5)));
        assert_eq!(xattr_answer(8, found()), Ok(Xattr::Data(b"hello".to_vec())));
        assert_eq!(xattr_answer(4, found()), Err(libc::ERANGE));
        assert_eq!(xattr_answer(8, Err(libc::ENODATA)), Err(libc::ENODATA));
    }
}
