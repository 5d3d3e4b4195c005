//! Reader of a cold file: sequential (wrapping at the end) or random
//! blocks, optionally at a fixed rate.

use super::{Next, Op, Workload};
use crate::rng::Rng;
use wb_engine::time::NS_PER_SEC;
use wb_engine::Instant;

pub struct Reader {
    file_size: u64,
    block_size: u64,
    random: Option<Rng>,
    interval_ns: Option<u64>,
    offset: u64,
    next_due: Option<Instant>,
}

impl Reader {
    pub fn new(
        file_size: u64,
        block_size: u64,
        random: Option<Rng>,
        rate_iops: Option<u64>,
    ) -> Reader {
        assert!(file_size >= block_size && block_size > 0);
        Reader {
            file_size,
            block_size,
            random,
            interval_ns: rate_iops.map(|r| NS_PER_SEC / r.max(1)),
            offset: 0,
            next_due: None,
        }
    }
}

impl Workload for Reader {
    fn next(&mut self, now: Instant) -> Next {
        if let Some(due) = self.next_due {
            if due > now {
                return Next::Until(due);
            }
        }
        if let Some(interval) = self.interval_ns {
            // fio-style rate: ops on a fixed schedule; a late op does not shift it.
            let due = self.next_due.unwrap_or(now) + interval;
            self.next_due = Some(due.max(now));
        }
        let blocks = self.file_size / self.block_size;
        let offset = match self.random.as_mut() {
            Some(rng) => rng.below(blocks) * self.block_size,
            None => {
                if self.offset + self.block_size > self.file_size {
                    self.offset = 0;
                }
                let o = self.offset;
                self.offset += self.block_size;
                o
            }
        };
        Next::Op(Op::Read {
            file: 0,
            offset,
            len: self.block_size,
        })
    }

    fn files(&self) -> Vec<(u64, u64)> {
        vec![(self.file_size, self.file_size)]
    }

    /// A sequential reader without a rate reads the next blocks up to the
    /// end of the file whatever the time.
    fn repeats(&self) -> u64 {
        if self.random.is_some() || self.interval_ns.is_some() {
            return 0;
        }
        (self.file_size - self.offset.min(self.file_size)) / self.block_size
    }

    fn skip(&mut self, n: u64) {
        assert!(
            n <= self.repeats(),
            "skipping {n} reads the reader would not make"
        );
        self.offset += n * self.block_size;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_wraps_and_rate_spaces_ops() {
        let mut r = Reader::new(8, 4, None, Some(10));
        let t0 = Instant(0);
        assert_eq!(
            r.next(t0),
            Next::Op(Op::Read {
                file: 0,
                offset: 0,
                len: 4
            })
        );
        assert_eq!(r.next(t0), Next::Until(Instant(NS_PER_SEC / 10)));
        let t1 = Instant(NS_PER_SEC / 10);
        assert_eq!(
            r.next(t1),
            Next::Op(Op::Read {
                file: 0,
                offset: 4,
                len: 4
            })
        );
        let t2 = Instant(NS_PER_SEC / 5);
        assert_eq!(
            r.next(t2),
            Next::Op(Op::Read {
                file: 0,
                offset: 0,
                len: 4
            })
        );
    }
}
