//! What the kernel's page cache holds: the data dirty or under writeback
//! machine-wide (`Dirty` + `Writeback` of /proc/meminfo) and the pages of
//! one file resident in it (mmap + mincore).

use std::io;
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// `Dirty` + `Writeback` of /proc/meminfo, in bytes.
pub fn read_meminfo_level() -> io::Result<u64> {
    let text = std::fs::read_to_string("/proc/meminfo")?;
    dirty_and_writeback_bytes(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "no Dirty or Writeback line in /proc/meminfo",
        )
    })
}

/// The value of `key` in /proc/meminfo text (`Dirty:   1234 kB`), in KiB.
fn meminfo_kib(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, rest) = line.split_once(':')?;
        if name.trim() != key {
            return None;
        }
        let mut parts = rest.split_whitespace();
        let value: u64 = parts.next()?.parse().ok()?;
        match parts.next() {
            Some("kB") | None => Some(value),
            Some(_) => None,
        }
    })
}

/// `Dirty` + `Writeback` in bytes, from /proc/meminfo text.
fn dirty_and_writeback_bytes(text: &str) -> Option<u64> {
    let dirty = meminfo_kib(text, "Dirty")?;
    let writeback = meminfo_kib(text, "Writeback")?;
    Some((dirty + writeback) * 1024)
}

/// Bytes of `path` resident in the kernel's page cache (mmap + mincore).
pub fn resident_bytes(path: &Path) -> io::Result<u64> {
    let file = std::fs::File::open(path)?;
    let len = usize::try_from(file.metadata()?.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file too large to map"))?;
    if len == 0 {
        return Ok(0);
    }
    // SAFETY: sysconf has no preconditions.
    let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        p if p > 0 => p as usize,
        _ => 4096,
    };
    // SAFETY: a new read-only shared mapping of the first `len` bytes of a
    // file open for reading; the kernel picks the address, so it overlaps
    // nothing of ours. It is never dereferenced (mincore reads the page
    // cache state, not the memory) and is unmapped below.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let mut resident = vec![0u8; len.div_ceil(page)];
    // SAFETY: `addr` is page-aligned (returned by mmap) and `len` bytes
    // from it are mapped; `resident` has one byte per page of that range,
    // which is what mincore writes.
    let rc = unsafe { libc::mincore(addr, len, resident.as_mut_ptr()) };
    let err = io::Error::last_os_error();
    // SAFETY: unmaps exactly the mapping made above, referred to by nothing else.
    unsafe { libc::munmap(addr, len) };
    if rc != 0 {
        return Err(err);
    }
    let pages = resident.iter().filter(|&&v| v & 1 == 1).count() as u64;
    Ok(pages * page as u64)
}
/// Drops `path`'s pages from the kernel's page cache and removes it.
pub fn discard(path: &Path) {
    if let Ok(file) = std::fs::File::open(path) {
        let _ = file.sync_data();
        // SAFETY: posix_fadvise only takes the fd (open for the call) and numbers.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
    let _ = std::fs::remove_file(path);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::cleanup::TempFile;

    const MEMINFO: &str = "\
MemTotal:       24572032 kB
Dirty:              1236 kB
Writeback:            64 kB
WritebackTmp:     999999 kB
AnonHugePages:         0 kB
HugePages_Total:       0
";

    #[test]
    fn meminfo_fields_parse_by_exact_name() {
        assert_eq!(meminfo_kib(MEMINFO, "Dirty"), Some(1236));
        assert_eq!(meminfo_kib(MEMINFO, "Writeback"), Some(64));
        assert_eq!(meminfo_kib(MEMINFO, "WritebackTmp"), Some(999_999));
        assert_eq!(meminfo_kib(MEMINFO, "HugePages_Total"), Some(0));
        assert_eq!(meminfo_kib(MEMINFO, "Missing"), None);
        assert_eq!(dirty_and_writeback_bytes(MEMINFO), Some((1236 + 64) * 1024));
        assert_eq!(dirty_and_writeback_bytes("Dirty: 5 kB\n"), None);
        assert_eq!(meminfo_kib("Dirty: lots kB\n", "Dirty"), None);
    }

    #[test]
    fn the_real_meminfo_has_both_lines() {
        assert!(read_meminfo_level().is_ok());
    }

    #[test]
    fn resident_bytes_sees_written_pages_and_dropped_ones() {
        let path = std::env::temp_dir().join(format!("wb-dc-mincore-{}", std::process::id()));
        let file = TempFile::new(path);
        std::fs::write(file.path(), vec![1u8; 1 << 20]).expect("write");
        let before = resident_bytes(file.path()).expect("mincore");
        assert!(before <= 1 << 20, "{before}");
        discard(file.path());
        std::fs::write(file.path(), b"").expect("empty file");
        assert_eq!(resident_bytes(file.path()).expect("mincore"), 0);
    }
}
