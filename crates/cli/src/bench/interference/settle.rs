//! Between two runs: the disk given the same state and time to go quiet.

use crate::bench::fio::{self, Fio};
use crate::bench::{drop_caches, BenchError, SplitMix64};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use std::path::Path;
use std::time::{Duration, Instant};

/// A read slower than this means the disk is still busy with earlier work.
const QUIET_READ: Duration = Duration::from_millis(2);
/// Reads in a row under QUIET_READ that make the disk quiet.
const QUIET_READS: u32 = 256;
/// Longest wait for a quiet disk before running anyway (with a note).
const QUIET_WAIT_MAX: Duration = Duration::from_secs(60);

/// How a settle went.
pub struct Settled {
    /// Whether fstrim worked.
    pub trimmed: bool,
    /// Whether the disk went quiet; an error if that could not be checked.
    pub quiet: std::io::Result<bool>,
}

impl Settled {
    /// Why the run that follows may meet a busy disk, if it may.
    pub fn busy(&self) -> Option<String> {
        match &self.quiet {
            Ok(true) => None,
            Ok(false) => Some(format!(
                "the disk was still busy after {} s of waiting (reads over {} ms)",
                QUIET_WAIT_MAX.as_secs(),
                QUIET_READ.as_millis()
            )),
            Err(e) => Some(format!("could not check that the disk is quiet ({e})")),
        }
    }
}

/// Lets the disk catch up between runs: everything written so far made
/// durable, the filesystem's free space trimmed, the page cache dropped,
/// then the disk given time to go quiet.
///
/// The trim gives every run the same start. Without it, only the first
/// writer on a fresh filesystem over a loop device makes the loop's image
/// file allocate its blocks, and the runs after it merely overwrite them:
/// on this machine the kernel's reader p99 is 15-22 ms on first touch and
/// 0.05 ms on overwrite (BENCHMARKS.md), so the order of the configurations
/// decided the result. The quiet check keeps the previous run's aftermath
/// (the image's own writeback, the trim's hole punching) out of the next
/// run: on this machine a first read after a big run once took 9 s.
///
/// The drop gives every run the same cache: a loop device writing its
/// image through the page cache keeps there what earlier runs read of the
/// reader's file, so a run after a reading one read from memory (the
/// kernel's reader p50 0.014 ms against the floor's 0.070 ms, 2026-11-25)
/// while runs after 8 GiB writers, which pushed it out, read from the disk:
/// the order of the configurations decided again. fio then runs a few
/// reads: after the drop its own program is no longer in memory, and
/// reading it back beside a writer kept the reader from starting for
/// seconds.
pub fn settle(fio: &Fio, dir: &Path, reader_file: &Path) -> Result<Settled, BenchError> {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    let trimmed = std::process::Command::new("fstrim")
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    drop_caches()?;
    let mut warm_up = fio::reader_args(reader_file, 1);
    warm_up.push("--number_ios=16".into());
    fio.spawn(dir, "warm-up", &warm_up)?.finish()?;
    std::thread::sleep(Duration::from_secs(2));
    Ok(Settled {
        trimmed,
        quiet: wait_quiet(reader_file),
    })
}

/// Reads 4 KiB blocks of `reader_file` with O_DIRECT until QUIET_READS in
/// a row each take under QUIET_READ, at most QUIET_WAIT_MAX. Returns
/// whether the disk went quiet; an error if the file cannot be read.
fn wait_quiet(reader_file: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let file = writeback::io::open_direct(reader_file, false)?;
    let blocks = file.metadata()?.len() / 4096;
    if blocks == 0 {
        return Err(std::io::Error::other("the reader's file is empty"));
    }
    let mut buf = writeback::io::AlignedBuf::new(4096);
    let mut rng = SplitMix64::seed_from_u64(0x9e3779b9);
    let deadline = Instant::now() + QUIET_WAIT_MAX;
    let mut in_row = 0;
    while in_row < QUIET_READS {
        if Instant::now() >= deadline {
            return Ok(false);
        }
        let offset = rng.next_u64() % blocks * 4096;
        let started = Instant::now();
        file.read_exact_at(buf.as_mut_slice(), offset)?;
        in_row = if started.elapsed() < QUIET_READ {
            in_row + 1
        } else {
            0
        };
    }
    Ok(true)
}
