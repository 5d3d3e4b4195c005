//! The orphan directory: where a removed file's last name waits for its
//! release.
//!
//! Removing a file's last name on the backing filesystem frees its blocks
//! inside the unlink (ext4 frees extents synchronously: about half a
//! second a GiB), and every request behind it waits. So unlink, and a
//! rename over an existing file, move the file's last name into
//! `BACKING_DIR/.wb-orphans` instead (a rename: only a name changes) and
//! hand the file to the cache's backlog (`Cache::remove_later`), which cuts
//! it in steps and removes the name last. The orphan's name is its inode
//! number and a counter, made unique with RENAME_NOREPLACE.
//!
//! - The directory is never visible through the mount: a lookup finds
//!   nothing, a listing skips it, and creating or removing that name in the
//!   mount's root is refused, like the control directory.
//! - A crash leaves names in it. The next mount of the same BACKING_DIR
//!   hands them to the backlog again ([`Orphans::leftovers`]) and says so
//!   on standard error.
//! - A clean shutdown removes the directory once it is empty
//!   ([`remove_orphan_dir`]), leaving BACKING_DIR as it was.
//! - When the directory cannot be made (a read-only backing directory) or
//!   a file is on another filesystem than BACKING_DIR (EXDEV), the name is
//!   removed directly, as before.
//!
//! Nothing outside BACKING_DIR is touched.

use crate::sys::{self, Errno};
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The orphan directory's name in BACKING_DIR.
pub const ORPHAN_DIR: &str = ".wb-orphans";
/// Tries at a unique name before giving up (each taken name moves the
/// counter on, so only a directory full of leftovers needs more than one).
const NAME_TRIES: u32 = 64;

pub(crate) struct Orphans {
    /// O_PATH descriptor of the orphan directory; None if it could not be
    /// made (names are then removed directly).
    dir: Option<OwnedFd>,
    /// Its path, for `Cache::remove_later` and messages.
    path: PathBuf,
    next: AtomicU64,
}

impl Orphans {
    /// The orphan directory of `backing` (root fd `root`), made (mode
    /// 0700) if it is not there. A problem is told on standard error and
    /// leaves removals direct.
    pub fn open(root: BorrowedFd<'_>, backing: &Path) -> Orphans {
        let path = backing.join(ORPHAN_DIR);
        let name = OsStr::new(ORPHAN_DIR);
        match sys::mkdir_at(root, name, 0o700) {
            Ok(()) | Err(libc::EEXIST) => {}
            Err(e) => eprintln!(
                "wb mount: cannot make {}: {}; removals free blocks inline",
                path.display(),
                std::io::Error::from_raw_os_error(e)
            ),
        }
        // O_NOFOLLOW: a symlink there is not ours to follow.
        let dir = sys::open_path(root, name)
            .ok()
            .filter(|fd| sys::stat_fd(fd.as_fd()).is_ok_and(|st| sys::is_kind(&st, libc::S_IFDIR)));
        Orphans {
            dir,
            path,
            next: AtomicU64::new(0),
        }
    }

    /// Moves `name` in `parent` (a regular file with inode number `ino`)
    /// into the orphan directory. Returns the orphan's path, or None if it
    /// stayed (no orphan directory, another filesystem): remove it directly.
    pub fn adopt(&self, parent: BorrowedFd<'_>, name: &OsStr, ino: u64) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        self.with_unique_name(ino, |orphan| {
            sys::rename_at(parent, name, dir.as_fd(), orphan, libc::RENAME_NOREPLACE)
        })
    }

    /// Gives the file at `name` in `parent` a second name in the orphan
    /// directory, before a rename replaces `name`: the rename then only
    /// drops a name, and the file is the orphan's. Returns its path, or
    /// None (no orphan directory, another filesystem, not linkable).
    pub fn link(&self, parent: BorrowedFd<'_>, name: &OsStr, ino: u64) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        self.with_unique_name(ino, |orphan| {
            sys::link_at(parent, name, dir.as_fd(), orphan)
        })
    }

    /// Drops an orphan name made by [`Orphans::link`] whose rename failed
    /// (the file keeps its other name).
    pub fn unlink(&self, orphan: &Path) {
        if let (Some(dir), Some(name)) = (&self.dir, orphan.file_name()) {
            let _ = sys::unlink_at(dir.as_fd(), name, false);
        }
    }

    /// Runs `make` with unique names until one is free (EEXIST: taken).
    fn with_unique_name(
        &self,
        ino: u64,
        mut make: impl FnMut(&OsStr) -> Result<(), Errno>,
    ) -> Option<PathBuf> {
        for _ in 0..NAME_TRIES {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let orphan = OsString::from(format!("{ino:x}-{n}"));
            match make(&orphan) {
                Ok(()) => return Some(self.path.join(orphan)),
                Err(libc::EEXIST) => continue,
                Err(_) => return None,
            }
        }
        None
    }

    /// Paths of what a mount before left in the orphan directory.
    pub fn leftovers(&self) -> Vec<PathBuf> {
        if self.dir.is_none() {
            return Vec::new();
        }
        let Ok(entries) = std::fs::read_dir(&self.path) else {
            return Vec::new();
        };
        entries.flatten().map(|e| e.path()).collect()
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Removes `backing`'s orphan directory if it is empty (after a clean
/// shutdown: every release done). One still holding names (a release
/// failed) stays for the next mount.
pub fn remove_orphan_dir(backing: &Path) {
    let _ = std::fs::remove_dir(backing.join(ORPHAN_DIR));
}
