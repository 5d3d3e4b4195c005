//! FUSE over io_uring (Linux 6.14+, `fs/fuse/dev_uring.c`): the kernel
//! hands a request to a ring entry of the queue of the CPU that issued it,
//! and one COMMIT_AND_FETCH submission answers it and takes the next. Over
//! /dev/fuse a request wakes a serving thread wherever it sleeps and the
//! reply wakes the caller back: measured here (examples/uring_probe.rs),
//! a 4 KiB read's round trip is 12-16 us over /dev/fuse and 5-8 us over
//! io_uring.
//!
//! - INIT and the mount stay fuser's (fs.rs asks for FUSE_OVER_IO_URING
//!   in INIT); FORGET, BATCH_FORGET and INTERRUPT keep coming over
//!   /dev/fuse, where fuser's threads serve them.
//! - One queue per possible CPU (the kernel's count), `THREADS_PER_QUEUE`
//!   threads each, each pinned to its queue's CPU with its own ring and
//!   one entry: a request blocks only its own thread.
//! - wire.rs decodes and encodes, serve.rs calls the filesystem's
//!   operations (ops.rs, the same as over /dev/fuse), queue.rs runs a
//!   thread.
//!
//! The kernel sends requests over the rings only once every queue has an
//! entry registered; until then they come over /dev/fuse, and the mount
//! serves them there.

mod queue;
mod serve;
mod wire;

use crate::fs::WbFs;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

/// Serving threads per queue (per CPU).
pub const THREADS_PER_QUEUE: usize = 4;
/// The switch of FUSE over io_uring in the running kernel.
pub const ENABLE_PARAMETER: &str = "/sys/module/fuse/parameters/enable_uring";

/// Whether the running kernel serves FUSE over io_uring now; Err: why
/// not, in words a person can act on.
pub fn available() -> Result<(), String> {
    match std::fs::read_to_string(ENABLE_PARAMETER) {
        Ok(v) if v.trim() == "Y" => Ok(()),
        Ok(_) => Err(format!(
            "FUSE over io_uring is off in this kernel ({ENABLE_PARAMETER} is N); \
             as root: echo Y > {ENABLE_PARAMETER}"
        )),
        Err(e) => Err(format!(
            "this kernel has no FUSE over io_uring ({ENABLE_PARAMETER}: {e}; it needs \
             Linux 6.14 or later built with CONFIG_FUSE_IO_URING)"
        )),
    }
}

/// The kernel's queue count: how many CPUs are possible (`0-3` in
/// /sys/devices/system/cpu/possible is 4).
fn possible_cpus(text: &str) -> Option<usize> {
    let mut count = 0usize;
    for part in text.trim().split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?),
            None => {
                let a = part.parse::<usize>().ok()?;
                (a, a)
            }
        };
        count = count.checked_add(b.checked_sub(a)? + 1)?;
    }
    (count > 0).then_some(count)
}

/// Starts serving `fs` from rings on the connection of `device` (a
/// /dev/fuse descriptor of the session), `THREADS_PER_QUEUE` threads per
/// queue, each with room for the largest request (`payload_bytes`).
pub fn spawn(
    fs: Arc<WbFs>,
    device: Arc<OwnedFd>,
    payload_bytes: usize,
) -> std::io::Result<Vec<JoinHandle<std::io::Result<()>>>> {
    let cpus = std::fs::read_to_string(Path::new("/sys/devices/system/cpu/possible"))
        .ok()
        .and_then(|t| possible_cpus(&t))
        .ok_or_else(|| std::io::Error::other("cannot read the possible CPUs"))?;
    let queues = u16::try_from(cpus).map_err(|_| std::io::Error::other("too many CPUs"))?;
    let mut threads = Vec::new();
    for qid in 0..queues {
        for t in 0..THREADS_PER_QUEUE {
            let (fs, device) = (Arc::clone(&fs), Arc::clone(&device));
            threads.push(
                std::thread::Builder::new()
                    .name(format!("wb-ring-{qid}.{t}"))
                    .spawn(move || {
                        let served = queue::serve(fs, device, qid, payload_bytes);
                        if let Err(e) = &served {
                            // The kernel uses the rings only once every
                            // queue has an entry: requests stay on
                            // /dev/fuse, where they are served all the same.
                            eprintln!("wb-fuse: io_uring queue {qid}: {e}");
                        }
                        served
                    })?,
            );
        }
    }
    Ok(threads)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn possible_cpus_counts_ranges_and_lists() {
        assert_eq!(possible_cpus("0-1\n"), Some(2));
        assert_eq!(possible_cpus("0"), Some(1));
        assert_eq!(possible_cpus("0-3,8-11"), Some(8));
        assert_eq!(possible_cpus(""), None);
        assert_eq!(possible_cpus("x"), None);
    }
}
