//! The FUSE protocol as a ring entry carries it (include/uapi/linux/fuse.h,
//! fs/fuse/dev_uring.c): a request's `fuse_in_header` in the header
//! buffer's first 128 bytes, its per-opcode struct (`fuse_read_in`, …) in
//! the next 128, its other arguments (names, written data) one after the
//! other in the payload buffer; a reply's `fuse_out_header` in the first
//! 128 bytes and everything it carries in the payload buffer.
//!
//! Decoding reads little-endian fields at the kernel's offsets, checking
//! every length; a request too short for its opcode is answered EINVAL.

use crate::sys::Errno;
use fuser::{FileAttr, FileType};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Bytes of the header buffer given to the kernel per entry:
/// `struct fuse_uring_req_header`.
pub const HEADER_BYTES: usize = 288;
/// Where the per-opcode struct starts in the header buffer.
pub const OP_IN_AT: usize = 128;
/// Where `struct fuse_uring_ent_in_out` starts.
pub const ENT_AT: usize = 256;

pub const FUSE_LOOKUP: u32 = 1;
pub const FUSE_GETATTR: u32 = 3;
pub const FUSE_SETATTR: u32 = 4;
pub const FUSE_READLINK: u32 = 5;
pub const FUSE_SYMLINK: u32 = 6;
pub const FUSE_MKNOD: u32 = 8;
pub const FUSE_MKDIR: u32 = 9;
pub const FUSE_UNLINK: u32 = 10;
pub const FUSE_RMDIR: u32 = 11;
pub const FUSE_RENAME: u32 = 12;
pub const FUSE_LINK: u32 = 13;
pub const FUSE_OPEN: u32 = 14;
pub const FUSE_READ: u32 = 15;
pub const FUSE_WRITE: u32 = 16;
pub const FUSE_STATFS: u32 = 17;
pub const FUSE_RELEASE: u32 = 18;
pub const FUSE_FSYNC: u32 = 20;
pub const FUSE_SETXATTR: u32 = 21;
pub const FUSE_GETXATTR: u32 = 22;
pub const FUSE_LISTXATTR: u32 = 23;
pub const FUSE_REMOVEXATTR: u32 = 24;
pub const FUSE_FLUSH: u32 = 25;
pub const FUSE_OPENDIR: u32 = 27;
pub const FUSE_READDIR: u32 = 28;
pub const FUSE_RELEASEDIR: u32 = 29;
pub const FUSE_FSYNCDIR: u32 = 30;
pub const FUSE_GETLK: u32 = 31;
pub const FUSE_SETLK: u32 = 32;
pub const FUSE_SETLKW: u32 = 33;
pub const FUSE_ACCESS: u32 = 34;
pub const FUSE_CREATE: u32 = 35;
pub const FUSE_BMAP: u32 = 37;
pub const FUSE_DESTROY: u32 = 38;
pub const FUSE_IOCTL: u32 = 39;
pub const FUSE_POLL: u32 = 40;
pub const FUSE_FALLOCATE: u32 = 43;
pub const FUSE_READDIRPLUS: u32 = 44;
pub const FUSE_RENAME2: u32 = 45;
pub const FUSE_LSEEK: u32 = 46;
pub const FUSE_COPY_FILE_RANGE: u32 = 47;

/// `fuse_setattr_in.valid` bits.
pub const FATTR_MODE: u32 = 1 << 0;
pub const FATTR_UID: u32 = 1 << 1;
pub const FATTR_GID: u32 = 1 << 2;
pub const FATTR_SIZE: u32 = 1 << 3;
pub const FATTR_ATIME: u32 = 1 << 4;
pub const FATTR_MTIME: u32 = 1 << 5;
pub const FATTR_ATIME_NOW: u32 = 1 << 7;
pub const FATTR_MTIME_NOW: u32 = 1 << 8;
pub const FATTR_CTIME: u32 = 1 << 10;

/// `fuse_fsync_in.fsync_flags`: data only.
pub const FUSE_FSYNC_FDATASYNC: u32 = 1;

/// Little-endian fields of a byte slice, each checked against its length:
/// a field the slice is too short to hold is EINVAL (a malformed request).
#[derive(Clone, Copy)]
pub struct Fields<'a>(pub &'a [u8]);

impl Fields<'_> {
    fn bytes<const N: usize>(self, at: usize) -> Result<[u8; N], Errno> {
        let b = self.0.get(at..at + N).ok_or(libc::EINVAL)?;
        b.try_into().map_err(|_| libc::EINVAL)
    }

    pub fn u32(self, at: usize) -> Result<u32, Errno> {
        self.bytes(at).map(u32::from_le_bytes)
    }

    pub fn u64(self, at: usize) -> Result<u64, Errno> {
        self.bytes(at).map(u64::from_le_bytes)
    }

    pub fn i32(self, at: usize) -> Result<i32, Errno> {
        self.bytes(at).map(i32::from_le_bytes)
    }
}

