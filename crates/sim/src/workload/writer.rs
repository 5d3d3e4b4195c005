//! Writer: files one after another, in blocks, each block once, in order
//! or in a random order; optionally an fsync after each file and a sync()
//! at the end.

use super::{Next, Op, Workload};
use crate::rng::Rng;
use wb_engine::Instant;

pub struct Writer {
    files: usize,
    file_size: u64,
    block_size: u64,
    sync: bool,
    fsync_each: bool,
    file: usize,
    /// Blocks of the current file written so far.
    written: u64,
    order: Option<BlockOrder>,
    fsync_pending: bool,
    synced: bool,
}

/// A random order of the blocks `0..n` with no memory per block: a
/// full-period linear congruential sequence modulo the next power of two,
/// skipping values of `n` or more (cycle walking).
struct BlockOrder {
    n: u64,
    mask: u64,
    state: u64,
    /// Odd, so the sequence has full period (Hull–Dobell with a ≡ 1 mod 4).
    increment: u64,
}

impl BlockOrder {
    /// Multiplier ≡ 1 (mod 4): with an odd increment, every value of the
    /// modulus comes once per period.
    const MULTIPLIER: u64 = 6_364_136_223_846_793_005;

    fn new(n: u64, rng: &mut Rng) -> BlockOrder {
        assert!(n >= 1);
        let mask = n.next_power_of_two() - 1;
        BlockOrder {
            n,
            mask,
            state: rng.next_u64() & mask,
            increment: rng.next_u64() | 1,
        }
    }

    fn next(&mut self) -> u64 {
        loop {
            self.state = self
                .state
                .wrapping_mul(Self::MULTIPLIER)
                .wrapping_add(self.increment)
                & self.mask;
            if self.state < self.n {
                return self.state;
            }
        }
    }
}

impl Writer {
    /// `random`: the blocks of each file in a random order drawn from it.
    pub fn new(
        files: u32,
        file_size: u64,
        block_size: u64,
        sync: bool,
        fsync_each: bool,
        random: Option<Rng>,
    ) -> Writer {
        assert!(files >= 1 && file_size > 0 && block_size > 0);
        let order = random.map(|mut rng| BlockOrder::new(file_size.div_ceil(block_size), &mut rng));
        Writer {
            files: files as usize,
            file_size,
            block_size,
            sync,
            fsync_each,
            file: 0,
            written: 0,
            order,
            fsync_pending: false,
            synced: false,
        }
    }

    fn blocks(&self) -> u64 {
        self.file_size.div_ceil(self.block_size)
    }
}

impl Workload for Writer {
    fn next(&mut self, _now: Instant) -> Next {
        if self.fsync_pending {
            self.fsync_pending = false;
            return Next::Op(Op::Fsync {
                file: self.file - 1,
            });
        }
        if self.file < self.files {
            let block = match self.order.as_mut() {
                Some(order) => order.next(),
                None => self.written,
            };
            let offset = block * self.block_size;
            let op = Op::Write {
                file: self.file,
                offset,
                len: self.block_size.min(self.file_size - offset),
            };
            self.written += 1;
            if self.written == self.blocks() {
                self.file += 1;
                self.written = 0;
                self.fsync_pending = self.fsync_each;
            }
            return Next::Op(op);
        }
        if self.sync && !self.synced {
            self.synced = true;
            return Next::Op(Op::Sync);
        }
        Next::Finished
    }

    fn files(&self) -> Vec<(u64, u64)> {
        vec![(0, self.file_size); self.files]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_files_in_blocks_then_syncs() {
        let mut w = Writer::new(2, 10, 4, true, true, None);
        let mut ops = Vec::new();
        while let Next::Op(op) = w.next(Instant(0)) {
            ops.push(op);
        }
        assert_eq!(
            ops,
            vec![
                Op::Write {
                    file: 0,
                    offset: 0,
                    len: 4
                },
                Op::Write {
                    file: 0,
                    offset: 4,
                    len: 4
                },
                Op::Write {
                    file: 0,
                    offset: 8,
                    len: 2
                },
                Op::Fsync { file: 0 },
                Op::Write {
                    file: 1,
                    offset: 0,
                    len: 4
                },
                Op::Write {
                    file: 1,
                    offset: 4,
                    len: 4
                },
                Op::Write {
                    file: 1,
                    offset: 8,
                    len: 2
                },
                Op::Fsync { file: 1 },
                Op::Sync,
            ]
        );
    }

    #[test]
    fn random_order_writes_every_block_once() {
        for (size, block) in [(10, 4), (4096 * 1000, 4096), (1 << 20, 1 << 20)] {
            let mut w = Writer::new(1, size, block, false, false, Some(Rng::new(7)));
            let mut offsets = Vec::new();
            while let Next::Op(Op::Write { offset, len, .. }) = w.next(Instant(0)) {
                assert_eq!(len, block.min(size - offset));
                offsets.push(offset);
            }
            let in_order: Vec<u64> = (0..size.div_ceil(block)).map(|b| b * block).collect();
            if offsets.len() > 2 {
                assert_ne!(offsets, in_order, "not sequential");
            }
            offsets.sort_unstable();
            assert_eq!(offsets, in_order);
        }
    }
}
