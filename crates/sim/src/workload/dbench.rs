//! A dbench-like client (Wong 2013's benchmark): rewrites blocks of a few
//! small files at random, reads back the block it wrote last now and then
//! (dbench reads what it wrote: from the cache), and flushes (fsyncs) the
//! file it wrote last every so often.

use super::{Next, Op, Workload};
use crate::rng::Rng;
use wb_engine::Instant;

pub struct Dbench {
    files: usize,
    file_size: u64,
    block_size: u64,
    read_every: u64,
    flush_every: u64,
    remaining: u64,
    done: u64,
    /// The block written last: (file, offset).
    last_written: (usize, u64),
    rng: Rng,
}

impl Dbench {
    pub fn new(
        files: u32,
        file_size: u64,
        block_size: u64,
        read_every: u64,
        flush_every: u64,
        count: u64,
        rng: Rng,
    ) -> Dbench {
        assert!(files > 0 && block_size > 0 && file_size >= block_size && count > 0);
        Dbench {
            files: files as usize,
            file_size,
            block_size,
            read_every,
            flush_every,
            remaining: count,
            done: 0,
            last_written: (0, 0),
            rng,
        }
    }

    /// A random block of a random file: (file, offset).
    fn block(&mut self) -> (usize, u64) {
        let file = self.rng.below(self.files as u64) as usize;
        let blocks = self.file_size / self.block_size;
        (file, self.rng.below(blocks) * self.block_size)
    }
}

impl Workload for Dbench {
    fn next(&mut self, _now: Instant) -> Next {
        if self.remaining == 0 {
            return Next::Finished;
        }
        self.remaining -= 1;
        self.done += 1;
        let every = |n: u64, done: u64| n > 0 && done.is_multiple_of(n);
        let len = self.block_size;
        let (last_file, last_offset) = self.last_written;
        if every(self.flush_every, self.done) {
            return Next::Op(Op::Fsync { file: last_file });
        }
        if every(self.read_every, self.done) {
            return Next::Op(Op::Read {
                file: last_file,
                offset: last_offset,
                len,
            });
        }
        let (file, offset) = self.block();
        self.last_written = (file, offset);
        Next::Op(Op::Write { file, offset, len })
    }

    fn files(&self) -> Vec<(u64, u64)> {
        // The files exist at their size (reads of blocks never written find
        // data on the device), as dbench's are after its setup phase.
        vec![(self.file_size, self.file_size); self.files]
    }
}
