//! `wb bench`: measurements of the real runtime against the kernel.
//!
//! - `wb bench interference`: how much a big sequential writer hurts a
//!   4 KiB O_DIRECT random reader on the same filesystem, for the kernel's
//!   buffered writeback and for ours.
//! - `wb bench cached`: the cost of 4 KiB reads and writes of cached data,
//!   through the engine and through the kernel's page cache.
//! - `wb bench throughput --fuse`: bulk sequential and random throughput
//!   through `wb mount` and directly on the same directory.
//! - `wb bench interference --fuse`: the interference experiment with fio
//!   as writer and reader, on a directory and through `wb mount` of it.
//! - `wb bench cpu`: CPU seconds per GiB of the library's write path, for a
//!   throttled sequential write and a sync, each run in a child process.
//! - `wb bench dontcache`: sequential 1 MiB writes and an fdatasync,
//!   buffered, uncached (RWF_DONTCACHE) and O_DIRECT through the kernel,
//!   buffered and uncached through the engine: throughput, write latency,
//!   dirty peak and what stays cached.
//! - `wb bench unlink`: `rm -rf` of a tree of small and large files,
//!   directly and through `wb mount` (its backlog, with watermarks and
//!   with XFS 2021's flush-all): unlink latencies and the total.
//! - `wb bench replace`: a file's content replaced by renaming a new
//!   file over it, or by truncating and rewriting it, directly and through
//!   `wb mount`: what writing it back first (auto_da_alloc) costs.
//! - `wb bench db-copy`: a database's transactions (random 8 KiB reads
//!   and writes, fdatasync) quiet and beside an 8 GiB copy, directly and
//!   through `wb mount`: throughput, p99, the copy's speed and how much
//!   of the hot set stays cached.
//! - `wb bench requests`: the FUSE requests an operation costs through
//!   `wb mount` (4 KiB reads, a database's transaction, a small file's
//!   life) against the fewest it needs, and the operations' rates through
//!   the mount and directly.
//! - `wb bench sim-speed`: the simulator's simulated time per wall second
//!   on every scenario, alternating with another build's, and whether
//!   both computed the same reports.
//!
//! Every bench runs on one harness ([`harness`]): a bench is an
//! [`harness::Experiment`] (its configurations, how to prepare, run once
//! and restore), and the harness runs the configurations round by round,
//! says how each run went, takes the medians and prints the report.
//! Human progress goes to standard error; results (a table, or one JSON
//! object with `--json`) to standard output; `--html` writes the same
//! report as a page. Files the benchmarks create are removed at the end,
//! also on errors and on Ctrl-C, and every sysctl they change is restored
//! (see [`cleanup`]).

pub mod cached;
pub mod child;
pub mod cleanup;
pub mod cpu;
pub mod db_copy;
pub mod doc;
pub mod dontcache;
pub mod fio;
pub mod harness;
pub mod interference;
pub mod kernel_write;
pub mod mount;
pub mod mountinfo;
pub mod pagecache;
pub mod replace;
pub mod requests;
pub mod scheduler;
pub mod sim_speed;
pub mod stable;
pub mod sysctl;
pub mod table;
pub mod throughput;
pub mod unlink;

use crate::html_file::HtmlFile;
use crate::{EXIT_BAD_INPUT, EXIT_FAILURE};
use clap::{Args, Subcommand};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: BenchCommand,
    /// Also write the report as a self-contained HTML page with a bar chart
    /// per numeric column of each table (the configurations side by side).
    #[arg(long, global = true, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Reader latency next to a big sequential writer: kernel writeback vs the engine.
    Interference(interference::InterferenceArgs),
    /// 4 KiB reads and writes of cached data: the engine vs the kernel page cache.
    Cached(cached::CachedArgs),
    /// Bulk throughput through `wb mount` vs the kernel on the same directory (--fuse).
    Throughput(throughput::ThroughputArgs),
    /// CPU seconds per GiB of the library's write path (a throttled write + sync).
    Cpu(cpu::CpuArgs),
    /// Uncached (RWF_DONTCACHE) sequential writes: kernel vs engine, next to buffered and O_DIRECT.
    Dontcache(dontcache::DontcacheArgs),
    /// Rewrites of pages under writeback: writers' latency and CPU per GiB with stable_writes wait, none, snapshot.
    Stable(stable::StableArgs),
    /// rm -rf of a tree of small and large files: through `wb mount` (its backlog) vs the kernel.
    Unlink(unlink::UnlinkArgs),
    /// A database's transactions beside an 8 GiB copy: through `wb mount` vs the kernel; is the hot set still cached?
    DbCopy(db_copy::DbCopyArgs),
    /// Replacing a file's content (rename over it; truncate, rewrite, close): through `wb mount` vs the kernel.
    Replace(replace::ReplaceArgs),
    /// FUSE requests per operation through `wb mount` (reads, a database's loop, small files) against the fewest needed.
    Requests(requests::RequestsArgs),
    /// The simulator's speed (simulated / wall time) on every scenario, against another build's.
    SimSpeed(sim_speed::SimSpeedArgs),
}

