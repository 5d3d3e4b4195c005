//! The kernel's requests by opcode: how many the mount served and how
//! long serving them took, from the call into the filesystem's operation
//! until its answer is ready (sending the reply is not included)
//! (`.writeback/stats`, lines `fuse_request_<opcode>_…`; `.writeback/metrics`,
//! `wb_fuse_requests_total` and the histogram
//! `wb_fuse_request_duration_seconds`, in the engine's log2 buckets of
//! µs, `wb_engine::StallStats::bucket`).
//!
//! Every request the filesystem sees is counted once, under the kernel's
//! name for its opcode (FUSE_LOOKUP is `lookup`). fuser answers two kinds
//! itself, which are not counted: INTERRUPT and NOTIFY_REPLY. RENAME and
//! RENAME2 reach the filesystem as one call and are counted as `rename`,
//! SETLK and SETLKW as `setlk`, and a BATCH_FORGET as one `forget` per
//! inode it names (fuser 0.18 hands it over so: its `ForgetOne` is
//! private).
//!
//! Counting costs two clock reads and four relaxed atomic operations per
//! request (count, total, max, and the time's bucket: a leading-zeros
//! count picks it, no lock, no allocation), against tens of microseconds for a round trip through
//! /dev/fuse.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use wb_engine::{StallStats, STALL_BUCKETS};

/// The kernel's opcodes the filesystem serves, by the kernel's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Opcode {
    Lookup,
    Forget,
    Getattr,
    Setattr,
    Readlink,
    Symlink,
    Mknod,
    Mkdir,
    Unlink,
    Rmdir,
    Rename,
    Link,
    Open,
    Read,
    Write,
    Statfs,
    Release,
    Fsync,
    Setxattr,
    Getxattr,
    Listxattr,
    Removexattr,
    Flush,
    Init,
    Opendir,
    Readdir,
    Releasedir,
    Fsyncdir,
    Getlk,
    Setlk,
    Access,
    Create,
    Bmap,
    Destroy,
    Ioctl,
    Poll,
    Fallocate,
    Readdirplus,
    Lseek,
    CopyFileRange,
    /// Any other opcode (answered ENOSYS).
    Other,
}

impl Opcode {
    /// Every opcode, in the kernel's numbering order, then the rest.
    pub const ALL: [Opcode; 41] = [
        Opcode::Lookup,
        Opcode::Forget,
        Opcode::Getattr,
        Opcode::Setattr,
        Opcode::Readlink,
        Opcode::Symlink,
        Opcode::Mknod,
        Opcode::Mkdir,
        Opcode::Unlink,
        Opcode::Rmdir,
        Opcode::Rename,
        Opcode::Link,
        Opcode::Open,
        Opcode::Read,
        Opcode::Write,
        Opcode::Statfs,
        Opcode::Release,
        Opcode::Fsync,
        Opcode::Setxattr,
        Opcode::Getxattr,
        Opcode::Listxattr,
        Opcode::Removexattr,
        Opcode::Flush,
        Opcode::Init,
        Opcode::Opendir,
        Opcode::Readdir,
        Opcode::Releasedir,
        Opcode::Fsyncdir,
        Opcode::Getlk,
        Opcode::Setlk,
        Opcode::Access,
        Opcode::Create,
        Opcode::Bmap,
        Opcode::Destroy,
        Opcode::Ioctl,
        Opcode::Poll,
        Opcode::Fallocate,
        Opcode::Readdirplus,
        Opcode::Lseek,
        Opcode::CopyFileRange,
        Opcode::Other,
    ];

