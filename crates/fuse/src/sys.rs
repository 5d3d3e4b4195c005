//! The system calls the server makes on the backing directory, as small
//! safe functions returning an errno on failure.
//!
//! Every path given here is either a single name relative to a directory
//! descriptor (never containing `/`, never `.` or `..`: see
//! [`check_name`]) or `/proc/self/fd/N` naming a descriptor the server
//! holds. Symlinks are never followed: names are opened with
//! `O_NOFOLLOW`, and the `/proc` magic link leads to the inode the
//! descriptor already refers to, whatever it is called now. So nothing
//! outside the backing directory is reachable through the server.

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::Mode;
use std::ffi::{CString, OsStr};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

/// An errno value, as FUSE replies carry them.
pub(crate) type Errno = i32;

pub(crate) fn errno(e: nix::Error) -> Errno {
    e as i32
}

/// Makes the calling thread create files with exactly the modes it asks
/// for: a umask of 0 of its own. The kernel sends a new file's mode with
/// the caller's umask (fs.rs applies it), so the server's umask must not
/// apply a second time; and unsharing the thread's filesystem attributes
/// (CLONE_FS: root, working directory, umask) first leaves the process's
/// umask as it was, which matters where the mount is served inside a
/// program (a test) that creates files of its own. Serving threads call
/// this before they create; it acts once per thread. Should the unshare
/// fail, the process's umask is set to 0, as a standalone server would.
pub(crate) fn exact_modes() {
    thread_local! {
        static DONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    DONE.with(|done| {
        if !done.get() {
            let _ = nix::sched::unshare(nix::sched::CloneFlags::CLONE_FS);
            nix::sys::stat::umask(Mode::empty());
            done.set(true);
        }
    });
}

/// A name the kernel asked about must be one path component.
pub(crate) fn check_name(name: &OsStr) -> Result<&OsStr, Errno> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(libc::EINVAL);
    }
    if bytes.len() > 255 {
        return Err(libc::ENAMETOOLONG);
    }
    Ok(name)
}

/// `/proc/self/fd/N` for a descriptor we hold: reaches its inode without
/// resolving any name in the backing directory.
pub(crate) fn proc_path(fd: BorrowedFd<'_>) -> CString {
    // A decimal number never contains a NUL byte.
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap_or_default()
}

/// An O_PATH descriptor for `name` in `dir`, not following a symlink.
pub(crate) fn open_path(dir: BorrowedFd<'_>, name: &OsStr) -> Result<OwnedFd, Errno> {
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    nix::fcntl::openat(dir, name, flags, Mode::empty()).map_err(errno)
}

/// Opens the inode behind `fd` again with `flags` (for reading, writing
/// or listing; `fd` may be O_PATH).
pub(crate) fn reopen(fd: BorrowedFd<'_>, flags: OFlag) -> Result<OwnedFd, Errno> {
    let path = proc_path(fd);
    nix::fcntl::open(path.as_c_str(), flags | OFlag::O_CLOEXEC, Mode::empty()).map_err(errno)
}

/// Opens (and with `create`, creates with `mode`) a regular file `name` in
/// `dir` for the engine: read/write, O_DIRECT, never through a symlink.
pub(crate) fn open_data(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    create: Option<(u32, bool)>,
) -> Result<OwnedFd, Errno> {
    let mut flags = OFlag::O_RDWR | OFlag::O_DIRECT | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut mode = Mode::empty();
    if let Some((bits, exclusive)) = create {
        flags |= OFlag::O_CREAT;
        if exclusive {
            flags |= OFlag::O_EXCL;
        }
        mode = Mode::from_bits_truncate(bits & 0o7777);
    }
    nix::fcntl::openat(dir, name, flags, mode).map_err(errno)
}

/// The attributes of the inode behind `fd` itself (a symlink is not followed).
pub(crate) fn stat_fd(fd: BorrowedFd<'_>) -> Result<libc::stat, Errno> {
    let flags = AtFlags::AT_EMPTY_PATH | AtFlags::AT_SYMLINK_NOFOLLOW;
    nix::sys::stat::fstatat(fd, c"", flags).map_err(errno)
}

/// The attributes of `name` in `dir` (a symlink is not followed).
pub(crate) fn stat_at(dir: BorrowedFd<'_>, name: &OsStr) -> Result<libc::stat, Errno> {
    nix::sys::stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).map_err(errno)
}

pub(crate) fn is_kind(st: &libc::stat, kind: libc::mode_t) -> bool {
    st.st_mode & libc::S_IFMT == kind
}

pub(crate) fn mkdir_at(dir: BorrowedFd<'_>, name: &OsStr, mode: u32) -> Result<(), Errno> {
    nix::sys::stat::mkdirat(dir, name, Mode::from_bits_truncate(mode & 0o7777)).map_err(errno)
}

pub(crate) fn mknod_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    mode: u32,
    rdev: u32,
) -> Result<(), Errno> {
    let kind = nix::sys::stat::SFlag::from_bits_truncate(mode & libc::S_IFMT);
    let perm = Mode::from_bits_truncate(mode & 0o7777);
    nix::sys::stat::mknodat(dir, name, kind, perm, rdev as libc::dev_t).map_err(errno)
}

pub(crate) fn symlink_at(target: &OsStr, dir: BorrowedFd<'_>, name: &OsStr) -> Result<(), Errno> {
    nix::unistd::symlinkat(target, dir, name).map_err(errno)
}

pub(crate) fn readlink_fd(fd: BorrowedFd<'_>) -> Result<std::ffi::OsString, Errno> {
    nix::fcntl::readlinkat(fd, c"").map_err(errno)
}

