//! How a buffered write goes through the cache: cached or uncached, its
//! bytes copied under the runtime's lock or after (write_path/).

/// How a write goes through the cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteFlags {
    /// Uncached (Linux's RWF_DONTCACHE): the pages leave the cache once
    /// written back (`dontcache/`).
    pub dontcache: bool,
    /// The runtime copies the bytes of this call's `CopyIn` actions after
    /// releasing its lock, then calls `write_end`; the pages stay locked
    /// meanwhile (page_cache/page_lock.rs). Ignored for uncached writes, whose inline
    /// flush writes the pages back within the call.
    pub deferred_copy: bool,
}

impl WriteFlags {
    pub const DONTCACHE: WriteFlags = WriteFlags {
        dontcache: true,
        deferred_copy: false,
    };
    /// An ordinary write whose bytes the runtime copies outside its lock.
    pub const DEFERRED_COPY: WriteFlags = WriteFlags {
        dontcache: false,
        deferred_copy: true,
    };
}