/// A request's `fuse_in_header`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InHeader {
    pub opcode: u32,
    pub unique: u64,
    pub nodeid: u64,
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
}

impl InHeader {
    /// The header at the start of `b` (40 bytes).
    pub fn parse(b: &[u8]) -> Option<InHeader> {
        let f = Fields(b.get(..40)?);
        Some(InHeader {
            opcode: f.u32(4).ok()?,
            unique: f.u64(8).ok()?,
            nodeid: f.u64(16).ok()?,
            uid: f.u32(24).ok()?,
            gid: f.u32(28).ok()?,
            pid: f.u32(32).ok()?,
        })
    }
}

/// The NUL-terminated strings at the start of a payload, in order: a
/// name, or two (RENAME's old and new, SYMLINK's name and target); the
/// rest after the last one (SETXATTR's value).
pub fn names<const N: usize>(payload: &[u8]) -> Option<([&OsStr; N], &[u8])> {
    let mut rest = payload;
    let mut out = [OsStr::new(""); N];
    for name in &mut out {
        let end = rest.iter().position(|&b| b == 0)?;
        *name = OsStr::from_bytes(&rest[..end]);
        rest = &rest[end + 1..];
    }
    Some((out, rest))
}

/// A reply's `fuse_out_header` for `unique`: `error` is an errno (0 for
/// success), `len` the bytes it carries.
pub fn out_header(unique: u64, error: i32, len: usize) -> [u8; 16] {
    let mut h = [0u8; 16];
    let total = u32::try_from(16 + len).unwrap_or(u32::MAX);
    h[0..4].copy_from_slice(&total.to_le_bytes());
    h[4..8].copy_from_slice(&error.wrapping_neg().to_le_bytes());
    h[8..16].copy_from_slice(&unique.to_le_bytes());
    h
}

/// A reply's bytes, written into the entry's payload buffer.
pub struct Out<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> Out<'a> {
    pub fn new(buf: &'a mut [u8]) -> Out<'a> {
        Out { buf, len: 0 }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// Appends `bytes`; false (nothing appended) if they do not fit.
    pub fn put(&mut self, bytes: &[u8]) -> bool {
        let Some(dst) = self.buf.get_mut(self.len..self.len + bytes.len()) else {
            return false;
        };
        dst.copy_from_slice(bytes);
        self.len += bytes.len();
        true
    }

    pub fn u32(&mut self, v: u32) -> bool {
        self.put(&v.to_le_bytes())
    }

    pub fn u64(&mut self, v: u64) -> bool {
        self.put(&v.to_le_bytes())
    }

    /// `struct fuse_attr` (88 bytes).
    pub fn attr(&mut self, a: &FileAttr) -> bool {
        let (atime, atime_ns) = secs(a.atime);
        let (mtime, mtime_ns) = secs(a.mtime);
        let (ctime, ctime_ns) = secs(a.ctime);
        self.u64(a.ino.0)
            && self.u64(a.size)
            && self.u64(a.blocks)
            && self.u64(atime as u64)
            && self.u64(mtime as u64)
            && self.u64(ctime as u64)
            && self.u32(atime_ns)
            && self.u32(mtime_ns)
            && self.u32(ctime_ns)
            && self.u32(mode(a.kind) | u32::from(a.perm))
            && self.u32(a.nlink)
            && self.u32(a.uid)
            && self.u32(a.gid)
            && self.u32(a.rdev)
            && self.u32(a.blksize)
            && self.u32(a.flags)
    }

    /// `struct fuse_entry_out` (128 bytes): node id and generation 0 (a
    /// negative entry when the attributes' inode is 0), both timeouts `ttl`.
    pub fn entry(&mut self, a: &FileAttr, ttl: Duration) -> bool {
        self.u64(a.ino.0)
            && self.u64(0)
            && self.u64(ttl.as_secs())
            && self.u64(ttl.as_secs())
            && self.u32(ttl.subsec_nanos())
            && self.u32(ttl.subsec_nanos())
            && self.attr(a)
    }

    /// `struct fuse_attr_out` (104 bytes).
    pub fn attr_out(&mut self, a: &FileAttr, ttl: Duration) -> bool {
        self.u64(ttl.as_secs()) && self.u32(ttl.subsec_nanos()) && self.u32(0) && self.attr(a)
    }

    /// `struct fuse_open_out` (16 bytes).
    pub fn open_out(&mut self, fh: u64, open_flags: u32) -> bool {
        self.u64(fh) && self.u32(open_flags) && self.u32(0)
    }

    /// One `struct fuse_dirent` and its name, padded to 8 bytes; false
    /// (nothing appended) when it does not fit.
    pub fn dirent(&mut self, ino: u64, next: u64, kind: FileType, name: &OsStr) -> bool {
        let name = name.as_bytes();
        let len = (24 + name.len()).next_multiple_of(8);
        if self.len + len > self.buf.len() {
            return false;
        }
        let name_len = u32::try_from(name.len()).unwrap_or(u32::MAX);
        let padding = [0u8; 8];
        self.u64(ino)
            && self.u64(next)
            && self.u32(name_len)
            && self.u32(mode(kind) >> 12)
            && self.put(name)
            && self.put(&padding[..len - 24 - name.len()])
    }
}

/// The file-type bits of a mode.
pub fn mode(kind: FileType) -> u32 {
    match kind {
        FileType::NamedPipe => libc::S_IFIFO,
        FileType::CharDevice => libc::S_IFCHR,
        FileType::BlockDevice => libc::S_IFBLK,
        FileType::Directory => libc::S_IFDIR,
        FileType::RegularFile => libc::S_IFREG,
        FileType::Symlink => libc::S_IFLNK,
        FileType::Socket => libc::S_IFSOCK,
    }
}

/// Seconds since the epoch (negative before it) and nanoseconds.
fn secs(t: SystemTime) -> (i64, u32) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            d.subsec_nanos(),
        ),
        Err(e) => {
            let d = e.duration();
            let (s, ns) = (
                i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                d.subsec_nanos(),
            );
            if ns == 0 {
                (-s, 0)
            } else {
                (-s - 1, 1_000_000_000 - ns)
            }
        }
    }
}

