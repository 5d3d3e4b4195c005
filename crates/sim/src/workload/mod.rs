//! Workloads: what each job asks of the cache, one operation at a time.
//! A workload only decides the next operation; the runner performs it on
//! the engine and measures it.

mod fsync_loop;
mod occasional;
mod reader;
mod writer;

pub use fsync_loop::FsyncLoop;
pub use occasional::OccasionalWriter;
pub use reader::Reader;
pub use writer::Writer;

use wb_engine::Instant;

/// One operation on the job's files (indices into the job's file list).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Write { file: usize, offset: u64, len: u64 },
    Read { file: usize, offset: u64, len: u64 },
    Fsync { file: usize },
    Sync,
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
}
