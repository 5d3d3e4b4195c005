//! A flusher's works: queued in order, "write everything" coalesced, and
//! the bits that ask for periodic, background and uncached writeback
//! (flusher/ picks and carries them out).

use crate::action::WbReason;
use crate::time::Instant;
use std::collections::VecDeque;

/// Queued works per context; a full queue coalesces into the start-all bit.
pub const MAX_QUEUED_WORKS: usize = 64;

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
    /// Linux's WB_start_dontcache: uncached writes asked for writeback
    /// (dontcache/); kicks while it is set coalesce.
    pub start_dontcache: bool,
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

    /// Queues `work` only if the flusher has nothing to do.
    pub fn queue_if_idle(&mut self, work: Work) {
        if self.current.is_none() && !self.has_queued() {
            self.queue(work);
        }
    }

    /// Periodic work if due (`wb_dirty` pages dirtied before
    /// `older_than`), else background work if kicked and the context is
    /// still over its background threshold (`over_bg`).
    pub fn periodic_or_background(
        &mut self,
        wb_dirty: u64,
        older_than: Instant,
        over_bg: bool,
    ) -> Option<Work> {
        if self.kupdate_due {
            self.kupdate_due = false;
            Some(Work {
                reason: WbReason::Periodic,
                nr_pages: wb_dirty,
                for_background: false,
                older_than: Some(older_than),
            })
        } else if self.background_kicked && over_bg {
            Some(Work::background())
        } else {
            self.background_kicked = false;
            None
        }
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
}
