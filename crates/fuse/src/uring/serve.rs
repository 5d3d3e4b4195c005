//! One request taken from a ring entry: decoded (wire.rs), served by the
//! filesystem's operation for its opcode (ops.rs, as over /dev/fuse),
//! and its answer encoded into the entry's payload buffer.

use super::wire::*;
use crate::attr::SetAttr;
use crate::dir_entry::DirEntry;
use crate::fs::{open_flags_for_data, WbFs};
use crate::ops::{Caller, Xattr};
use crate::requests::Opcode;
use crate::sys::{Errno, SetTime};
use fuser::{FileAttr, INodeNo};

/// What a request's reply carries.
pub enum Reply {
    Entry(FileAttr),
    Attr(FileAttr),
    Empty,
    Bytes(Vec<u8>),
    /// The serving thread's read buffer.
    Read,
    Open(u64, u32),
    Create(FileAttr, u64),
    Written(u32),
    Statfs(nix::sys::statvfs::Statvfs),
    XattrSize(u32),
    Offset(i64),
    /// Entries from a READDIR of at most the size it names.
    Dir(Vec<(u64, DirEntry)>, u32),
}

/// Serves the request with header `h`, per-opcode struct `op` and other
/// arguments `payload`.
pub fn call(
    fs: &WbFs,
    h: &InHeader,
    op: &[u8],
    payload: &[u8],
    read_buf: &mut Vec<u8>,
) -> Result<Reply, Errno> {
    let f = Fields(op);
    let bad = || libc::EINVAL;
    let ino = INodeNo(h.nodeid);
    let caller = Caller {
        uid: h.uid,
        gid: h.gid,
        pid: h.pid,
    };
    let name = || names::<1>(payload).map(|([n], _)| n).ok_or(libc::EINVAL);
    Ok(match h.opcode {
        FUSE_LOOKUP => Reply::Entry(fs.op_lookup(ino, name()?)?),
        FUSE_GETATTR => Reply::Attr(fs.op_getattr(ino)?),
        FUSE_SETATTR => Reply::Attr(fs.op_setattr(ino, set_attr(f)?)?),
        FUSE_READLINK => Reply::Bytes(fs.op_readlink(ino)?),
        FUSE_SYMLINK => {
            let ([a, b], _) = names::<2>(payload).ok_or_else(bad)?;
            Reply::Entry(fs.op_symlink(caller, ino, a, b)?)
        }
        FUSE_MKNOD => {
            let (mode, rdev, umask) = (f.u32(0)?, f.u32(4)?, f.u32(8)?);
            Reply::Entry(fs.op_mknod(caller, ino, name()?, mode & !umask, rdev)?)
        }
        FUSE_MKDIR => {
            let mode = f.u32(0)? & !f.u32(4)?;
            Reply::Entry(fs.op_mkdir(caller, ino, name()?, mode)?)
        }
        FUSE_UNLINK => fs.op_unlink(ino, name()?).map(|()| Reply::Empty)?,
        FUSE_RMDIR => fs.op_rmdir(ino, name()?).map(|()| Reply::Empty)?,
        FUSE_RENAME | FUSE_RENAME2 => {
            let newdir = INodeNo(f.u64(0)?);
            let flags = match h.opcode {
                FUSE_RENAME2 => f.u32(8)?,
                _ => 0,
            };
            let ([a, b], _) = names::<2>(payload).ok_or_else(bad)?;
            fs.op_rename(ino, a, newdir, b, flags)
                .map(|()| Reply::Empty)?
        }
        FUSE_LINK => {
            let old = INodeNo(f.u64(0)?);
            Reply::Entry(fs.op_link(old, ino, name()?)?)
        }
        FUSE_OPEN => {
            let fh = fs.op_open(caller, ino, f.i32(0)?)?;
            Reply::Open(fh, open_flags_for_data().bits())
        }
        FUSE_READ => {
            let (fh, offset, size) = (f.u64(0)?, f.u64(8)?, f.u32(16)?);
            fs.op_read(caller, fh, offset, size, read_buf)?;
            Reply::Read
        }
        FUSE_WRITE => {
            let (fh, offset, size) = (f.u64(0)?, f.u64(8)?, f.u32(16)?);
            let data = payload.get(..size as usize).ok_or_else(bad)?;
            Reply::Written(fs.op_write(caller, fh, offset, data)?)
        }
        FUSE_STATFS => Reply::Statfs(fs.op_statfs()?),
        FUSE_RELEASE => {
            fs.op_release(f.u64(0)?);
            Reply::Empty
        }
        FUSE_FSYNC => {
            let fh = f.u64(0)?;
            let datasync = f.u32(8)? & FUSE_FSYNC_FDATASYNC != 0;
            fs.op_fsync(caller, fh, datasync).map(|()| Reply::Empty)?
        }
        FUSE_SETXATTR => {
            let (size, flags) = (f.u32(0)?, f.i32(4)?);
            let ([n], rest) = names::<1>(payload).ok_or_else(bad)?;
            let value = rest.get(..size as usize).ok_or_else(bad)?;
            fs.op_setxattr(ino, n, value, flags)
                .map(|()| Reply::Empty)?
        }
        FUSE_GETXATTR => xattr(fs.op_getxattr(ino, name()?, f.u32(0)?)?),
        FUSE_LISTXATTR => xattr(fs.op_listxattr(ino, f.u32(0)?)?),
        FUSE_REMOVEXATTR => fs.op_removexattr(ino, name()?).map(|()| Reply::Empty)?,
        FUSE_FLUSH => return Err(fs.op_flush()),
        FUSE_OPENDIR => fs.op_opendir(ino).map(|()| Reply::Open(0, 0))?,
        FUSE_READDIR => {
            let (offset, size) = (f.u64(8)?, f.u32(16)?);
            Reply::Dir(fs.op_readdir(ino, offset)?, size)
        }
        FUSE_RELEASEDIR => {
            fs.op_releasedir();
            Reply::Empty
        }
        FUSE_FSYNCDIR => fs.op_fsyncdir(ino).map(|()| Reply::Empty)?,
        FUSE_CREATE => {
            let (flags, mode, umask) = (f.i32(0)?, f.u32(4)?, f.u32(8)?);
            let (attr, fh) = fs.op_create(caller, ino, name()?, mode & !umask, flags)?;
            Reply::Create(attr, fh)
        }
        FUSE_FALLOCATE => {
            let (fh, offset, len, mode) = (f.u64(0)?, f.u64(8)?, f.u64(16)?, f.i32(24)?);
            fs.op_fallocate(fh, offset, len, mode)
                .map(|()| Reply::Empty)?
        }
        FUSE_LSEEK => {
            let (fh, offset, whence) = (f.u64(0)?, f.u64(8)?, f.i32(16)?);
            Reply::Offset(fs.op_lseek(fh, offset as i64, whence)?)
        }
        // Counted by fuser's `destroy`, which it calls once as its session
        // ends, also when the request came over a ring.
        FUSE_DESTROY => Reply::Empty,
        other => return Err(fs.op_unsupported(unsupported(other))),
    })
}

