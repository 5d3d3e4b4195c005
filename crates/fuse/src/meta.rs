//! Metadata operations, straight on the backing directory with *at system
//! calls relative to the parent's descriptor and a single name: lookup,
//! getattr, setattr, mkdir, mknod, symlink, link, unlink, rmdir, rename,
//! readlink, statfs. New inodes get the caller's owner (the server runs as
//! root and creates them, then hands them over).

use crate::attr::{self, SetAttr};
use crate::fs::WbFs;
use crate::inode::{Inode, Orphan, ROOT_ID};
use crate::sys::{self, Errno, SetTime};
use fuser::FileAttr;
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;

impl WbFs {
    /// The attributes of a backing inode, with the engine's length.
    pub(crate) fn inode_attr(&self, inode: &Inode) -> Result<FileAttr, Errno> {
        let st = sys::stat_fd(inode.fd())?;
        Ok(self.attr_of(inode, &st))
    }

    pub(crate) fn attr_of(&self, inode: &Inode, st: &libc::stat) -> FileAttr {
        attr::from_stat(inode.nodeid, st, self.engine_view(inode))
    }

    /// A name in `parent` that may be created, removed or renamed on the
    /// backing directory: one component, and not the control directory.
    pub(crate) fn backing_name<'a>(
        &self,
        parent: &Inode,
        name: &'a OsStr,
    ) -> Result<&'a OsStr, Errno> {
        let name = sys::check_name(name)?;
        let reserved = [crate::control::CONTROL_DIR, crate::orphans::ORPHAN_DIR];
        if parent.nodeid == ROOT_ID && reserved.iter().any(|r| name == *r) {
            return Err(libc::EPERM);
        }
        Ok(name)
    }

    /// Looks `name` up in `parent` and counts the lookup.
    pub(crate) fn lookup_backing(&self, parent: &Inode, name: &OsStr) -> Result<FileAttr, Errno> {
        let name = sys::check_name(name)?;
        if parent.nodeid == ROOT_ID && name == crate::orphans::ORPHAN_DIR {
            return Err(libc::ENOENT);
        }
        let fd = sys::open_path(parent.fd(), name)?;
        let st = sys::stat_fd(fd.as_fd())?;
        let inode = self.inodes.remember(fd, &st, parent.nodeid, name);
        Ok(self.attr_of(&inode, &st))
    }

    /// Gives a new inode the caller's owner (and group, or a set-group-ID
    /// parent's group). chown clears set-user-ID bits, so `mode` is applied
    /// again if it has any.
    pub(crate) fn set_new_owner(
        &self,
        fd: BorrowedFd<'_>,
        owner: (u32, u32),
        mode: u32,
    ) -> Result<(), Errno> {
        let st = sys::stat_fd(fd)?;
        if (st.st_uid, st.st_gid) == owner {
            return Ok(());
        }
        sys::chown_fd(fd, Some(owner.0), Some(owner.1))?;
        if mode & 0o7000 != 0 && !sys::is_kind(&st, libc::S_IFLNK) {
            sys::chmod_fd(fd, mode)?;
        }
        Ok(())
    }

    /// The owner a new inode made by `req` in `parent` gets.
    pub(crate) fn owner_in(&self, parent: &Inode, uid: u32, gid: u32) -> Result<(u32, u32), Errno> {
        let st = sys::stat_fd(parent.fd())?;
        Ok(sys::new_owner(uid, gid, &st))
    }

    /// After making `name` in `parent`: hand it to its owner and look it up.
    fn finish_new(
        &self,
        parent: &Inode,
        name: &OsStr,
        owner: (u32, u32),
        mode: u32,
    ) -> Result<FileAttr, Errno> {
        let fd = sys::open_path(parent.fd(), name)?;
        self.set_new_owner(fd.as_fd(), owner, mode)?;
        let st = sys::stat_fd(fd.as_fd())?;
        let inode = self.inodes.remember(fd, &st, parent.nodeid, name);
        Ok(self.attr_of(&inode, &st))
    }

    pub(crate) fn mkdir(
        &self,
        parent: &Inode,
        name: &OsStr,
        mode: u32,
        owner: (u32, u32),
    ) -> Result<FileAttr, Errno> {
        let name = self.backing_name(parent, name)?;
        sys::mkdir_at(parent.fd(), name, mode)?;
        self.finish_new(parent, name, owner, mode)
    }

    pub(crate) fn mknod(
        &self,
        parent: &Inode,
        name: &OsStr,
        mode: u32,
        rdev: u32,
        owner: (u32, u32),
    ) -> Result<FileAttr, Errno> {
        let name = self.backing_name(parent, name)?;
        sys::mknod_at(parent.fd(), name, mode, rdev)?;
        self.finish_new(parent, name, owner, mode)
    }

    pub(crate) fn symlink(
        &self,
        parent: &Inode,
        name: &OsStr,
        target: &OsStr,
        owner: (u32, u32),
    ) -> Result<FileAttr, Errno> {
        let name = self.backing_name(parent, name)?;
        sys::symlink_at(target, parent.fd(), name)?;
        self.finish_new(parent, name, owner, 0)
    }

    pub(crate) fn link(
        &self,
        inode: &Arc<Inode>,
        parent: &Inode,
        name: &OsStr,
    ) -> Result<FileAttr, Errno> {
        let name = self.backing_name(parent, name)?;
        sys::link_fd(inode.fd(), parent.fd(), name)?;
        // The new name is one more lookup of the same inode.
        let fd = sys::open_path(parent.fd(), name)?;
        let st = sys::stat_fd(fd.as_fd())?;
        let inode = self.inodes.remember(fd, &st, parent.nodeid, name);
        Ok(self.attr_of(&inode, &st))
    }

    /// The inode a name refers to, if the kernel knows it (so its cached
    /// data can be dropped once it has no name and no opener).
    fn known_inode_at(&self, parent: &Inode, name: &OsStr) -> Option<Arc<Inode>> {
        let st = sys::stat_at(parent.fd(), name).ok()?;
        if !sys::is_kind(&st, libc::S_IFREG) {
            return None;
        }
        let fd = sys::open_path(parent.fd(), name).ok()?;
        let inode = self.inodes.remember(fd, &st, parent.nodeid, name);
        Some(inode)
    }

    /// A regular file lost a name: if it has none left and no handle has
    /// it open, drop its cached data rather than write it back.
    fn drop_if_unlinked(&self, inode: Option<Arc<Inode>>) {
        let Some(inode) = inode else { return };
        let no_name = sys::stat_fd(inode.fd()).is_ok_and(|st| st.st_nlink == 0);
        let cached = self.cache.cached_len(inode.key.0, inode.key.1).is_some();
        if no_name && cached && inode.open_state().handles == 0 {
            // get_file + put_file: the last put of an unlinked file drops its data.
            if self.get_file(&inode, None, None).is_ok() {
                self.put_file(&inode);
            }
        }
        // Undo the lookup counted by known_inode_at.
        self.inodes.forget(inode.nodeid, 1);
    }

    /// Removes a name. A regular file's last name goes to the orphan
    /// directory (orphans.rs): the file is released behind the request.
    pub(crate) fn unlink(&self, parent: &Inode, name: &OsStr) -> Result<(), Errno> {
        let name = self.backing_name(parent, name)?;
        if let Some(st) = Self::last_name_of_file(parent, name) {
            if let Some(orphan) = self.orphans.adopt(parent.fd(), name, st.st_ino) {
                self.orphaned(orphan);
                return Ok(());
            }
        }
        let victim = self.known_inode_at(parent, name);
        let result = sys::unlink_at(parent.fd(), name, false);
        self.drop_if_unlinked(victim);
        result
    }

    /// The attributes of `name` in `parent` if it is a regular file's only name.
    fn last_name_of_file(parent: &Inode, name: &OsStr) -> Option<libc::stat> {
        let st = sys::stat_at(parent.fd(), name).ok()?;
        (sys::is_kind(&st, libc::S_IFREG) && st.st_nlink == 1).then_some(st)
    }

    /// A file's name went to the orphan directory as `orphan`: hand it to
    /// the cache's backlog now, or when its last handle closes.
    fn orphaned(&self, orphan: std::path::PathBuf) {
        // The file now named `orphan` (a concurrent rename could have
        // put another there than the one looked at).
        // If it cannot be looked at, the release says why (on stderr).
        use std::os::unix::fs::MetadataExt;
        let key = std::fs::symlink_metadata(&orphan).map(|m| (m.dev(), m.ino()));
        if let Some(inode) = key.ok().and_then(|key| self.inodes.find(key)) {
            let mut state = inode.open_state();
            if state.handles > 0 {
                state.orphan = Orphan::Pending(orphan);
                return;
            }
            state.orphan = Orphan::Released;
        }
        self.release_orphan(&orphan);
    }

    /// Hands the orphan at `orphan` to the cache's backlog.
    pub(crate) fn release_orphan(&self, orphan: &std::path::Path) {
        if let Err(e) = self.cache.remove_later(orphan) {
            // The cache is closing: the name stays for the next mount.
            eprintln!("wb mount: releasing {}: {e}", orphan.display());
        }
    }

    pub(crate) fn rmdir(&self, parent: &Inode, name: &OsStr) -> Result<(), Errno> {
        let name = self.backing_name(parent, name)?;
        sys::unlink_at(parent.fd(), name, true)
    }

    /// Renames. A regular file the rename replaces, if that was its last
    /// name, first gets a name in the orphan directory: the rename itself
    /// frees nothing, and the file is released behind the request.
    ///
    /// A rename over an existing name first writes back the renamed
    /// file's dirty data and waits for it to land (ext4's auto_da_alloc;
    /// XFS flushes at close after a truncation): the idiom of writing
    /// `f.tmp` and renaming it over `f` then leaves, after a crash of the
    /// mount, the old file or the new one whole, never an empty `f` whose
    /// data was still in the cache. Landed is enough for a crash of this
    /// process (the kernel has it); for a power cut, ext4 and XFS commit a
    /// rename after the writes that completed before it (their journals
    /// order metadata after data they have acknowledged), so it holds
    /// there too, as on ext4 itself, with no fdatasync.
    pub(crate) fn rename(
        &self,
        parent: &Inode,
        name: &OsStr,
        new_parent: &Inode,
        new_name: &OsStr,
        flags: u32,
    ) -> Result<(), Errno> {
        let name = self.backing_name(parent, name)?;
        let new_name = self.backing_name(new_parent, new_name)?;
        let replaces = flags & (libc::RENAME_EXCHANGE | libc::RENAME_NOREPLACE) == 0;
        if flags & libc::RENAME_NOREPLACE == 0 && sys::stat_at(new_parent.fd(), new_name).is_ok() {
            self.write_back_before_replacing(parent, name);
        }
        let orphan = replaces
            .then(|| Self::last_name_of_file(new_parent, new_name))
            .flatten()
            .and_then(|st| self.orphans.link(new_parent.fd(), new_name, st.st_ino));
        let replaced = match orphan {
            None if replaces => self.known_inode_at(new_parent, new_name),
            _ => None,
        };
        let result = sys::rename_at(parent.fd(), name, new_parent.fd(), new_name, flags);
        match (&result, orphan) {
            (Ok(()), Some(orphan)) => self.orphaned(orphan),
            // Renamed onto itself (a hard link of the same file), or failed:
            // the orphan name was a second name, dropping it frees nothing.
            (_, Some(orphan)) => self.orphans.unlink(&orphan),
            (_, None) => self.drop_if_unlinked(replaced),
        }
        result
    }

    /// Writes back the data of the regular file `name` in `parent`, if the
    /// cache holds any, before it replaces another (see `rename`). A
    /// write-back error is the next fsync's to report: the rename goes on.
    fn write_back_before_replacing(&self, parent: &Inode, name: &OsStr) {
        let Ok(st) = sys::stat_at(parent.fd(), name) else {
            return;
        };
        if sys::is_kind(&st, libc::S_IFREG) {
            let _ = self.cache.write_back(st.st_dev, st.st_ino);
        }
    }

    pub(crate) fn readlink(&self, inode: &Inode) -> Result<Vec<u8>, Errno> {
        use std::os::unix::ffi::OsStringExt;
        if !inode.is_symlink() {
            return Err(libc::EINVAL);
        }
        Ok(sys::readlink_fd(inode.fd())?.into_vec())
    }

    /// setattr: owner, then mode (chown clears set-user-ID bits), then
    /// size through the engine, then times, after writing the file's data
    /// back so that the times stick.
    pub(crate) fn setattr(&self, inode: &Arc<Inode>, set: SetAttr) -> Result<FileAttr, Errno> {
        let fd = inode.fd();
        let changes_something = set.uid.is_some()
            || set.gid.is_some()
            || set.mode.is_some()
            || set.size.is_some()
            || set.atime.is_some()
            || set.mtime.is_some();
        // chown(f, -1, -1) changes nothing but the change time, which only
        // the backing filesystem can set: the same no-op chown there. (The
        // kernel sends it with nothing to set, FATTR_CTIME only in
        // writeback-cache mode.)
        if set.uid.is_some() || set.gid.is_some() || !changes_something {
            sys::chown_fd(fd, set.uid, set.gid)?;
        }
        if let Some(mode) = set.mode {
            if inode.is_symlink() {
                return Err(libc::EOPNOTSUPP);
            }
            sys::chmod_fd(fd, mode)?;
        }
        if let Some(size) = set.size {
            self.truncate(inode, size)?;
        }
        if set.atime.is_some() || set.mtime.is_some() {
            let atime = set.atime.unwrap_or(SetTime::Omit);
            let mtime = set.mtime.unwrap_or(SetTime::Omit);
            sys::utimes_fd(fd, atime, mtime)?;
            if set.mtime.is_some() && inode.is_regular() {
                // Write-backs of data written before keep the mtime set
                // (cp -a, tar and rsync write, then set times): the
                // cache stamps it back after each (its times.rs).
                let st = sys::stat_fd(fd)?;
                let set_to = attr::time(st.st_mtime, st.st_mtime_nsec);
                self.cache.set_modified(inode.key.0, inode.key.1, set_to);
            }
        }
        self.inode_attr(inode)
    }

    /// What Linux's file_remove_privs does on a write by a process without
    /// CAP_FSETID: the setuid bit goes; the setgid bit too when the group
    /// may execute, or when the writer is not in the file's group
    /// (setattr_should_drop_sgid). Writes reach us as FOPEN_DIRECT_IO, a
    /// path on which the kernel's FUSE client does not do this itself. A
    /// writer other than root is taken to lack CAP_FSETID, and to be in the
    /// file's group when its fsgid is that group (the request carries the
    /// uid and gid, not the capabilities or supplementary groups).
    pub(crate) fn remove_privs(&self, inode: &Inode, writer: (u32, u32)) -> Result<(), Errno> {
        let (uid, gid) = writer;
        if uid == 0 {
            return Ok(());
        }
        let st = sys::stat_fd(inode.fd())?;
        let mode = st.st_mode & 0o7777;
        let mut kill = mode & libc::S_ISUID;
        if mode & libc::S_ISGID != 0 && (mode & libc::S_IXGRP != 0 || st.st_gid != gid) {
            kill |= libc::S_ISGID;
        }
        if kill == 0 {
            return Ok(());
        }
        sys::chmod_fd(inode.fd(), mode & !kill)?;
        self.attrs_changed(inode.nodeid);
        Ok(())
    }

    pub(crate) fn statfs(&self) -> Result<nix::sys::statvfs::Statvfs, Errno> {
        let root = self.inodes.get(ROOT_ID)?;
        sys::statvfs_fd(root.fd())
    }
}
