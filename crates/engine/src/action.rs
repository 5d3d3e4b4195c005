//! What the engine asks of its runtime, and what a caller is told to do:
//! the vocabulary every other file of the engine speaks (with ids.rs,
//! time.rs and error.rs). It imports no policy: why writeback started
//! (`WbReason`), the class a write is admitted under (`WbtClass`), a
//! release's steps (`ReleaseStep`) and the bounds on one sleep live here,
//! and the policies that decide them import them.

use crate::ids::{DeviceId, FileId, IoId, PageIndex, TaskId};
use crate::time::Instant;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoDir {
    Read,
    Write,
}

/// One request for the runtime to perform and later report with
/// [`crate::Engine::io_complete`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoRequest {
    pub id: IoId,
    pub device: DeviceId,
    pub file: FileId,
    pub dir: IoDir,
    pub first_page: u64,
    pub pages: u32,
    /// Bytes to transfer from `first_page`: `pages` whole pages, except a
    /// write of the file's partial last page, which ends at the file's
    /// length. A runtime writes no byte past it, so a write-back never
    /// makes the backing file longer than the file (a crash of the
    /// process leaves no page-rounded length with a zero tail).
    pub bytes: u64,
    /// For writes: the class wbt admitted it under.
    pub class: Option<WbtClass>,
    /// For writes: why it was written.
    pub reason: Option<WbReason>,
    /// A direct (O_DIRECT) write from the simulator: its data is not in
    /// the cache (direct/). A runtime that takes data from frames fails it.
    pub direct: bool,
    /// A write of someone's commit: an fsync or sync that tagged at most
    /// `COMMIT_WRITE_MAX_PAGES` in all (sync/ decides, and only there), its
    /// caller waiting for these few writes alone. A runtime may carry them
    /// out on the caller's own thread instead of a backend's (the real
    /// runtime does, when all the writes a sleeping caller's call emitted
    /// are its commit's).
    pub commit: bool,
    /// A write-back that makes the backing file longer: it ends past the
    /// length the engine made it (`backing_len/`). Under
    /// `extending_writes = one-per-file` the engine submits one such
    /// write per file at a time (dispatch/). A runtime may submit these
    /// differently (the real one hands them straight to an io_uring
    /// worker where the filesystem runs them synchronously).
    pub extends: bool,
}

/// Something the runtime must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Perform this I/O.
    Submit(IoRequest),
    /// This task's wait may be over: call `resume` for it.
    Wake(TaskId),
    /// Frames `first..first + count` were given to pages that are not
    /// read from the device and that the write which made them does not
    /// cover whole (holes): zero them before anyone copies. Pages a write
    /// covers whole get no zeroing: the runtime must copy the write's data
    /// in before anything else sees them (the real runtime copies right
    /// after the engine call that prepared them, under the same lock).
    ZeroFrames { first: u32, count: u32 },
    /// Copy frames `from..from + count` into frames `to..to + count`
    /// (page_cache/stable.rs: a writer gets a copy of pages under writeback; the
    /// write in flight keeps the old frames). The runtime must copy before
    /// it acts on any later action (a `CopyIn` into the new frames follows).
    /// The frames hold pages `first..first + count` of `file`, which move
    /// to the new ones (a page map drops them until their copy-in).
    CopyFrames {
        file: FileId,
        first: PageIndex,
        from: u32,
        to: u32,
        count: u32,
    },
    /// Copy the bytes of `task`'s write that belong at file offsets
    /// `pos..pos + len` of `file` into frames `frame, frame + 1, ...`,
    /// starting `pos % PAGE_SIZE` bytes into the first. The pages are dirty
    /// already: the runtime must copy before it acts on any later action
    /// (a later `Submit` may write these frames) and before anyone else can
    /// see the pages. Only the task's own `write` or `resume` emits it.
    CopyIn {
        task: TaskId,
        file: FileId,
        pos: u64,
        len: u64,
        frame: u32,
    },
    /// Make the writes that landed in `file` durable: set its backing
    /// file's length to `len` if given, and flush it (fdatasync; fsync
    /// when `metadata`), outside any lock, then report with
    /// `Engine::durable_done(now, id, result)`.
    MakeDurable {
        id: u64,
        file: FileId,
        metadata: bool,
        /// The length to set the backing file to first (backing_len/):
        /// the file's, or None while data past the backing file's end is
        /// still to be written (the writes grow it).
        len: Option<u64>,
    },
    /// Set `file`'s backing file to `len` bytes (a truncation, shorter or
    /// longer: backing_len/), outside any lock, then report with
    /// `Engine::length_set(now, id, result)`. No write of the file is
    /// submitted until then.
    SetLength { id: u64, file: FileId, len: u64 },
    /// `file` was evicted (evict/): its pages are gone (`Unmapped` came
    /// first) and its id is retired; close its backing file.
    Evict { file: FileId },
    /// Carry out a step of releasing unlinked `file`'s backing file
    /// (backlog/), then call `release_done(id, ..)`.
    Release {
        id: u64,
        file: FileId,
        step: ReleaseStep,
    },
    /// Report the free space of `device`'s filesystem
    /// (`Engine::set_free_space`, or `space_unknown` if it cannot be had).
    StatFs { device: DeviceId },
    /// Pages `first..end` of `file` left the cache: a runtime's page map
    /// (page_map/, for reads without the engine) drops them before the
    /// runtime acts on any later action: their frames may be reused.
    Unmapped {
        file: FileId,
        first: PageIndex,
        end: PageIndex,
    },
}

