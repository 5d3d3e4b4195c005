//! How many backing files the cache may keep open: the engine decides
//! which idle files go and when (wb-engine's evict/); the runtime only
//! tells it the limit, from the process's open-file limit, and closes a
//! file's descriptor when told (`Action::Evict`).

/// Backing files kept open at most, as a share of the process's open-file
/// limit: the rest is the application's.
const BACKING_SHARE_OF_NOFILE: u64 = 2;
/// Bounds on that number, whatever the limit says.
const BACKING_FILES_MIN: u64 = 64;
const BACKING_FILES_MAX: u64 = 65_536;

/// How many backing files the cache keeps open at most (see above).
pub(crate) fn backing_files_max() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit through the pointer, which points
    // at a live, properly aligned local.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    let soft = if ok { limit.rlim_cur } else { 1024 };
    (soft / BACKING_SHARE_OF_NOFILE).clamp(BACKING_FILES_MIN, BACKING_FILES_MAX) as usize
}
