//! An fsync loop: write a block, fsync, repeat (a database's commit log).

use super::{Next, Op, Workload};
use wb_engine::Instant;

pub struct FsyncLoop {
    block_size: u64,
    interval_ns: u64,
    remaining: u64,
    count: u64,
    fsync_pending: bool,
    next_due: Option<Instant>,
}

impl FsyncLoop {
    pub fn new(block_size: u64, interval_ns: u64, count: u64) -> FsyncLoop {
        assert!(block_size > 0 && count > 0);
        FsyncLoop {
            block_size,
            interval_ns,
            remaining: count,
            count,
            fsync_pending: false,
            next_due: None,
        }
    }
}

impl Workload for FsyncLoop {
    fn next(&mut self, now: Instant) -> Next {
        if self.fsync_pending {
            self.fsync_pending = false;
            return Next::Op(Op::Fsync { file: 0 });
        }
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
        self.fsync_pending = true;
        self.next_due = Some(now + self.interval_ns);
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