/// Why a caller is made to wait. Every wait carries one and is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StallReason {
    /// balance_dirty_pages: too much dirty memory for this writer's device.
    DirtyThrottle,
    /// Modifying a page under writeback on a device that needs stable pages.
    StablePage,
    /// The cache budget is full of dirty or in-flight pages; waiting for reclaim.
    Memory,
    /// Waiting for a cache-miss read from the device.
    ReadIo,
    /// fsync / sync waiting for its writes.
    Sync,
    /// An uncached write submitting writeback of what it wrote
    /// (`dontcache_flush = inline`, Linux 6.14–6.19).
    DontcacheFlush,
    /// A direct (O_DIRECT) write waiting for its requests (direct/).
    DirectIo,
    /// A read or truncation waiting for a writer to finish copying into a
    /// page outside the runtime's lock (page_cache/page_lock.rs): one memcpy.
    PageLocked,
    /// An unlink held back by its device's full backlog of deferred
    /// releases (backlog/): about `backlog_wait_ms` with watermarks.
    Backlog,
}

impl StallReason {
    /// The longest one sleep of this reason may last: the caller is woken
    /// by then and looks again (an operation may sleep several times).
    /// A dirty-throttle pause is at most Linux's MAX_PAUSE (the 2007
    /// throttle's congestion wait and the DONTCACHE wait are shorter);
    /// every wait for an event re-checks after `EVENT_WAIT_MAX_NS`.
    pub fn max_sleep_ns(self) -> u64 {
        match self {
            StallReason::DirtyThrottle => MAX_PAUSE_NS,
            _ => EVENT_WAIT_MAX_NS,
        }
    }

