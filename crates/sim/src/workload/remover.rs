//! `rm -rf` of a tree (Chinner 2021): unlinks every file of the job, one
//! after the other, then calls sync(), which waits until the deferred
//! releases are all done (so the job's time covers the whole removal).
//! The files exist on the device when the run starts; the big ones are
//! spread evenly among the small ones, as a tree mixes them.

use super::{Next, Op, Workload};
use wb_engine::Instant;

pub struct Remover {
    /// Size of each file, in unlink order.
    sizes: Vec<u64>,
    next: usize,
    unlink_cost_ns: u64,
    synced: bool,
}

impl Remover {
    pub fn new(
        files: u32,
        file_size: u64,
        big_files: u32,
        big_file_size: u64,
        unlink_cost_ns: u64,
    ) -> Remover {
        let total = files as usize + big_files as usize;
        let mut sizes = vec![file_size; total];
        // Big file k at the k-th of big_files + 1 equal parts of the tree.
        for k in 0..big_files as usize {
            sizes[(k + 1) * total / (big_files as usize + 1)] = big_file_size;
        }
        Remover {
            sizes,
            next: 0,
            unlink_cost_ns,
            synced: false,
        }
    }
}

impl Workload for Remover {
    fn next(&mut self, _now: Instant) -> Next {
        if self.next == self.sizes.len() {
            if self.synced {
                return Next::Finished;
            }
            self.synced = true;
            return Next::Op(Op::Sync);
        }
        self.next += 1;
        Next::Op(Op::Unlink {
            file: self.next - 1,
            cost_ns: self.unlink_cost_ns,
        })
    }

    fn files(&self) -> Vec<(u64, u64)> {
        self.sizes.iter().map(|&s| (s, s)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unlinks_every_file_once_in_order_with_big_ones_spread() {
        let mut r = Remover::new(8, 4096, 2, 1 << 30, 20_000);
        let sizes: Vec<u64> = r.files().iter().map(|f| f.0).collect();
        assert_eq!(sizes.len(), 10);
        let big: Vec<usize> = (0..10).filter(|&i| sizes[i] == 1 << 30).collect();
        assert_eq!(big, [3, 6]);
        for i in 0..10 {
            assert_eq!(
                r.next(Instant(0)),
                Next::Op(Op::Unlink {
                    file: i,
                    cost_ns: 20_000
                })
            );
        }
        assert_eq!(r.next(Instant(0)), Next::Op(Op::Sync));
        assert_eq!(r.next(Instant(0)), Next::Finished);
    }
}
