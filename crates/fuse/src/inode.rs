//! The inode table, passthrough_ll style: each inode the kernel knows
//! holds an O_PATH|O_NOFOLLOW descriptor of its backing inode, and every
//! operation works relative to such descriptors with single names. The
//! kernel's lookup count decides when a descriptor is closed (`forget`).
//!
//! Inode numbers: a backing inode on the backing directory's filesystem
//! keeps its own st_ino as its FUSE inode number, so `stat` and `ls -i`
//! through the mount agree with the backing directory and hard links share
//! one inode. Others (another filesystem mounted inside, or st_ino 1, which
//! is FUSE's root) get numbers from [`SYNTHETIC_BASE`] up. Numbers stay
//! unique: while the table holds an inode its descriptor keeps the backing
//! inode allocated, so its st_ino cannot be reused by another file.

use crate::sys::{self, Errno};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// FUSE's inode number of the mount root.
pub(crate) const ROOT_ID: u64 = 1;
/// First inode number handed out for inodes that cannot keep their st_ino.
pub(crate) const SYNTHETIC_BASE: u64 = 1 << 62;

/// The engine file of an inode while any handle has it open: one engine
/// `File` per inode, shared by every FUSE handle, so all see one length
/// and one set of cached pages.
#[derive(Default)]
pub(crate) struct OpenState {
    pub file: Option<Arc<writeback::File>>,
    pub handles: u32,
    pub orphan: Orphan,
}

/// Whether the file's last name went to the orphan directory (orphans.rs).
#[derive(Default)]
pub(crate) enum Orphan {
    #[default]
    No,
    /// Its last name is this orphan's: handed to the cache's backlog when
    /// the last handle closes.
    Pending(std::path::PathBuf),
    /// Handed to the backlog: its data is being freed, it cannot be
    /// opened again.
    Released,
}

pub(crate) struct Inode {
    pub nodeid: u64,
    /// O_PATH|O_NOFOLLOW descriptor of the backing inode.
    pub fd: OwnedFd,
    /// (st_dev, st_ino) of the backing inode.
    pub key: (u64, u64),
    /// File type bits (S_IFMT) of the backing inode.
    pub kind: libc::mode_t,
    pub open: Mutex<OpenState>,
    /// Truncated to zero from a non-zero length since its last release
    /// (ext4's EXT4_STATE_DA_ALLOC_CLOSE): the next release writes its
    /// data back, so that a crash of the mount soon after the program
    /// rewrote and closed it finds the new content (auto_da_alloc).
    pub rewritten: AtomicBool,
}

impl Inode {
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub fn is_regular(&self) -> bool {
        self.kind == libc::S_IFREG
    }

    pub fn is_symlink(&self) -> bool {
        self.kind == libc::S_IFLNK
    }

    pub fn open_state(&self) -> MutexGuard<'_, OpenState> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }
}

struct Entry {
    inode: Arc<Inode>,
    lookups: u64,
    /// The directory and name of its latest lookup (None for the root):
    /// what to ask the kernel to forget (prune.rs).
    origin: Option<(u64, OsString)>,
    /// When it was last looked up (the table's lookup counter).
    last_use: u64,
}

#[derive(Default)]
struct Tables {
    by_id: HashMap<u64, Entry>,
    by_key: HashMap<(u64, u64), u64>,
    /// Lookups counted so far (the clock of `last_use`).
    lookups: u64,
}

pub(crate) struct InodeTable {
    tables: Mutex<Tables>,
    root_dev: u64,
    next_synthetic: AtomicU64,
}

