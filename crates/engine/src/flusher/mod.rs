//! The flusher of one writeback context (Linux's fs/fs-writeback.c).
//!
//! - Works, in order: queued works in FIFO order (a full queue folds into
//!   the coalescing "write everything" bit, WB_start_all), then the
//!   uncached writes' work (the WB_start_dontcache bit, dontcache/),
//!   then periodic (kupdate) writeback of files dirtied longer than
//!   dirty_expire_centisecs, then background writeback while the context is
//!   over its background threshold.
//! - Files in first-dirtied order (b_dirty); the flusher writes a chunk of
//!   one file (half a second of bandwidth, at most 1/8 of the dirty limit,
//!   in 4 MiB multiples) before moving to the next, so one big file cannot
//!   starve the others; within a file it continues where it stopped.
//! - Requests are as large as the device takes (max_sectors_kb) and, while
//!   reads compete, no larger than wbt's write cap.
//! - Past the end of the backing file, a file grows in order: the flusher
//!   never writes a page there while a page below it, also past that end,
//!   waits dirty (ours; see `CachedFile::next_writable_from_index`).
//! - Differs from Linux: the flusher is not a thread; `pump` (dispatch/)
//!   runs it whenever the device can take a write, and `handle_timeout`
//!   (completion.rs) runs the clocks that wake it (timers/).
//!
//! - Room for pages (`reserve`, `trim_to_budget`, engine.rs): the page
//!   cache frees clean pages; when too few are clean every context's
//!   flusher is asked to write everything (reason vmscan, Linux's
//!   wakeup_flusher_threads).
//!
//! This file holds the rules (the chunk size, the wbt class of a work's
//! writes: `class_of`; the works: work.rs); the engine's side (picking a
//! work, building a request) is in dispatch/.

pub(crate) mod work;

use crate::action::{WbReason, WbtClass};
use crate::bandwidth::estimate::INIT_BW_PAGES_S;

pub(crate) use crate::flusher::work::Work;

/// Linux's MIN_WRITEBACK_PAGES (4 MiB): chunks are multiples of it.
pub const MIN_WRITEBACK_PAGES: u64 = 1024;
/// Linux's DIRTY_SCOPE: a chunk is at most 1/8 of the dirty limit.
pub const DIRTY_SCOPE: u64 = 8;

/// Pages to write from one file before moving on (Linux's
/// writeback_chunk_size): half a second of bandwidth, at most 1/8 of the
/// dirty limit, rounded to 4 MiB so requests stay large.
pub fn writeback_chunk_size(avg_write_bw: u64, dirty_limit: u64, nr_pages: u64) -> u64 {
    let bw = if avg_write_bw == 0 {
        INIT_BW_PAGES_S
    } else {
        avg_write_bw
    };
    let pages = (bw / 2).min(dirty_limit / DIRTY_SCOPE).min(nr_pages);
    (pages + MIN_WRITEBACK_PAGES) / MIN_WRITEBACK_PAGES * MIN_WRITEBACK_PAGES
}

/// The wbt class a flusher work's writes are admitted under.
pub(crate) fn class_of(reason: WbReason) -> WbtClass {
    match reason {
        // Integrity writeback is REQ_SYNC.
        WbReason::Sync => WbtClass::Sync,
        // Background and kupdate writeback is REQ_BACKGROUND.
        WbReason::Background | WbReason::Periodic => WbtClass::Background,
        // Uncached writes' writeback is neither: Linux's
        // filemap_fdatawrite_range and the DONTCACHE work set no flag.
        WbReason::Vmscan | WbReason::BalanceDirty | WbReason::Dontcache => WbtClass::Normal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_sizes() {
        // 150 MB/s: half a second is 18310 pages, limit/8 = 25k: rounds to 18432.
        assert_eq!(writeback_chunk_size(36_621, 200_000, u64::MAX), 18_432);
        // A slow USB stick: still at least 4 MiB.
        assert_eq!(
            writeback_chunk_size(100, 200_000, u64::MAX),
            MIN_WRITEBACK_PAGES
        );
        assert_eq!(
            writeback_chunk_size(36_621, 200_000, 10),
            MIN_WRITEBACK_PAGES
        );
    }
}