/// The opcode an unserved request is counted under.
fn unsupported(opcode: u32) -> Opcode {
    match opcode {
        FUSE_GETLK => Opcode::Getlk,
        FUSE_SETLK | FUSE_SETLKW => Opcode::Setlk,
        FUSE_ACCESS => Opcode::Access,
        FUSE_BMAP => Opcode::Bmap,
        FUSE_IOCTL => Opcode::Ioctl,
        FUSE_POLL => Opcode::Poll,
        FUSE_READDIRPLUS => Opcode::Readdirplus,
        FUSE_COPY_FILE_RANGE => Opcode::CopyFileRange,
        _ => Opcode::Other,
    }
}

fn xattr(x: Xattr) -> Reply {
    match x {
        Xattr::Size(n) => Reply::XattrSize(n),
        Xattr::Data(bytes) => Reply::Bytes(bytes),
    }
}

/// A SETATTR's changes (`struct fuse_setattr_in`).
fn set_attr(f: Fields<'_>) -> Result<SetAttr, Errno> {
    let valid = f.u32(0)?;
    let has = |bit: u32| valid & bit != 0;
    let when = |set: u32, now: u32, sec: u64, nsec: u32| {
        if has(now) {
            Some(SetTime::Now)
        } else if has(set) {
            Some(SetTime::At(time(sec, nsec)))
        } else {
            None
        }
    };
    Ok(SetAttr {
        mode: has(FATTR_MODE).then_some(f.u32(68)?),
        uid: has(FATTR_UID).then_some(f.u32(76)?),
        gid: has(FATTR_GID).then_some(f.u32(80)?),
        size: has(FATTR_SIZE).then_some(f.u64(16)?),
        atime: when(FATTR_ATIME, FATTR_ATIME_NOW, f.u64(32)?, f.u32(56)?),
        mtime: when(FATTR_MTIME, FATTR_MTIME_NOW, f.u64(40)?, f.u32(60)?),
        ctime: has(FATTR_CTIME),
    })
}

/// Encodes `reply` into `out`; Err(EIO) if it does not fit (never with
/// a payload buffer of the kernel's largest request).
pub fn encode(fs: &WbFs, reply: &Reply, read_buf: &[u8], out: &mut Out<'_>) -> Result<(), Errno> {
    let ttl = fs.ttl();
    let fits = match reply {
        Reply::Entry(a) => out.entry(a, ttl),
        Reply::Attr(a) => out.attr_out(a, ttl),
        Reply::Empty => true,
        Reply::Bytes(b) => out.put(b),
        Reply::Read => out.put(read_buf),
        Reply::Open(fh, flags) => out.open_out(*fh, *flags),
        Reply::Create(a, fh) => {
            out.entry(a, ttl) && out.open_out(*fh, open_flags_for_data().bits())
        }
        Reply::Written(n) => out.u32(*n) && out.u32(0),
        Reply::Statfs(s) => {
            let u32_of = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
            out.u64(s.blocks())
                && out.u64(s.blocks_free())
                && out.u64(s.blocks_available())
                && out.u64(s.files())
                && out.u64(s.files_free())
                && out.u32(u32_of(s.block_size()))
                && out.u32(u32_of(s.name_max()))
                && out.u32(u32_of(s.fragment_size()))
                && out.put(&[0u8; 28])
        }
        Reply::XattrSize(n) => out.u32(*n) && out.u32(0),
        Reply::Offset(pos) => out.u64(*pos as u64),
        Reply::Dir(entries, size) => {
            let room = (*size as usize).min(out.capacity());
            for (next, e) in entries {
                if out.len() + dirent_len(e) > room || !out.dirent(e.ino, *next, e.kind, &e.name) {
                    break;
                }
            }
            true
        }
    };
    if fits {
        Ok(())
    } else {
        Err(libc::EIO)
    }
}

fn dirent_len(e: &DirEntry) -> usize {
    (24 + e.name.len()).next_multiple_of(8)
}
