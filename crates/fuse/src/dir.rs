//! Directory listings, served without any state between requests: an
//! entry's offset is the backing filesystem's own cookie for the position
//! after it (getdents' d_off, what telldir returns), so a listing resumes
//! with a seek wherever it stopped, stays valid while entries are added or
//! removed (as the backing filesystem guarantees for telldir), and needs
//! no open handle. That lets the kernel skip OPENDIR and RELEASEDIR (the
//! server answers ENOSYS, fs.rs) and keep listings in its own cache.
//! The root's listing leaves out the control directory (see control.rs)
//! and the orphan directory (orphans.rs).

use crate::attr::file_type;
use crate::control::{Control, Node, CONTROL_DIR};
use crate::dir_entry::DirEntry;
use crate::fs::WbFs;
use crate::inode::{Inode, ROOT_ID};
use crate::orphans::ORPHAN_DIR;
use crate::sys::{self, errno, Errno};
use fuser::FileType;
use nix::fcntl::OFlag;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

/// Entries read from the backing directory per request: more than a
/// reply of the kernel's size (one page, at least 32 bytes an entry) holds.
const ENTRIES_PER_READ: usize = 160;

impl WbFs {
    /// The entries of the backing directory `inode` after the position
    /// `offset` (0: from the start), each with the offset of the position
    /// after it; at most `ENTRIES_PER_READ`.
    pub(crate) fn readdir(
        &self,
        inode: &Inode,
        offset: u64,
    ) -> Result<Vec<(u64, DirEntry)>, Errno> {
        if inode.kind != libc::S_IFDIR {
            return Err(libc::ENOTDIR);
        }
        let fd = sys::reopen(inode.fd(), OFlag::O_RDONLY | OFlag::O_DIRECTORY)?;
        let mut dir = rustix::fs::Dir::new(fd).map_err(|e| e.raw_os_error())?;
        if offset != 0 {
            // The cookie came from this directory's own d_off.
            dir.seek(offset as i64).map_err(|e| e.raw_os_error())?;
        }
        let mut entries = Vec::new();
        while entries.len() < ENTRIES_PER_READ {
            let Some(entry) = dir.read() else { break };
            let entry = entry.map_err(|e| e.raw_os_error())?;
            let next = entry.offset() as u64;
            let name = OsString::from(std::ffi::OsStr::from_bytes(entry.file_name().to_bytes()));
            if inode.nodeid == ROOT_ID && (name == CONTROL_DIR || name == ORPHAN_DIR) {
                continue;
            }
            let kind = match dir_type(entry.file_type()) {
                Some(kind) => kind,
                None => sys::stat_at(inode.fd(), &name)
                    .map(|st| file_type(st.st_mode))
                    .unwrap_or(FileType::RegularFile),
            };
            let ino = if name == "." || name == ".." {
                inode.nodeid
            } else {
                self.inodes.dir_ino(inode.key.0, entry.ino())
            };
            entries.push((next, DirEntry { ino, kind, name }));
        }
        Ok(entries)
    }

    /// The entries of a directory of the virtual tree.
    pub(crate) fn readdir_control(
        &self,
        node: Node,
        offset: u64,
    ) -> Result<Vec<(u64, DirEntry)>, Errno> {
        let control = self.control();
        let mut entries = vec![
            DirEntry {
                ino: node.ino(),
                kind: FileType::Directory,
                name: ".".into(),
            },
            DirEntry {
                ino: if node == Node::Dir {
                    ROOT_ID
                } else {
                    Node::Dir.ino()
                },
                kind: FileType::Directory,
                name: "..".into(),
            },
        ];
        for (name, child) in control.list(node)? {
            entries.push(DirEntry {
                ino: child.ino(),
                kind: Control::kind_of(child),
                name: name.into(),
            });
        }
        Ok(entries
            .into_iter()
            .enumerate()
            .skip(offset as usize)
            .map(|(i, e)| (i as u64 + 1, e))
            .collect())
    }

    pub(crate) fn fsyncdir(&self, inode: &Inode) -> Result<(), Errno> {
        let fd = sys::reopen(inode.fd(), OFlag::O_RDONLY | OFlag::O_DIRECTORY)?;
        nix::unistd::fsync(&fd).map_err(errno)
    }
}

/// The file type of a directory entry; None when the backing filesystem
/// does not say (DT_UNKNOWN).
fn dir_type(t: rustix::fs::FileType) -> Option<FileType> {
    use rustix::fs::FileType as T;
    Some(match t {
        T::Directory => FileType::Directory,
        T::Symlink => FileType::Symlink,
        T::Fifo => FileType::NamedPipe,
        T::Socket => FileType::Socket,
        T::CharacterDevice => FileType::CharDevice,
        T::BlockDevice => FileType::BlockDevice,
        T::RegularFile => FileType::RegularFile,
        T::Unknown => return None,
    })
}
