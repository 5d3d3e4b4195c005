//! What the uncached writes of one writeback context asked of its
//! flusher, counted (dontcache/).

/// What the uncached writes of one writeback context asked of its flusher.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DontcacheStats {
    /// Kicks that set the start_dontcache bit.
    pub kicks: u64,
    /// Kicks that found the bit set already.
    pub kicks_coalesced: u64,
    /// DONTCACHE works the flusher started.
    pub works: u64,
    /// Pages those works were asked to write.
    pub work_pages: u64,
    /// The context's own dirty uncached pages when each work started:
    /// `work_pages / dirty_at_work` is the share a kick covers.
    pub dirty_at_work: u64,
    /// Pages that left the cache at the end of their writeback.
    pub dropped_pages: u64,
}
