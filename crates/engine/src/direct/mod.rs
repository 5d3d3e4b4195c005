//! Direct writes (O_DIRECT semantics): the data goes to the device without
//! the cache, as a baseline for buffered and uncached writes.
//!
//! 1. Cached pages of the range are written back and waited for, then
//!    dropped (Linux's filemap_write_and_wait_range and
//!    invalidate_inode_pages2_range), so the cache never holds stale data.
//! 2. The range goes to the device in requests of at most max_sectors_kb,
//!    each needing only a tag: O_DIRECT writes are REQ_SYNC | REQ_IDLE,
//!    which wbt does not throttle, and no dirty accounting applies.
//! 3. The writer waits (stall `direct_io`) until all of them complete; the
//!    file grows to the end of the write.
//!
//! Only the simulator issues these: the real runtime takes its data from
//! the cache's frames, and a direct request has none (it fails such a
//! request instead of writing anything).
//!
//! The engine's side is in dispatch/ (step 1's page rules:
//! page_cache/truncate.rs) and completion.rs; this file splits the range
//! into requests and holds the write's phases (phase.rs).

pub(crate) mod phase;

use crate::ids::PageIndex;

/// Pages `first..last` as requests of at most `max_pages`: each one's
/// first page and length, in order.
pub(crate) fn requests(
    first: PageIndex,
    last: PageIndex,
    max_pages: u64,
) -> impl Iterator<Item = (PageIndex, u64)> {
    assert!(max_pages > 0, "a request of no pages");
    (first..last)
        .step_by(max_pages as usize)
        .map(move |page| (page, max_pages.min(last - page)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_split_at_the_largest_request() {
        let r: Vec<_> = requests(3, 10, 4).collect();
        assert_eq!(r, [(3, 4), (7, 3)]);
        let r: Vec<_> = requests(0, 8, 4).collect();
        assert_eq!(r, [(0, 4), (4, 4)]);
        assert_eq!(requests(5, 5, 4).count(), 0);
    }
}
