//! How many backing files the cache may keep open: the engine decides
//! which idle files go and when (wb-engine's evict/); the runtime only
//! tells it the limit, from the process's open-file limit, and closes a
//! file's descriptor when told (`Action::Evict`).

/// Bounds on the backing files kept open, whatever the limit says.
const BACKING_FILES_MIN: u64 = 64;
const BACKING_FILES_MAX: u64 = 65_536;

/// How many backing files the cache keeps open at most: `percent` of the
/// process's open-file limit (the engine's `backing_files_percent`; the
/// rest is the application's), within the bounds above.
pub(crate) fn backing_files_max(percent: u32) -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit through the pointer, which points
    // at a live, properly aligned local.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    let soft = if ok { limit.rlim_cur } else { 1024 };
    share_of(soft, percent)
}

/// `percent` of an open-file limit of `nofile`, within the bounds above.
fn share_of(nofile: u64, percent: u32) -> usize {
    (nofile.saturating_mul(percent as u64) / 100).clamp(BACKING_FILES_MIN, BACKING_FILES_MAX)
        as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_of_the_limit_within_the_bounds() {
        assert_eq!(share_of(1024, 50), 512);
        assert_eq!(share_of(20_000, 40), 8_000);
        assert_eq!(share_of(100, 50), 64, "at least 64");
        assert_eq!(share_of(1 << 20, 50), 65_536, "at most 65,536");
        assert_eq!(share_of(u64::MAX, 100), 65_536, "an unlimited limit");
        let ours = backing_files_max(50);
        assert!((64..=65_536).contains(&ours), "{ours}");
    }
}