/// Why a benchmark could not run or finish.
#[derive(Debug)]
pub enum BenchError {
    /// The user can fix it (arguments, directory, missing tool): exit 2.
    BadInput(String),
    /// Something failed while running: exit 1.
    Failed(String),
}

impl BenchError {
    pub fn failed(context: impl fmt::Display, e: impl fmt::Display) -> BenchError {
        BenchError::Failed(format!("{context}: {e}"))
    }

    pub fn exit_code(&self) -> ExitCode {
        match self {
            BenchError::BadInput(_) => ExitCode::from(EXIT_BAD_INPUT),
            BenchError::Failed(_) => ExitCode::from(EXIT_FAILURE),
        }
    }
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BenchError::BadInput(m) | BenchError::Failed(m) => f.write_str(m),
        }
    }
}

pub fn run(args: BenchArgs) -> ExitCode {
    if let Err(e) = cleanup::install_ctrlc_handler() {
        eprintln!("wb bench: {e}");
        return ExitCode::from(EXIT_FAILURE);
    }
    // Made before the benchmark: a path that cannot be written fails at once.
    let html = match args
        .html
        .map(|p| HtmlFile::create(p, "wb bench"))
        .transpose()
    {
        Ok(html) => html,
        Err(code) => return code,
    };
    let result = match args.command {
        BenchCommand::Interference(a) => interference::run(a, html),
        BenchCommand::Cached(a) => cached::run(a, html),
        BenchCommand::Throughput(a) => throughput::run(a, html),
        BenchCommand::Cpu(a) => cpu::run(a, html),
        BenchCommand::Dontcache(a) => dontcache::run(a, html),
        BenchCommand::Stable(a) => stable::run(a, html),
        BenchCommand::Unlink(a) => unlink::run(a, html),
        BenchCommand::DbCopy(a) => db_copy::run(a, html),
        BenchCommand::Replace(a) => replace::run(a, html),
        BenchCommand::Requests(a) => requests::run(a, html),
        BenchCommand::SimSpeed(a) => sim_speed::run(a, html),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wb bench: {e}");
            e.exit_code()
        }
    }
}

/// A progress line on standard error.
macro_rules! progress {
    ($($arg:tt)*) => {
        eprintln!("wb bench: {}", format_args!($($arg)*))
    };
}
pub(crate) use progress;

/// Parses a size argument ("2GiB", "512MiB", "1073741824") for clap.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let bytes = wb_engine::units::parse_bytes(text).map_err(|e| e.to_string())?;
    if bytes == 0 {
        return Err("size must be more than 0".into());
    }
    Ok(bytes)
}

/// Parses a positive whole number of seconds for clap.
pub fn parse_seconds(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(0) => Err("must be at least 1 second".into()),
        Ok(s) if s > 3600 => Err("at most 3600 seconds".into()),
        Ok(s) => Ok(s),
        Err(_) => Err(format!("'{text}' is not a whole number of seconds")),
    }
}

/// Parses a repeat count (1..=100) for clap.
pub fn parse_repeat(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=100).contains(&n) => Ok(n),
        _ => Err(format!("'{text}' is not a count from 1 to 100")),
    }
}

/// Creates `dir` if missing and checks that it is a writable directory on
/// a filesystem that supports O_DIRECT. Returns it made absolute (fio runs
/// with the same working directory, but messages read better).
pub fn prepare_dir(dir: &Path) -> Result<PathBuf, BenchError> {
    if dir.exists() && !dir.is_dir() {
        return Err(BenchError::BadInput(format!(
            "--dir {}: exists and is not a directory",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| {
        BenchError::BadInput(format!("--dir {}: cannot create it: {e}", dir.display()))
    })?;
    let dir = std::fs::canonicalize(dir)
        .map_err(|e| BenchError::BadInput(format!("--dir {}: {e}", dir.display())))?;
    if !writeback::io::supports_direct(&dir) {
        return Err(BenchError::BadInput(format!(
            "--dir {}: cannot create O_DIRECT files there (read-only, no permission, \
             or a filesystem without O_DIRECT such as tmpfs); pick a directory on a disk",
            dir.display()
        )));
    }
    Ok(dir)
}

/// Writes back and drops the kernel's page cache, so reads go to the disk.
pub fn drop_caches() -> Result<(), BenchError> {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").map_err(|e| {
        BenchError::BadInput(format!(
            "dropping the page cache (/proc/sys/vm/drop_caches) needs root: {e}"
        ))
    })
}

/// How long [`quiesce`] waits for the disks to go quiet.
const QUIESCE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);
/// Sectors written a second under which the disks count as quiet (1 MiB).
const QUIESCE_SECTORS: u64 = 2048;

