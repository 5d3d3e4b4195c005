//! Open handles: what a FUSE file handle number stands for.

use crate::control::Node;
use crate::inode::Inode;
use crate::stats_text::ServerCounts;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// An open regular file.
pub(crate) struct FileHandle {
    pub inode: Arc<Inode>,
    /// This handle's own engine handle of the inode's file (the same
    /// pages as the inode's other handles, its own write-back errors).
    pub file: Arc<writeback::File>,
    /// The opener asked for uncached writes: opened with O_DIRECT, or the
    /// file carries the `user.writeback.dontcache` attribute. Writes
    /// through this handle go with the engine's DONTCACHE flag: their
    /// pages leave the cache once written back.
    pub dontcache: bool,
}

/// An open file of the virtual `.writeback` tree: its content as read at open.
pub(crate) struct ControlHandle {
    pub node: Node,
    pub content: Vec<u8>,
}

pub(crate) enum Handle {
    File(FileHandle),
    Control(ControlHandle),
}

/// Handle numbers are never reused while the server runs.
#[derive(Default)]
pub(crate) struct HandleTable {
    map: Mutex<HashMap<u64, Arc<Handle>>>,
    next: AtomicU64,
}

impl HandleTable {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Arc<Handle>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn insert(&self, handle: Handle) -> u64 {
        let fh = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.lock().insert(fh, Arc::new(handle));
        fh
    }

    pub fn get(&self, fh: u64) -> Result<Arc<Handle>, i32> {
        self.lock().get(&fh).cloned().ok_or(libc::EBADF)
    }

    pub fn remove(&self, fh: u64) -> Option<Arc<Handle>> {
        self.lock().remove(&fh)
    }

    /// What is open, for `.writeback/stats`.
    pub fn counts(&self, inodes: usize) -> ServerCounts {
        let map = self.lock();
        let mut counts = ServerCounts {
            inodes: inodes as u64,
            ..ServerCounts::default()
        };
        for handle in map.values() {
            if let Handle::File(h) = &**handle {
                counts.open_files += 1;
                counts.open_dontcache += u64::from(h.dontcache);
            }
        }
        counts
    }

    pub fn file(&self, fh: u64) -> Result<Arc<Handle>, i32> {
        let handle = self.get(fh)?;
        match &*handle {
            Handle::File(_) | Handle::Control(_) => Ok(handle),
        }
    }
}
