//! Letting go of files nobody uses, so a cache that meets many files (a
//! FUSE server walking trees) keeps a bounded number of backing
//! descriptors. A file goes once it is idle (no handle open, nothing dirty
//! or in flight: see `Engine::evict_file`); writes that landed in it are
//! made durable first, as `Cache::sync` would have.

use super::shared::Shared;
use wb_engine::FileId;

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

impl Shared {
    /// Evicts `file` if it is idle, after making its landed writes durable
    /// (outside the engine's lock). Returns whether it went.
    pub(crate) fn evict(&self, file: FileId) -> std::io::Result<bool> {
        let mark = {
            let core = self.lock();
            if !core.engine.file_idle(file) {
                return Ok(false);
            }
            core.unsynced_mark(file)
        };
        if let Some(mark) = mark {
            self.make_durable(file)?;
            self.lock().synced(file, mark);
        }
        Ok(self.lock().evict(file))
    }

    /// Evicts idle files until at most `keep` are left, if it can; returns
    /// how many went. Called when opening a new file would pass the limit.
    /// A file whose fdatasync fails stays (still marked unsynced): the next
    /// `Cache::sync` retries it and reports the error, not an unrelated open.
    pub(crate) fn evict_idle(&self, keep: usize) -> usize {
        let candidates: Vec<FileId> = {
            let core = self.lock();
            let excess = core.live_files().saturating_sub(keep);
            core.by_inode
                .values()
                .copied()
                .filter(|&f| core.engine.file_idle(f))
                .take(excess)
                .collect()
        };
        candidates
            .into_iter()
            .filter(|&file| matches!(self.evict(file), Ok(true)))
            .count()
    }
}