/// Syncs, then waits (at most [`QUIESCE_TIMEOUT`]) until the machine's
/// block devices write less than 1 MiB in a second: what an earlier phase
/// left behind (a loop device's image written back by the host
/// filesystem, XFS pushing its log's metadata in place) must not land in
/// the next phase's measurements. Returns the seconds waited.
pub fn quiesce() -> Result<f64, BenchError> {
    let start = std::time::Instant::now();
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    let mut written = sectors_written()?;
    while start.elapsed() < QUIESCE_TIMEOUT {
        std::thread::sleep(std::time::Duration::from_secs(1));
        // SAFETY: as above.
        unsafe { libc::sync() };
        let now = sectors_written()?;
        if now.saturating_sub(written) < QUIESCE_SECTORS {
            return Ok(start.elapsed().as_secs_f64());
        }
        written = now;
    }
    progress!(
        "the disks were still writing after {} s; measuring anyway",
        QUIESCE_TIMEOUT.as_secs()
    );
    Ok(start.elapsed().as_secs_f64())
}

/// Sectors written by every whole block device so far (/proc/diskstats,
/// the tenth field; partitions are left out, their writes are their
/// disk's).
fn sectors_written() -> Result<u64, BenchError> {
    let text = std::fs::read_to_string("/proc/diskstats")
        .map_err(|e| BenchError::failed("/proc/diskstats", e))?;
    Ok(text
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let name = fields.get(2)?;
            let whole = std::path::Path::new("/sys/block").join(name).exists();
            whole.then(|| fields.get(9)?.parse::<u64>().ok()).flatten()
        })
        .sum())
}

/// Whether --dir has room for a run's file of `size` bytes with `margin`
/// to spare.
pub fn check_room(dir: &Path, size: u64, margin: u64) -> Result<(), BenchError> {
    let free = free_bytes(dir)?;
    if free < size.saturating_add(margin) {
        return Err(BenchError::BadInput(format!(
            "--dir {}: not enough free space: {} available, a run needs --size {} plus {} \
             to spare; pick a smaller --size or another --dir",
            dir.display(),
            wb_engine::units::format_bytes(free),
            wb_engine::units::format_bytes(size),
            wb_engine::units::format_bytes(margin)
        )));
    }
    Ok(())
}

/// Bytes available to us on the filesystem holding `dir`.
pub fn free_bytes(dir: &Path) -> Result<u64, BenchError> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| BenchError::BadInput(format!("{}: path contains a NUL", dir.display())))?;
    // SAFETY: statvfs only writes into the struct we pass; the path is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    if rc != 0 {
        return Err(BenchError::failed(
            format!("statvfs {}", dir.display()),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

/// The median of `values` (mean of the two middle ones for an even count); 0 if empty.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Deterministic random numbers for offsets and fill data (SplitMix64:
/// `seed_from_u64`, `next_u64`, `fill_bytes`).
pub use rand_xoshiro::SplitMix64;

pub const MIB: f64 = 1024.0 * 1024.0;

/// KNOB=VALUE, checked against the engine's knobs.
pub(crate) fn parse_engine_set(text: &str) -> Result<(String, String), String> {
    let (knob, value) = text
        .split_once('=')
        .ok_or_else(|| format!("'{text}': expected KNOB=VALUE"))?;
    let checked = if wb_engine::Config::KNOBS.contains(&knob) {
        wb_engine::Config::default().set(knob, value)
    } else {
        wb_engine::DeviceConfig::default().set(knob, value)
    };
    checked.map_err(|e| e.to_string())?;
    Ok((knob.to_string(), value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn sizes_and_counts_parse_or_explain() {
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert!(parse_size("0").is_err());
        assert!(parse_size("lots").is_err());
        assert_eq!(parse_seconds("5"), Ok(5));
        assert!(parse_seconds("0").is_err());
        assert!(parse_repeat("0").is_err());
        assert_eq!(parse_repeat("3"), Ok(3));
    }

    #[test]
    fn prepare_dir_rejects_a_file() {
        let path = std::env::temp_dir().join(format!("wb-bench-notadir-{}", std::process::id()));
        std::fs::write(&path, b"x").expect("temp file");
        let err = prepare_dir(&path).expect_err("a file is not a directory");
        assert!(matches!(err, BenchError::BadInput(_)), "{err}");
        let _ = std::fs::remove_file(&path);
    }
}