    /// The kernel's name without its `FUSE_` prefix, in lower case.
    pub fn name(self) -> &'static str {
        match self {
            Opcode::Lookup => "lookup",
            Opcode::Forget => "forget",
            Opcode::Getattr => "getattr",
            Opcode::Setattr => "setattr",
            Opcode::Readlink => "readlink",
            Opcode::Symlink => "symlink",
            Opcode::Mknod => "mknod",
            Opcode::Mkdir => "mkdir",
            Opcode::Unlink => "unlink",
            Opcode::Rmdir => "rmdir",
            Opcode::Rename => "rename",
            Opcode::Link => "link",
            Opcode::Open => "open",
            Opcode::Read => "read",
            Opcode::Write => "write",
            Opcode::Statfs => "statfs",
            Opcode::Release => "release",
            Opcode::Fsync => "fsync",
            Opcode::Setxattr => "setxattr",
            Opcode::Getxattr => "getxattr",
            Opcode::Listxattr => "listxattr",
            Opcode::Removexattr => "removexattr",
            Opcode::Flush => "flush",
            Opcode::Init => "init",
            Opcode::Opendir => "opendir",
            Opcode::Readdir => "readdir",
            Opcode::Releasedir => "releasedir",
            Opcode::Fsyncdir => "fsyncdir",
            Opcode::Getlk => "getlk",
            Opcode::Setlk => "setlk",
            Opcode::Access => "access",
            Opcode::Create => "create",
            Opcode::Bmap => "bmap",
            Opcode::Destroy => "destroy",
            Opcode::Ioctl => "ioctl",
            Opcode::Poll => "poll",
            Opcode::Fallocate => "fallocate",
            Opcode::Readdirplus => "readdirplus",
            Opcode::Lseek => "lseek",
            Opcode::CopyFileRange => "copy_file_range",
            Opcode::Other => "other",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One opcode's figures so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Served {
    pub count: u64,
    /// Time spent serving them, in all.
    pub total_ns: u64,
    /// The longest one.
    pub max_ns: u64,
    /// How many took a time in each log2 bucket of µs (`StallStats`).
    pub buckets: [u64; STALL_BUCKETS],
}

/// The figures of every opcode, shared by the serving threads.
#[derive(Debug)]
pub(crate) struct Requests {
    /// Of all, those that came over io_uring (uring/).
    over_uring: AtomicU64,
    count: [AtomicU64; Opcode::ALL.len()],
    total_ns: [AtomicU64; Opcode::ALL.len()],
    max_ns: [AtomicU64; Opcode::ALL.len()],
    buckets: [[AtomicU64; STALL_BUCKETS]; Opcode::ALL.len()],
}

impl Default for Requests {
    fn default() -> Requests {
        Requests {
            over_uring: AtomicU64::new(0),
            count: std::array::from_fn(|_| AtomicU64::new(0)),
            total_ns: std::array::from_fn(|_| AtomicU64::new(0)),
            max_ns: std::array::from_fn(|_| AtomicU64::new(0)),
            buckets: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
        }
    }
}

impl Requests {
    /// A request of `op` being served: counted when the guard drops (after
    /// the filesystem has replied).
    pub fn start(&self, op: Opcode) -> Serving<'_> {
        Serving {
            requests: self,
            op,
            started: Instant::now(),
        }
    }

    fn record(&self, op: Opcode, ns: u64) {
        let i = op.index();
        self.count[i].fetch_add(1, Ordering::Relaxed);
        self.total_ns[i].fetch_add(ns, Ordering::Relaxed);
        self.max_ns[i].fetch_max(ns, Ordering::Relaxed);
        self.buckets[i][StallStats::bucket(ns)].fetch_add(1, Ordering::Relaxed);
    }

    /// A request came over io_uring.
    pub fn count_over_uring(&self) {
        self.over_uring.fetch_add(1, Ordering::Relaxed);
    }

    /// How many requests came over io_uring so far.
    pub fn over_uring(&self) -> u64 {
        self.over_uring.load(Ordering::Relaxed)
    }

    /// The figures of `op` so far (each figure read on its own: a request
    /// finishing meanwhile may show in one and not yet in another).
    pub fn served(&self, op: Opcode) -> Served {
        let i = op.index();
        Served {
            count: self.count[i].load(Ordering::Relaxed),
            total_ns: self.total_ns[i].load(Ordering::Relaxed),
            max_ns: self.max_ns[i].load(Ordering::Relaxed),
            buckets: std::array::from_fn(|k| self.buckets[i][k].load(Ordering::Relaxed)),
        }
    }
}

/// A request being served (`Requests::start`).
#[must_use = "the request is counted when this drops"]
pub(crate) struct Serving<'a> {
    requests: &'a Requests,
    op: Opcode,
    started: Instant,
}

impl Drop for Serving<'_> {
    fn drop(&mut self) {
        let ns = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.requests.record(self.op, ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_opcode_has_its_own_slot_and_name() {
        for (i, op) in Opcode::ALL.iter().enumerate() {
            assert_eq!(op.index(), i, "{op:?} out of order in ALL");
        }
        let mut names: Vec<_> = Opcode::ALL.iter().map(|op| op.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Opcode::ALL.len(), "two opcodes share a name");
    }

    #[test]
    fn a_request_counts_once_when_served_with_its_time() {
        let requests = Requests::default();
        {
            let _serving = requests.start(Opcode::Read);
            assert_eq!(requests.served(Opcode::Read).count, 0, "not until replied");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        drop(requests.start(Opcode::Read));
        let read = requests.served(Opcode::Read);
        assert_eq!(read.count, 2);
        assert!(read.max_ns >= 2_000_000, "{read:?}");
        assert!(read.total_ns >= read.max_ns, "{read:?}");
        assert_eq!(read.buckets.iter().sum::<u64>(), 2, "{read:?}");
        // 2 ms or more: [2048, 4096) µs or above.
        assert_eq!(read.buckets[..12].iter().sum::<u64>(), 1, "{read:?}");
        assert_eq!(requests.served(Opcode::Write), Served::default());
    }
}
