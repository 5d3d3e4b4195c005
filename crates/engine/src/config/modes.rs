//! The knobs that choose among modes, each with its names as text.

/// How writers are throttled when too much memory is dirty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirtyThrottle {
    /// Linux since 3.2: IO-less, proportional pauses, per-device shares.
    IoLess,
    /// Linux before the per-device fix (2007): one global limit; a throttled
    /// writer waits until its own device writes a chunk or the global dirty
    /// count falls below the limit. Kept to show the pathology.
    Global2007,
}

impl DirtyThrottle {
    /// Every mode, in the order an error message lists them.
    pub const ALL: [DirtyThrottle; 2] = [DirtyThrottle::IoLess, DirtyThrottle::Global2007];

    pub fn name(self) -> &'static str {
        match self {
            DirtyThrottle::IoLess => "io-less",
            DirtyThrottle::Global2007 => "global-2007",
        }
    }
}

/// Who writes back the pages of uncached (DONTCACHE) writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DontcacheFlush {
    /// Layton 2026: the write kicks its context's flusher (a coalescing
    /// bit), which writes that many pages from the oldest dirty files.
    Kick,
    /// Linux 6.14–6.19: the writer submits writeback of the range it
    /// wrote before returning, and waits for the submission.
    Inline,
}

impl DontcacheFlush {
    /// Every mode, in the order an error message lists them.
    pub const ALL: [DontcacheFlush; 2] = [DontcacheFlush::Kick, DontcacheFlush::Inline];

    pub fn name(self) -> &'static str {
        match self {
            DontcacheFlush::Kick => "kick",
            DontcacheFlush::Inline => "inline",
        }
    }
}

/// How the flusher counts the uncached pages a kick asks it to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DontcacheCounter {
    /// Each writeback context counts its own (Kara's review, per-wb
    /// WB_DONTCACHE_DIRTY).
    PerDomain,
    /// One cache-wide count, split among a device's contexts by write
    /// bandwidth (the patch before the review). Kept to show that it
    /// underestimates a domain writing beside a buffered one.
    GlobalSplit,
}

impl DontcacheCounter {
    /// Every mode, in the order an error message lists them.
    pub const ALL: [DontcacheCounter; 2] =
        [DontcacheCounter::PerDomain, DontcacheCounter::GlobalSplit];

    pub fn name(self) -> &'static str {
        match self {
            DontcacheCounter::PerDomain => "per-domain",
            DontcacheCounter::GlobalSplit => "global-split",
        }
    }
}

/// How reclaim chooses the clean pages to free (page_cache/lru.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lru {
    /// Linux's two lists: a page enters the inactive list and is promoted
    /// to the active one by a second access, or at once when it comes
    /// back soon after its eviction (refault distance, workingset.rs).
    /// Reclaim takes inactive pages; the active list is trimmed to keep
    /// the inactive one from getting too small. A stream touches each page
    /// once and so cannot push out pages used repeatedly.
    ActiveInactive,
    /// One CLOCK list: a page used since the hand last passed gets a second
    /// chance. Kept to show that a stream flushes the hot set.
    Clock,
}

impl Lru {
    /// Every mode, in the order an error message lists them.
    pub const ALL: [Lru; 2] = [Lru::ActiveInactive, Lru::Clock];

    pub fn name(self) -> &'static str {
        match self {
            Lru::ActiveInactive => "active-inactive",
            Lru::Clock => "clock",
        }
    }
}

/// How a producer of deferred work (an unlink's release of a file) is
/// held back when the device's backlog is long (backlog/).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BacklogThrottle {
    /// Chinner 2021: above the high watermark the producer sets the
    /// throttle bit and sleeps until the worker brings the backlog under
    /// the low one; the two are `backlog_wait_ms` of work apart.
    Watermarks,
    /// XFS 2021: past a count bound (256 items) the producer waits for the
    /// whole backlog to be worked off (flush_work). Kept to show the
    /// pathology: a stall as long as the backlog.
    FlushAll,
}

impl BacklogThrottle {
    /// Every mode, in the order an error message lists them.
    pub const ALL: [BacklogThrottle; 2] = [BacklogThrottle::Watermarks, BacklogThrottle::FlushAll];

    pub fn name(self) -> &'static str {
        match self {
            BacklogThrottle::Watermarks => "watermarks",
            BacklogThrottle::FlushAll => "flush-all",
        }
    }
}

/// How a device takes write-backs that make their file longer (those
/// ending past the backing file's length as the engine made it,
/// `backing_len/`; `IoRequest::extends`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtendingWrites {
    /// As they come, side by side (what the simulator's device models
    /// take: a crash there lands every write handed over).
    Parallel,
    /// One at a time per file, in order: a file's next extending write is
    /// held until the one in flight completes (dispatch/). The real
    /// runtime sets it: a killed process may leave a write it handed over
    /// unstarted or half done while a higher one lands (a hole below it),
    /// and filesystems run these writes one at a time anyway (ext4 under
    /// the inode's lock; XFS waits for the writes in flight first).
    OnePerFile,
}

impl ExtendingWrites {
    /// Every mode, in the order an error message lists them.
    pub const ALL: [ExtendingWrites; 2] = [ExtendingWrites::Parallel, ExtendingWrites::OnePerFile];

    pub fn name(self) -> &'static str {
        match self {
            ExtendingWrites::Parallel => "parallel",
            ExtendingWrites::OnePerFile => "one-per-file",
        }
    }
}

/// Default `backlog_wait_ms`: how long a producer held back by the
/// backlog waits, about (Chinner 2021's ~100 ms).
pub const DEFAULT_BACKLOG_WAIT_MS: u32 = 100;
/// Largest `backlog_wait_ms` accepted (one minute).
pub const MAX_BACKLOG_WAIT_MS: u32 = 60_000;

/// What to do when a page under writeback is modified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StableWrites {
    /// Modify in place; the device does not checksum data in flight.
    None,
    /// Wait for the writeback to finish before modifying (Linux's stable pages).
    Wait,
    /// Copy the page for the I/O so the writer never waits (bounce snapshot).
    Snapshot,
    /// What the device declares: snapshot where it needs stable pages
    /// (Linux's queue/stable_writes = 1), none elsewhere.
    Auto,
}

impl StableWrites {
    pub fn name(self) -> &'static str {
        match self {
            StableWrites::None => "none",
            StableWrites::Wait => "wait",
            StableWrites::Snapshot => "snapshot",
            StableWrites::Auto => "auto",
        }
    }
}
