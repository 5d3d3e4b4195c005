//! An occasional writer: one small write every interval, each timed
//! (Sekiyama's process B).

use super::{Next, Op, Workload};
use wb_engine::Instant;

pub struct OccasionalWriter {
    block_size: u64,
    interval_ns: u64,
    remaining: u64,
    count: u64,
    next_due: Option<Instant>,
}

impl OccasionalWriter {
    pub fn new(block_size: u64, interval_ns: u64, count: u64) -> OccasionalWriter {
        assert!(block_size > 0 && count > 0);
        OccasionalWriter {
            block_size,
            interval_ns,
            remaining: count,
            count,
            next_due: None,
        }
    }
}

impl Workload for OccasionalWriter {
    fn next(&mut self, now: Instant) -> Next {
        if self.remaining == 0 {
            return Next::Finished;
        }
        if let Some(due) = self.next_due {
            if due > now {
                return Next::Until(due);
            }
        }
        let index = self.count - self.remaining;
        self.remaining -= 1;
        // The schedule is fixed; a write that blocked long does not shift it.
        self.next_due = Some(self.next_due.unwrap_or(now) + self.interval_ns);
        Next::Op(Op::Write {
            file: 0,
            offset: index * self.block_size,
            len: self.block_size,
        })
    }

    fn files(&self) -> Vec<(u64, u64)> {
        // Saturating: an extent past u64 cannot fit on any device, and says so.
        vec![(0, self.block_size.saturating_mul(self.count))]
    }
}