impl InodeTable {
    /// A table whose root is the directory behind `root_fd` (O_PATH).
    pub fn new(root_fd: OwnedFd) -> Result<InodeTable, Errno> {
        let st = sys::stat_fd(root_fd.as_fd())?;
        let key = (st.st_dev, st.st_ino);
        let root = Arc::new(Inode {
            nodeid: ROOT_ID,
            fd: root_fd,
            key,
            kind: st.st_mode & libc::S_IFMT,
            open: Mutex::new(OpenState::default()),
            rewritten: AtomicBool::new(false),
        });
        let mut tables = Tables::default();
        tables.by_key.insert(key, ROOT_ID);
        tables.by_id.insert(
            ROOT_ID,
            Entry {
                inode: root,
                lookups: 1,
                origin: None,
                last_use: 0,
            },
        );
        Ok(InodeTable {
            tables: Mutex::new(tables),
            root_dev: st.st_dev,
            next_synthetic: AtomicU64::new(SYNTHETIC_BASE),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, nodeid: u64) -> Result<Arc<Inode>, Errno> {
        self.lock()
            .by_id
            .get(&nodeid)
            .map(|e| Arc::clone(&e.inode))
            .ok_or(libc::ESTALE)
    }

    /// The inode number `readdir` reports for a backing entry: what a
    /// lookup would give, as far as it is known without one.
    pub fn dir_ino(&self, st_dev_of_dir: u64, st_ino: u64) -> u64 {
        if st_dev_of_dir == self.root_dev && (2..SYNTHETIC_BASE).contains(&st_ino) {
            return st_ino;
        }
        let tables = self.lock();
        tables
            .by_key
            .get(&(st_dev_of_dir, st_ino))
            .copied()
            .unwrap_or(st_ino)
    }

    /// Counts one kernel lookup of the backing inode behind `fd` (with
    /// attributes `st`), found as `name` in directory `parent` (a nodeid),
    /// adding it to the table if it is new (the table then keeps `fd`).
    pub fn remember(&self, fd: OwnedFd, st: &libc::stat, parent: u64, name: &OsStr) -> Arc<Inode> {
        let key = (st.st_dev, st.st_ino);
        let mut tables = self.lock();
        tables.lookups += 1;
        let now = tables.lookups;
        if let Some(&id) = tables.by_key.get(&key) {
            if let Some(entry) = tables.by_id.get_mut(&id) {
                entry.lookups += 1;
                entry.last_use = now;
                entry.origin = Some((parent, name.to_os_string()));
                return Arc::clone(&entry.inode);
            }
        }
        let nodeid = if st.st_dev == self.root_dev && (2..SYNTHETIC_BASE).contains(&st.st_ino) {
            st.st_ino
        } else {
            self.next_synthetic.fetch_add(1, Ordering::Relaxed)
        };
        let inode = Arc::new(Inode {
            nodeid,
            fd,
            key,
            kind: st.st_mode & libc::S_IFMT,
            open: Mutex::new(OpenState::default()),
            rewritten: AtomicBool::new(false),
        });
        tables.by_key.insert(key, nodeid);
        tables.by_id.insert(
            nodeid,
            Entry {
                inode: Arc::clone(&inode),
                lookups: 1,
                origin: Some((parent, name.to_os_string())),
                last_use: now,
            },
        );
        inode
    }

    /// The `count` least recently looked-up inodes (never the root), as
    /// (directory nodeid, name) of their latest lookup: the names to ask
    /// the kernel to forget when the table is over its budget. They count
    /// as used now, so that the next call picks others if the kernel
    /// keeps some (a dentry in use).
    pub fn take_least_recent(&self, count: usize) -> Vec<(u64, OsString)> {
        let mut tables = self.lock();
        let now = tables.lookups;
        let mut entries: Vec<(u64, u64)> = tables
            .by_id
            .iter()
            .filter(|(_, e)| e.origin.is_some())
            .map(|(&id, e)| (e.last_use, id))
            .collect();
        let count = count.min(entries.len());
        if count == 0 {
            return Vec::new();
        }
        entries.select_nth_unstable(count - 1);
        let mut names = Vec::with_capacity(count);
        for &(_, id) in &entries[..count] {
            if let Some(e) = tables.by_id.get_mut(&id) {
                e.last_use = now;
                names.extend(e.origin.clone());
            }
        }
        names
    }

    /// The inode with backing (st_dev, st_ino) `key`, if the table holds it.
    pub fn find(&self, key: (u64, u64)) -> Option<Arc<Inode>> {
        let tables = self.lock();
        let id = tables.by_key.get(&key)?;
        tables.by_id.get(id).map(|e| Arc::clone(&e.inode))
    }

    /// The kernel forgot `count` lookups. At zero the inode leaves the
    /// table; its descriptor closes when the last open handle goes.
    pub fn forget(&self, nodeid: u64, count: u64) {
        if nodeid == ROOT_ID {
            return;
        }
        let mut tables = self.lock();
        let Some(entry) = tables.by_id.get_mut(&nodeid) else {
            return;
        };
        entry.lookups = entry.lookups.saturating_sub(count);
        if entry.lookups > 0 {
            return;
        }
        let gone = tables.by_id.remove(&nodeid);
        if let Some(entry) = &gone {
            tables.by_key.remove(&entry.inode.key);
        }
        // Closing the descriptor of a file with no name left frees its
        // blocks (ext4 does it inside close: half a second a GiB): not
        // while holding the tables every request needs.
        drop(tables);
        drop(gone);
    }

    /// Inodes in the table (for tests and statistics).
    pub fn len(&self) -> usize {
        self.lock().by_id.len()
    }
}
