//! Free space of a device's filesystem, reported to the engine, which
//! reserves it for dirty data (the engine's space/): when a device is
//! added and whenever the engine asks (`Action::StatFs`). And whether the
//! filesystem runs extending O_DIRECT writes synchronously, told to the
//! backend with each such write (`IoOp::blocks`).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Bytes an unprivileged writer may still allocate on the filesystem
/// holding `dir`: statvfs's f_bavail × f_frsize (root's reserved blocks
/// left out, as a writer that is not root sees them).
pub(crate) fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let path = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: statvfs writes only into the struct we pass, which is plain
    // data valid when zeroed; the path is NUL-terminated and outlives the
    // call.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(path.as_ptr(), &mut st) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// Whether the filesystem holding `dir` performs O_DIRECT writes that
/// make a file longer synchronously, under the inode's exclusive lock
/// until the device has completed them (ext2/3/4, which share a magic
/// number). False if it cannot be told.
pub(crate) fn serialises_extending_writes(dir: &Path) -> bool {
    let Ok(path) = CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statfs is plain integers and arrays of them, for which all
    // zeroes is a valid value; statfs(2) only writes into `st`, which
    // outlives the call, and reads the NUL-terminated path, which too.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statfs(path.as_ptr(), &mut st) };
    rc == 0 && st.f_type == libc::EXT4_SUPER_MAGIC
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_directory_has_some_free_space() {
        assert!(free_bytes(Path::new(".")).unwrap() > 0);
        assert!(free_bytes(Path::new("/nonexistent/wb")).is_err());
    }

    /// /proc is no ext4; a path that does not exist cannot be told.
    #[test]
    fn only_ext4_runs_extending_writes_synchronously() {
        assert!(!serialises_extending_writes(Path::new("/proc")));
        assert!(!serialises_extending_writes(Path::new("/nonexistent/wb")));
    }
}
