//! Workloads: what each job asks of the cache, one operation at a time.
//! A workload only decides the next operation; the runner performs it on
//! the engine and measures it.

mod dbench;
mod fsync_loop;
mod occasional;
mod reader;
mod remover;
mod writer;

pub use dbench::Dbench;
pub use fsync_loop::FsyncLoop;
pub use occasional::OccasionalWriter;
pub use reader::Reader;
pub use remover::Remover;
pub use writer::Writer;

use crate::rng::Rng;
use wb_engine::Instant;
use wb_scenario::JobKind;

/// One operation on the job's files (indices into the job's file list).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Write {
        file: usize,
        offset: u64,
        len: u64,
    },
    Read {
        file: usize,
        offset: u64,
        len: u64,
    },
    Fsync {
        file: usize,
    },
    Sync,
    /// Remove the file's last name (closing the job's handle first);
    /// `cost_ns` is the caller's own time for it.
    Unlink {
        file: usize,
        cost_ns: u64,
    },
}

/// What a workload wants next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    Op(Op),
    /// Nothing until this time (think time, rate limit, interval).
    Until(Instant),
    Finished,
}

/// A job's decision maker.
pub trait Workload {
    /// The next thing to do at `now`.
    fn next(&mut self, now: Instant) -> Next;
    /// File sizes to create: (initial size on the device, extent to reserve).
    fn files(&self) -> Vec<(u64, u64)>;
    /// How many operations like the one `next` just returned, each at the
    /// next offset (its offset plus its length, and so on), `next` would
    /// return one after another from now on whatever the time. A runner may
    /// perform some of them without asking, then says how many (`skip`).
    fn repeats(&self) -> u64 {
        0
    }
    /// The runner performed the first `n` of `repeats` without asking.
    fn skip(&mut self, n: u64) {
        debug_assert_eq!(n, 0, "a workload without repeats");
    }
}

/// The workload of a scenario job. `rng` drives random offsets.
pub fn for_job(kind: &JobKind, rng: Rng) -> Box<dyn Workload + Send> {
    match *kind {
        JobKind::Writer {
            files,
            file_size,
            block_size,
            random,
            sync,
            fsync_each,
        } => Box::new(Writer::new(
            files,
            file_size,
            block_size,
            sync,
            fsync_each,
            random.then_some(rng),
        )),
        JobKind::Reader {
            file_size,
            block_size,
            random,
            rate_iops,
        } => Box::new(Reader::new(
            file_size,
            block_size,
            random.then_some(rng),
            rate_iops,
        )),
        JobKind::OccasionalWriter {
            block_size,
            interval_ns,
            count,
        } => Box::new(OccasionalWriter::new(block_size, interval_ns, count)),
        JobKind::FsyncLoop {
            block_size,
            interval_ns,
            count,
        } => Box::new(FsyncLoop::new(block_size, interval_ns, count)),
        JobKind::Dbench {
            files,
            file_size,
            block_size,
            read_every,
            flush_every,
            count,
        } => Box::new(Dbench::new(
            files,
            file_size,
            block_size,
            read_every,
            flush_every,
            count,
            rng,
        )),
        JobKind::Remover {
            files,
            file_size,
            big_files,
            big_file_size,
            unlink_cost_ns,
        } => Box::new(Remover::new(
            files,
            file_size,
            big_files,
            big_file_size,
            unlink_cost_ns,
        )),
    }
}