/// A time of a SETATTR: seconds and nanoseconds since the epoch.
pub fn time(sec: u64, nsec: u32) -> SystemTime {
    crate::attr::time(sec as i64, i64::from(nsec))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fuser::INodeNo;

    fn attr() -> FileAttr {
        FileAttr {
            ino: INodeNo(7),
            size: 4096,
            blocks: 8,
            atime: UNIX_EPOCH + Duration::new(10, 5),
            mtime: UNIX_EPOCH - Duration::new(1, 500_000_000),
            ctime: UNIX_EPOCH,
            crtime: UNIX_EPOCH,
            kind: FileType::RegularFile,
            perm: 0o644,
            nlink: 1,
            uid: 1000,
            gid: 100,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    #[test]
    fn replies_have_the_kernels_sizes_and_offsets() {
        let mut buf = [0u8; 512];
        let mut out = Out::new(&mut buf);
        assert!(out.entry(&attr(), Duration::new(60, 7)));
        assert_eq!(out.len(), 128);
        let f = Fields(&buf);
        assert_eq!(f.u64(0), Ok(7), "nodeid");
        assert_eq!(f.u64(16), Ok(60), "entry_valid");
        assert_eq!(f.u32(36), Ok(7), "attr_valid_nsec");
        // The attributes start at 40: mtime 1.5 s before the epoch.
        assert_eq!(f.u64(40 + 32), Ok((-2i64) as u64));
        assert_eq!(f.u32(40 + 52), Ok(500_000_000));
        assert_eq!(f.u32(40 + 60), Ok(libc::S_IFREG | 0o644), "mode");
        let mut buf = [0u8; 512];
        let mut out = Out::new(&mut buf);
        assert!(out.attr_out(&attr(), Duration::ZERO));
        assert!(out.open_out(3, 1));
        assert_eq!(out.len(), 104 + 16);
    }

    #[test]
    fn a_dirent_is_padded_and_refused_when_it_does_not_fit() {
        let mut buf = [0u8; 40];
        let mut out = Out::new(&mut buf);
        assert!(out.dirent(5, 1, FileType::Directory, OsStr::new("abc")));
        assert_eq!(out.len(), 32);
        assert!(!out.dirent(6, 2, FileType::RegularFile, OsStr::new("d")));
        assert_eq!(out.len(), 32, "nothing of the second");
        assert_eq!(Fields(&buf).u32(20), Ok(4), "DT_DIR");
    }

    #[test]
    fn names_split_at_nuls_and_a_missing_nul_is_refused() {
        let (n, rest) = names::<2>(b"old\0new\0value").expect("two names");
        assert_eq!(n, [OsStr::new("old"), OsStr::new("new")]);
        assert_eq!(rest, b"value");
        assert!(names::<1>(b"no-nul").is_none());
        assert!(InHeader::parse(&[0u8; 39]).is_none(), "a short header");
    }
}
