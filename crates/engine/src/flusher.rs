//! The flusher's work list for one writeback context (Linux's
//! fs/fs-writeback.c): queued works in FIFO order, a coalescing "write
//! everything" bit, then periodic (kupdate) and background writeback.

use crate::bandwidth::INIT_BW_PAGES_S;
use crate::time::Instant;
use std::collections::VecDeque;
use std::fmt;

/// Linux's MIN_WRITEBACK_PAGES (4 MiB): chunks are multiples of it.
pub const MIN_WRITEBACK_PAGES: u64 = 1024;
/// Linux's DIRTY_SCOPE: a chunk is at most 1/8 of the dirty limit.
pub const DIRTY_SCOPE: u64 = 8;
/// Queued works per context; a full queue coalesces into the start-all bit.
pub const MAX_QUEUED_WORKS: usize = 64;

/// Why writeback was started (Linux's enum wb_reason).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WbReason {
    Background,
    Vmscan,
    Sync,
    Periodic,
    /// A writer throttled by the 2007-style global limit writing its own device.
    BalanceDirty,
}

impl WbReason {
    pub const ALL: [WbReason; 5] = [
        WbReason::Background,
        WbReason::Vmscan,
        WbReason::Sync,
        WbReason::Periodic,
        WbReason::BalanceDirty,
    ];

    pub fn name(self) -> &'static str {
        match self {
            WbReason::Background => "background",
            WbReason::Vmscan => "vmscan",
            WbReason::Sync => "sync",
            WbReason::Periodic => "periodic",
            WbReason::BalanceDirty => "balance_dirty",
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

/// One unit of flusher work (Linux's struct wb_writeback_work).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Work {
    pub reason: WbReason,
    /// Pages still to write.
    pub nr_pages: u64,
    /// Stop as soon as the context is below its background threshold.
    pub for_background: bool,
    /// Only files first dirtied at or before this time (kupdate).
    pub older_than: Option<Instant>,
}

impl Work {
    pub fn background() -> Work {
        Work {
            reason: WbReason::Background,
            nr_pages: u64::MAX,
            for_background: true,
            older_than: None,
        }
    }

    pub fn all(reason: WbReason) -> Work {
        Work {
            reason,
            nr_pages: u64::MAX,
            for_background: false,
            older_than: None,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Flusher {
    works: VecDeque<Work>,
    /// Linux's WB_start_all: "write everything" requests, coalesced.
    start_all: Option<WbReason>,
    /// Periodic writeback is due.
    pub kupdate_due: bool,
    /// Background writeback was kicked.
    pub background_kicked: bool,
    /// The work being done now.
    pub current: Option<Work>,
    /// Pages left in the current file's slice.
    pub chunk_left: u64,
    pub works_coalesced: u64,
}

impl Flusher {
    pub fn queue(&mut self, work: Work) {
        if self.works.len() >= MAX_QUEUED_WORKS {
            // A full queue is not allowed to grow: fold into "write all".
            self.start_all(work.reason);
            return;
        }
        self.works.push_back(work);
    }

    /// Asks for all dirty pages to be written. Repeated requests while one
    /// is pending coalesce into it.
    pub fn start_all(&mut self, reason: WbReason) {
        if self.start_all.is_some() {
            self.works_coalesced += 1;
        } else {
            self.start_all = Some(reason);
        }
    }

    pub fn has_queued(&self) -> bool {
        !self.works.is_empty() || self.start_all.is_some()
    }

    /// The next explicit work: queued works first, then start-all.
    pub fn next_queued(&mut self) -> Option<Work> {
        if let Some(work) = self.works.pop_front() {
            return Some(work);
        }
        self.start_all.take().map(Work::all)
    }

    #[cfg(test)]
    pub fn queued_len(&self) -> usize {
        self.works.len()
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_all_coalesces() {
        let mut f = Flusher::default();
        f.start_all(WbReason::Sync);
        f.start_all(WbReason::Vmscan);
        f.start_all(WbReason::Sync);
        assert_eq!(f.works_coalesced, 2);
        assert_eq!(f.next_queued(), Some(Work::all(WbReason::Sync)));
        assert_eq!(f.next_queued(), None);
    }

    #[test]
    fn queued_first_then_bounded() {
        let mut f = Flusher::default();
        f.start_all(WbReason::Sync);
        for _ in 0..MAX_QUEUED_WORKS + 5 {
            f.queue(Work::background());
        }
        assert_eq!(f.queued_len(), MAX_QUEUED_WORKS);
        assert_eq!(f.next_queued(), Some(Work::background()));
    }

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