/// A new name `name` in `dir` for the inode behind `fd` (needs
/// CAP_DAC_READ_SEARCH for AT_EMPTY_PATH; the server runs as root).
pub(crate) fn link_fd(fd: BorrowedFd<'_>, dir: BorrowedFd<'_>, name: &OsStr) -> Result<(), Errno> {
    nix::unistd::linkat(fd, c"", dir, name, AtFlags::AT_EMPTY_PATH).map_err(errno)
}

/// A new name `to` in `to_dir` for the file `from` in `from_dir` (not
/// following a symlink: the link names the symlink itself).
pub(crate) fn link_at(
    from_dir: BorrowedFd<'_>,
    from: &OsStr,
    to_dir: BorrowedFd<'_>,
    to: &OsStr,
) -> Result<(), Errno> {
    nix::unistd::linkat(from_dir, from, to_dir, to, AtFlags::empty()).map_err(errno)
}

pub(crate) fn unlink_at(dir: BorrowedFd<'_>, name: &OsStr, is_dir: bool) -> Result<(), Errno> {
    let flag = if is_dir {
        nix::unistd::UnlinkatFlags::RemoveDir
    } else {
        nix::unistd::UnlinkatFlags::NoRemoveDir
    };
    nix::unistd::unlinkat(dir, name, flag).map_err(errno)
}

pub(crate) fn rename_at(
    from_dir: BorrowedFd<'_>,
    from: &OsStr,
    to_dir: BorrowedFd<'_>,
    to: &OsStr,
    flags: u32,
) -> Result<(), Errno> {
    let flags = nix::fcntl::RenameFlags::from_bits(flags).ok_or(libc::EINVAL)?;
    nix::fcntl::renameat2(from_dir, from, to_dir, to, flags).map_err(errno)
}

/// Changes the owner of the inode behind `fd` (a symlink itself, not its target).
pub(crate) fn chown_fd(
    fd: BorrowedFd<'_>,
    uid: Option<u32>,
    gid: Option<u32>,
) -> Result<(), Errno> {
    let flags = AtFlags::AT_EMPTY_PATH | AtFlags::AT_SYMLINK_NOFOLLOW;
    let uid = uid.map(nix::unistd::Uid::from_raw);
    let gid = gid.map(nix::unistd::Gid::from_raw);
    nix::unistd::fchownat(fd, c"", uid, gid, flags).map_err(errno)
}

/// Changes the mode of the inode behind `fd`; not for symlinks (Linux has no lchmod).
pub(crate) fn chmod_fd(fd: BorrowedFd<'_>, mode: u32) -> Result<(), Errno> {
    let path = proc_path(fd);
    let mode = Mode::from_bits_truncate(mode & 0o7777);
    nix::sys::stat::fchmodat(
        nix::fcntl::AT_FDCWD,
        path.as_c_str(),
        mode,
        nix::sys::stat::FchmodatFlags::FollowSymlink,
    )
    .map_err(errno)
}

/// A time to set: a value, the current time, or unchanged.
#[derive(Clone, Copy, Debug)]
pub(crate) enum SetTime {
    Omit,
    Now,
    At(std::time::SystemTime),
}

impl SetTime {
    fn timespec(self) -> libc::timespec {
        match self {
            SetTime::Omit => libc::timespec {
                tv_sec: 0,
                tv_nsec: libc::UTIME_OMIT,
            },
            SetTime::Now => libc::timespec {
                tv_sec: 0,
                tv_nsec: libc::UTIME_NOW,
            },
            SetTime::At(t) => {
                let (sec, nsec) = match t.duration_since(std::time::UNIX_EPOCH) {
                    Ok(d) => (d.as_secs() as i64, d.subsec_nanos() as i64),
                    Err(e) => {
                        // Before the epoch: a negative second and a positive nanosecond part.
                        let d = e.duration();
                        let ns = d.subsec_nanos() as i64;
                        let sec = -(d.as_secs() as i64);
                        if ns == 0 {
                            (sec, 0)
                        } else {
                            (sec - 1, 1_000_000_000 - ns)
                        }
                    }
                };
                libc::timespec {
                    tv_sec: sec as libc::time_t,
                    tv_nsec: nsec as _,
                }
            }
        }
    }
}

/// Sets the access and modification times of the inode behind `fd` (a
/// symlink itself, not its target).
pub(crate) fn utimes_fd(fd: BorrowedFd<'_>, atime: SetTime, mtime: SetTime) -> Result<(), Errno> {
    let times = [atime.timespec(), mtime.timespec()];
    let flags = libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW;
    // SAFETY: `fd` is a live descriptor borrowed for the call; the path is
    // a NUL-terminated empty C string literal; `times` points to the two
    // timespec values utimensat reads, alive for the call.
    let res = unsafe { libc::utimensat(fd.as_raw_fd(), c"".as_ptr(), times.as_ptr(), flags) };
    nix::errno::Errno::result(res).map(drop).map_err(errno)
}

pub(crate) fn statvfs_fd(fd: BorrowedFd<'_>) -> Result<nix::sys::statvfs::Statvfs, Errno> {
    let path = proc_path(fd);
    nix::sys::statvfs::statvfs(path.as_c_str()).map_err(errno)
}

/// Owner and group for a new inode made by `uid`/`gid` in a directory with
/// attributes `parent`: a set-group-ID directory passes its group on.
pub(crate) fn new_owner(uid: u32, gid: u32, parent: &libc::stat) -> (u32, u32) {
    if parent.st_mode & libc::S_ISGID != 0 {
        (uid, parent.st_gid)
    } else {
        (uid, gid)
    }
}
