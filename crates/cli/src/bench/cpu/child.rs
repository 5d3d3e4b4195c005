//! The child's side of a run, and the parent's view of it: the child
//! process (this binary again, `--child FILE`) writes the file and reports
//! its wall time; the parent reads its CPU time from the kernel's
//! accounting of reaped children.

use super::{writeout_name, CpuArgs, Run, Sizes, DATA_FILE, REPORT_FILE, SEED};
use crate::bench::child::ChildGuard;
use crate::bench::cleanup::TempFile;
use crate::bench::{BenchError, SplitMix64};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;
use writeback::{Cache, OpenOptions};

/// What a child reports on its standard output.
pub struct ChildReport {
    pub wall_s: f64,
    pub written_bytes: u64,
    pub io_backend: String,
}

/// One run: a child process writes the file; returns its measurement.
pub fn run_child(
    args: &CpuArgs,
    sizes: Sizes,
    dir: &Path,
) -> Result<(Run, ChildReport), BenchError> {
    // Both files are removed when this returns, however it returns.
    let data = TempFile::new(dir.join(DATA_FILE));
    let report_file = TempFile::new(dir.join(REPORT_FILE));
    // A file left by a killed earlier run would not be new.
    match std::fs::remove_file(data.path()) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(BenchError::failed(data.path().display(), e))
        }
        _ => {}
    }
    let stdout = std::fs::File::create(report_file.path())
        .map_err(|e| BenchError::failed(report_file.path().display(), e))?;

    // This very binary, even if a rebuild has replaced the file since it started.
    let mut cmd = Command::new("/proc/self/exe");
    cmd.args(["bench", "cpu", "--child"])
        .arg(data.path())
        .arg("--size")
        .arg(sizes.size.to_string())
        .arg("--block-size")
        .arg(sizes.block_size.to_string())
        .arg("--memory")
        .arg(sizes.memory.to_string())
        .arg("--data-dir")
        .arg(&args.data_dir)
        .arg("--writeout")
        .arg(writeout_name(args.writeout))
        .stdin(Stdio::null())
        .stdout(stdout);
    if args.no_calibrate {
        cmd.arg("--no-calibrate");
    }

    let before = children_cpu()?;
    let mut child =
        ChildGuard::spawn(&mut cmd).map_err(|e| BenchError::failed("starting the child run", e))?;
    let status = child
        .wait()
        .map_err(|e| BenchError::failed("waiting for the child run", e))?;
    let after = children_cpu()?;
    if !status.success() {
        return Err(BenchError::Failed(format!(
            "the child run failed ({status}); its messages are above"
        )));
    }
    let text = std::fs::read_to_string(report_file.path())
        .map_err(|e| BenchError::failed(report_file.path().display(), e))?;
    let report = parse_child_report(&text)
        .map_err(|e| BenchError::Failed(format!("the child run's report '{text}': {e}")))?;
    let run = Run {
        user_s: (after.0 - before.0).max(0.0),
        sys_s: (after.1 - before.1).max(0.0),
        wall_s: report.wall_s,
    };
    Ok((run, report))
}

/// User and system seconds of all reaped children of this process so far.
fn children_cpu() -> Result<(f64, f64), BenchError> {
    rusage_cpu(libc::RUSAGE_CHILDREN, "getrusage(RUSAGE_CHILDREN)")
}

/// User and system seconds of this process (all its threads) so far.
pub fn own_cpu() -> Result<(f64, f64), BenchError> {
    rusage_cpu(libc::RUSAGE_SELF, "getrusage(RUSAGE_SELF)")
}

fn rusage_cpu(who: libc::c_int, what: &str) -> Result<(f64, f64), BenchError> {
    // SAFETY: rusage is plain integers, for which all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes into the struct we pass, which outlives the call.
    let rc = unsafe { libc::getrusage(who, &mut usage) };
    if rc != 0 {
        return Err(BenchError::failed(what, std::io::Error::last_os_error()));
    }
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok((seconds(usage.ru_utime), seconds(usage.ru_stime)))
}
fn parse_child_report(text: &str) -> Result<ChildReport, String> {
    let v: serde_json::Value = serde_json::from_str(text.trim()).map_err(|e| e.to_string())?;
    let wall_s = v["wall_s"]
        .as_f64()
        .filter(|w| w.is_finite() && *w >= 0.0)
        .ok_or("no wall_s")?;
    let written_bytes = v["written_bytes"].as_u64().ok_or("no written_bytes")?;
    let io_backend = v["io_backend"].as_str().unwrap_or("?").to_string();
    Ok(ChildReport {
        wall_s,
        written_bytes,
        io_backend,
    })
}

/// The child's side of a run: the write and the sync, measured, reported
/// as one JSON line on standard output. Nothing else is done here, as all
/// of this process's CPU time is counted.
pub fn child(args: &CpuArgs, sizes: Sizes, path: &Path) -> Result<(), BenchError> {
    let block = usize::try_from(sizes.block_size)
        .map_err(|_| BenchError::BadInput("--block-size too large".into()))?;
    let cache = Cache::builder()
        .knob("memory", &sizes.memory.to_string())
        .map_err(|e| BenchError::BadInput(format!("--memory: {e}")))?
        .data_dir(&args.data_dir)
        .calibrate(!args.no_calibrate)
        .writeout(args.writeout)
        .build()
        .map_err(|e| BenchError::failed("starting the cache", e))?;
    let fail = |e: writeback::Error| BenchError::failed(path.display(), e);
    let file = cache
        .open(path, OpenOptions { create: true })
        .map_err(fail)?;
    let mut buf = vec![0u8; block];
    SplitMix64::seed_from_u64(SEED).fill_bytes(&mut buf);

    let start = Instant::now();
    let mut offset = 0u64;
    while offset < sizes.size {
        let len = (sizes.size - offset).min(sizes.block_size) as usize;
        // Every block distinct, so nothing below can deduplicate it.
        if len >= 8 {
            buf[..8].copy_from_slice(&offset.to_ne_bytes());
        }
        file.write_at(&buf[..len], offset).map_err(fail)?;
        offset += len as u64;
    }
    file.sync_data().map_err(fail)?;
    let wall_s = start.elapsed().as_secs_f64();

    let written_bytes = cache.stats().written_pages * wb_engine::PAGE_SIZE;
    let io_backend = cache.io_backend();
    drop(file);
    drop(cache);
    println!(
        "{}",
        json!({"wall_s": wall_s, "written_bytes": written_bytes, "io_backend": io_backend})
    );
    Ok(())
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_report_parses_or_explains() {
        let r = parse_child_report(
            "{\"wall_s\": 1.5, \"written_bytes\": 4096, \"io_backend\": \"threads\"}\n",
        )
        .expect("a report");
        assert_eq!((r.wall_s, r.written_bytes), (1.5, 4096));
        assert_eq!(r.io_backend, "threads");
        assert!(parse_child_report("").is_err());
        assert!(parse_child_report("{\"wall_s\": -1, \"written_bytes\": 0}").is_err());
    }
}
