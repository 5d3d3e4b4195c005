//! Directory listings. A listing is read in one go when it starts (offset
//! 0) and served from that snapshot, so offsets stay valid while entries
//! are added or removed. The root's listing leaves out the control
//! directory (see control.rs).

use crate::attr::file_type;
use crate::control::{Control, Node, CONTROL_DIR};
use crate::fs::WbFs;
use crate::handles::{DirHandle, Handle};
use crate::inode::{Inode, ROOT_ID};
use crate::orphans::ORPHAN_DIR;
use crate::sys::{self, errno, Errno};
use fuser::FileType;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::sync::{Arc, Mutex};

#[derive(Clone, Debug)]
pub(crate) struct DirEntry {
    pub ino: u64,
    pub kind: FileType,
    pub name: OsString,
}

impl WbFs {
    pub(crate) fn opendir(&self, inode: Arc<Inode>) -> Result<u64, Errno> {
        if inode.kind != libc::S_IFDIR {
            return Err(libc::ENOTDIR);
        }
        Ok(self.handles.insert(Handle::Dir(DirHandle {
            inode,
            entries: Mutex::new(Vec::new()),
        })))
    }

    /// Reads the backing directory's entries.
    fn list_backing(&self, inode: &Inode) -> Result<Vec<DirEntry>, Errno> {
        let st = sys::stat_fd(inode.fd())?;
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let mut dir =
            nix::dir::Dir::openat(inode.fd(), c".", flags, Mode::empty()).map_err(errno)?;
        let mut entries = Vec::new();
        for entry in dir.iter() {
            let entry = entry.map_err(errno)?;
            let name = OsString::from(std::ffi::OsStr::from_bytes(entry.file_name().to_bytes()));
            if inode.nodeid == ROOT_ID && (name == CONTROL_DIR || name == ORPHAN_DIR) {
                continue;
            }
            let kind = match entry.file_type() {
                Some(t) => dir_type(t),
                None => sys::stat_at(inode.fd(), &name)
                    .map(|st| file_type(st.st_mode))
                    .unwrap_or(FileType::RegularFile),
            };
            let ino = if name == "." || name == ".." {
                inode.nodeid
            } else {
                self.inodes.dir_ino(st.st_dev, entry.ino())
            };
            entries.push(DirEntry { ino, kind, name });
        }
        Ok(entries)
    }

    /// The entries of `fh` from `offset` on (an entry's offset is its index + 1).
    pub(crate) fn readdir(&self, fh: u64, offset: u64) -> Result<Vec<(u64, DirEntry)>, Errno> {
        let handle = self.handles.get(fh)?;
        let Handle::Dir(dir) = &*handle else {
            return Err(libc::ENOTDIR);
        };
        let mut entries = dir.entries.lock().unwrap_or_else(|p| p.into_inner());
        if offset == 0 {
            *entries = self.list_backing(&dir.inode)?;
        }
        Ok(entries
            .iter()
            .enumerate()
            .skip(offset as usize)
            .map(|(i, e)| (i as u64 + 1, e.clone()))
            .collect())
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

    pub(crate) fn fsyncdir(&self, fh: u64) -> Result<(), Errno> {
        let handle = self.handles.get(fh)?;
        let Handle::Dir(dir) = &*handle else {
            return Err(libc::ENOTDIR);
        };
        let fd = sys::reopen(dir.inode.fd(), OFlag::O_RDONLY | OFlag::O_DIRECTORY)?;
        nix::unistd::fsync(&fd).map_err(errno)
    }
}

fn dir_type(t: nix::dir::Type) -> FileType {
    use nix::dir::Type;
    match t {
        Type::Directory => FileType::Directory,
        Type::Symlink => FileType::Symlink,
        Type::Fifo => FileType::NamedPipe,
        Type::Socket => FileType::Socket,
        Type::CharacterDevice => FileType::CharDevice,
        Type::BlockDevice => FileType::BlockDevice,
        Type::File => FileType::RegularFile,
    }
}
