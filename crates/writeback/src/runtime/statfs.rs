//! Free space of a device's filesystem, reported to the engine, which
//! reserves it for dirty data (the engine's space/): when a device is
//! added and whenever the engine asks (`Action::StatFs`).

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_directory_has_some_free_space() {
        assert!(free_bytes(Path::new(".")).unwrap() > 0);
        assert!(free_bytes(Path::new("/nonexistent/wb")).is_err());
    }
}