    pub const ALL: [StallReason; 9] = [
        StallReason::DirtyThrottle,
        StallReason::StablePage,
        StallReason::Memory,
        StallReason::ReadIo,
        StallReason::Sync,
        StallReason::DontcacheFlush,
        StallReason::DirectIo,
        StallReason::PageLocked,
        StallReason::Backlog,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StallReason::DirtyThrottle => "dirty_throttle",
            StallReason::StablePage => "stable_page",
            StallReason::Memory => "memory",
            StallReason::ReadIo => "read_io",
            StallReason::Sync => "sync",
            StallReason::DontcacheFlush => "dontcache_flush",
            StallReason::DirectIo => "direct_io",
            StallReason::PageLocked => "page_locked",
            StallReason::Backlog => "backlog",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for StallReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A wait imposed on a caller: sleep until `until`, or until a
/// [`Action::Wake`] for the task if `wakeable`, then call `resume`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stall {
    pub reason: StallReason,
    pub until: Instant,
    pub wakeable: bool,
    /// For a dirty-throttle pause: what it was computed from (traces show
    /// it; nothing decides on it).
    pub throttle: Option<ThrottleDetail>,
}

/// The figures behind a dirty-throttle pause (balance_dirty/), as
/// balance_dirty_pages' tracepoint shows them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThrottleDetail {
    /// The pause computed (bounded by min and max pause).
    pub pause_ns: u64,
    /// pos_ratio in thousandths (1000: at the setpoint).
    pub pos_ratio_permille: u64,
    /// The task's rate: dirty_ratelimit × pos_ratio.
    pub task_ratelimit_pages_s: u64,
    /// Dirty pages counted against the limits, the dirty threshold and
    /// the hard limit (max of thresh and the decaying dirty_limit).
    pub dirty_pages: u64,
    pub thresh_pages: u64,
    pub limit_pages: u64,
    /// The writeback context's own dirty pages and share of the limit.
    pub wb_dirty_pages: u64,
    pub wb_thresh_pages: u64,
}

/// The state of a caller's operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The operation finished.
    Done,
    /// The caller must wait, then call `resume`.
    Sleep(Stall),
}

/// A device I/O failure, as the runtime reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoErrorKind {
    /// EIO: the device failed the request.
    Io,
    /// ENOSPC: no space left.
    NoSpace,
}

impl fmt::Display for IoErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IoErrorKind::Io => f.write_str("I/O error (EIO)"),
            IoErrorKind::NoSpace => f.write_str("no space left on device (ENOSPC)"),
        }
    }
}

/// Linux's MAX_PAUSE: no single throttle pause is longer (balance_dirty/).
pub const MAX_PAUSE_NS: u64 = 200 * crate::time::NS_PER_MS;

/// A caller waiting for an event is woken at the latest after this long
/// and re-checks (a lost or late event can never strand it).
pub const EVENT_WAIT_MAX_NS: u64 = 100 * crate::time::NS_PER_MS;

/// Why writeback was started (Linux's enum wb_reason).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WbReason {
    Background,
    Vmscan,
    Sync,
    Periodic,
    /// A writer throttled by the 2007-style global limit writing its own device.
    BalanceDirty,
    /// Uncached writes: a kick of the flusher, or the writer's own
    /// submission (Linux's WB_REASON_DONTCACHE).
    Dontcache,
}

impl WbReason {
    pub const ALL: [WbReason; 6] = [
        WbReason::Background,
        WbReason::Vmscan,
        WbReason::Sync,
        WbReason::Periodic,
        WbReason::BalanceDirty,
        WbReason::Dontcache,
    ];

    pub fn name(self) -> &'static str {
        match self {
            WbReason::Background => "background",
            WbReason::Vmscan => "vmscan",
            WbReason::Sync => "sync",
            WbReason::Periodic => "periodic",
            WbReason::BalanceDirty => "balance_dirty",
            WbReason::Dontcache => "dontcache",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for WbReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which limit a write is admitted under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum WbtClass {
    /// Flusher background and periodic writeback (REQ_BACKGROUND).
    Background,
    /// Other buffered writeback (reclaim-driven, for example).
    Normal,
    /// Data integrity writeback (fsync, sync) and boosted writes.
    Sync,
}

/// How the backing file is released, one step at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseStep {
    /// The file's release starts: nothing to do to the backing file;
    /// report it done from where release steps are carried out, and the
    /// engine drops the file's cached pages in that call (not in the
    /// unlinking caller's: a large cached file takes milliseconds).
    Start,
    /// Cut the backing file to `len` bytes (frees the blocks past it).
    Truncate { len: u64 },
    /// Remove the backing file (what is left of it).
    Remove,
}
