//! The eviction stage's state: the limit on live files, their use order,
//! and the files on their way out (evict/).

use crate::ids::FileId;
use std::collections::BTreeSet;

/// The eviction stage's state.
#[derive(Debug, Default)]
pub(crate) struct Eviction {
    /// Live files allowed at once; None: no limit.
    pub max_files: Option<usize>,
    /// Files known and not evicted.
    pub live: usize,
    pub(super) next_use: u64,
    /// Additions left before looking for idle files again.
    pub(super) skip_scans: usize,
    /// Files waiting for their flush before they go.
    pub flushing: BTreeSet<FileId>,
    /// Evicted files whose `Evict` the runtime may not have taken yet.
    pub retiring: Vec<FileId>,
    /// Evicted files whose ids may be used again.
    pub free: Vec<FileId>,
}
