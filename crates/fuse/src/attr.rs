//! Backing attributes (`struct stat`) as FUSE attributes, with the
//! engine's view of a file's length and of its last write.

use fuser::{FileAttr, FileType, INodeNo};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What the engine knows better than the backing file.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct EngineView {
    /// The length including data not yet written back.
    pub len: Option<u64>,
    /// When the file was last changed through the mount (a write, a
    /// truncation) or its mtime set: its mtime, before and after the
    /// write-back (which the cache keeps from moving the backing mtime).
    pub modified: Option<SystemTime>,
    /// Its last name went to the orphan directory (open, unlinked): that
    /// name does not count.
    pub orphaned: bool,
}

pub(crate) fn time(sec: i64, nsec: i64) -> SystemTime {
    let nsec = nsec.clamp(0, 999_999_999) as u32;
    if sec >= 0 {
        UNIX_EPOCH + Duration::new(sec as u64, nsec)
    } else {
        UNIX_EPOCH - Duration::from_secs(sec.unsigned_abs()) + Duration::from_nanos(nsec as u64)
    }
}

pub(crate) fn file_type(mode: libc::mode_t) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        _ => FileType::RegularFile,
    }
}

/// The attributes of inode `ino` with backing attributes `st`.
pub(crate) fn from_stat(ino: u64, st: &libc::stat, view: EngineView) -> FileAttr {
    let mut mtime = time(st.st_mtime, st.st_mtime_nsec);
    let mut ctime = time(st.st_ctime, st.st_ctime_nsec);
    if let Some(modified) = view.modified {
        mtime = modified;
        ctime = ctime.max(modified);
    }
    // POSIX: an open file with no name left has no links.
    let nlink = if view.orphaned {
        (st.st_nlink as u32).saturating_sub(1)
    } else {
        st.st_nlink as u32
    };
    FileAttr {
        ino: INodeNo(ino),
        size: view.len.unwrap_or(st.st_size as u64),
        blocks: st.st_blocks as u64,
        atime: time(st.st_atime, st.st_atime_nsec),
        mtime,
        ctime,
        crtime: UNIX_EPOCH,
        kind: file_type(st.st_mode),
        perm: (st.st_mode & 0o7777) as u16,
        nlink,
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev as u32,
        blksize: st.st_blksize as u32,
        flags: 0,
    }
}

/// Kinds of nodes in the virtual `.writeback` tree.
#[derive(Clone, Copy, Debug)]
pub(crate) enum VirtualKind {
    Dir,
    ReadOnly,
    Writable,
}

/// Size reported for virtual files: sysfs reports a page; reads are not
/// limited by it (the files are opened with direct I/O).
const VIRTUAL_FILE_BYTES: u64 = 4096;

pub(crate) fn virtual_attr(ino: u64, kind: VirtualKind) -> FileAttr {
    let (file_type, perm, nlink, size) = match kind {
        VirtualKind::Dir => (FileType::Directory, 0o555, 2, 0),
        VirtualKind::ReadOnly => (FileType::RegularFile, 0o444, 1, VIRTUAL_FILE_BYTES),
        VirtualKind::Writable => (FileType::RegularFile, 0o644, 1, VIRTUAL_FILE_BYTES),
    };
    let now = SystemTime::now();
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: 0,
        atime: now,
        mtime: now,
        ctime: now,
        crtime: UNIX_EPOCH,
        kind: file_type,
        perm,
        nlink,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_before_the_epoch() {
        assert_eq!(
            time(-1, 500_000_000),
            UNIX_EPOCH - Duration::from_millis(500)
        );
        assert_eq!(time(1, 5), UNIX_EPOCH + Duration::new(1, 5));
    }
}

/// What setattr may change.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<crate::sys::SetTime>,
    pub mtime: Option<crate::sys::SetTime>,
    /// The change time is to be set (FATTR_CTIME).
    pub ctime: bool,
}
