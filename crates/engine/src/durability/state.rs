//! The durability stage's state: the marks of unsynced files and the
//! flushes handed to the runtime (durability/).

use crate::ids::FileId;
use std::collections::BTreeMap;

/// A flush handed to the runtime and not yet reported.
#[derive(Debug)]
pub(crate) struct PendingFlush {
    pub file: FileId,
    /// The file's mark when the flush was asked for.
    pub mark: u64,
    pub purpose: FlushFor,
    /// The length the flush sets the backing file to, if any.
    pub len: Option<u64>,
}

/// Who waits for a flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FlushFor {
    /// This sync operation.
    Sync(u64),
    /// Eviction (evict/): the file goes once it is durable.
    Eviction,
}

/// The durability stage's state.
#[derive(Debug, Default)]
pub(crate) struct Durability {
    pub(super) next_mark: u64,
    pub(super) next_id: u64,
    pub pending: BTreeMap<u64, PendingFlush>,
}
