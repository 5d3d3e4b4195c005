//! Running fio and reading its JSON output.
//!
//! fio is the kernel-side workload of the benchmarks: the O_DIRECT random
//! reader everywhere, and the buffered writer of the kernel configurations.
//! Each fio runs as a child process writing its JSON report to a file
//! (`--output`), so the child can be polled while it runs and its report
//! read once it ends.
//!
//! The files: this one starts fio and builds its jobs' arguments;
//! [`report`] reads its JSON report, [`latency_log`] its per-read log.

mod latency_log;
mod report;

pub use latency_log::LatencyLog;
pub use report::{parse_read_bw, parse_reader, parse_writer, ReaderResult};

use super::child::ChildGuard;
use super::cleanup::TempFile;
use super::BenchError;
use std::path::Path;
use std::process::{Command, Stdio};

/// Percentiles asked of fio for the reader (and read back by [`parse_reader`]).
const PERCENTILES: &str = "50:99:99.9";

/// fio, found on the PATH.
pub struct Fio {
    pub version: String,
}

/// Finds fio, or says how to install it.
pub fn find() -> Result<Fio, BenchError> {
    match Command::new("fio").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(Fio {
            version: String::from_utf8_lossy(&out.stdout).trim().to_string(),
        }),
        Ok(out) => Err(BenchError::BadInput(format!(
            "fio --version failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(BenchError::BadInput(
            "fio not found; run ./scripts/setup.sh".into(),
        )),
        Err(e) => Err(BenchError::BadInput(format!("cannot run fio: {e}"))),
    }
}

impl Fio {
    /// Starts fio with `job_args`; its JSON report goes to `DIR/.wb-bench-NAME.json`.
    pub fn spawn(
        &self,
        dir: &Path,
        name: &str,
        job_args: &[String],
    ) -> Result<RunningFio, BenchError> {
        self.spawn_under(dir, name, job_args, &[])
    }

    /// [`Fio::spawn`] under `wrapper`, a command that ends by exec'ing
    /// the rest of its arguments (`ionice -c3`, `nocache`): fio keeps the
    /// child's process id, so stopping the child stops fio. What the
    /// wrapper prints on failure goes to fio's error log.
    pub fn spawn_under(
        &self,
        dir: &Path,
        name: &str,
        job_args: &[String],
        wrapper: &[String],
    ) -> Result<RunningFio, BenchError> {
        let output = TempFile::new(dir.join(format!(".wb-bench-{name}.json")));
        let errlog = TempFile::new(dir.join(format!(".wb-bench-{name}.err")));
        let stderr = std::fs::File::create(errlog.path())
            .map_err(|e| BenchError::failed(errlog.path().display(), e))?;
        let mut cmd = match wrapper.split_first() {
            Some((program, args)) => {
                let mut cmd = Command::new(program);
                cmd.args(args).arg("fio");
                cmd
            }
            None => Command::new("fio"),
        };
        cmd.arg(format!("--name={name}"))
            .args(job_args)
            .arg("--output-format=json")
            .arg(format!("--output={}", output.path().display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        let child = ChildGuard::spawn(&mut cmd).map_err(|e| match wrapper.first() {
            Some(program) => BenchError::failed(format!("starting fio under {program}"), e),
            None => BenchError::failed("starting fio", e),
        })?;
        Ok(RunningFio {
            name: name.to_string(),
            child,
            output,
            errlog,
            status: None,
        })
    }
}

/// Escapes a path for fio's `--filename` (':' separates file names there).
pub fn fio_filename(path: &Path) -> String {
    path.display().to_string().replace(':', "\\:")
}

/// The reader of every configuration: 4 KiB O_DIRECT random reads at queue
/// depth 1 of an existing file, for `seconds`. `randrepeat=0` so repeats do
/// not replay the same offsets (which a caching host would then serve).
pub fn reader_args(file: &Path, seconds: u64) -> Vec<String> {
    vec![
        format!("--filename={}", fio_filename(file)),
        "--rw=randread".into(),
        "--bs=4k".into(),
        "--direct=1".into(),
        "--ioengine=psync".into(),
        "--iodepth=1".into(),
        format!("--runtime={seconds}"),
        "--time_based".into(),
        "--randrepeat=0".into(),
        format!("--percentile_list={PERCENTILES}"),
    ]
}

/// The kernel writer: buffered sequential 1 MiB writes of `size` bytes and
/// an fsync at the end. No fallocate, as the engine's writer does not
/// either. (RWF_DONTCACHE writes are ours, `kernel_write`: the fio of
/// Debian 12 has no `uncached` option.)
pub fn writer_args(file: &Path, size: u64) -> Vec<String> {
    vec![
        format!("--filename={}", fio_filename(file)),
        "--rw=write".into(),
        "--bs=1M".into(),
        "--direct=0".into(),
        format!("--size={size}"),
        "--end_fsync=1".into(),
        "--fallocate=none".into(),
        "--ioengine=psync".into(),
    ]
}

/// [`writer_args`] for `runtime`, over the file again from its start each
/// time it reaches `size` (fio's time_based).
pub fn timed_writer_args(file: &Path, size: u64, runtime: std::time::Duration) -> Vec<String> {
    let mut args = writer_args(file, size);
    args.push("--time_based".into());
    args.push(format!("--runtime={}ms", runtime.as_millis().max(1)));
    args
}

/// Buffered 1 MiB sequential reads of an existing file, to its end.
pub fn seq_reader_args(file: &Path) -> Vec<String> {
    vec![
        format!("--filename={}", fio_filename(file)),
        "--rw=read".into(),
        "--bs=1M".into(),
        "--direct=0".into(),
        "--ioengine=psync".into(),
    ]
}

/// Buffered 4 KiB random reads of an existing file for `seconds`.
pub fn buffered_random_reader_args(file: &Path, seconds: u64) -> Vec<String> {
    vec![
        format!("--filename={}", fio_filename(file)),
        "--rw=randread".into(),
        "--bs=4k".into(),
        "--direct=0".into(),
        "--ioengine=psync".into(),
        format!("--runtime={seconds}"),
        "--time_based".into(),
        "--randrepeat=0".into(),
    ]
}

/// A running fio.
pub struct RunningFio {
    name: String,
    child: ChildGuard,
    output: TempFile,
    errlog: TempFile,
    status: Option<std::process::ExitStatus>,
}

impl RunningFio {
    /// Whether fio has ended (non-blocking).
    pub fn has_finished(&mut self) -> Result<bool, BenchError> {
        if self.status.is_none() {
            self.status = self
                .child
                .try_wait()
                .map_err(|e| BenchError::failed(format!("waiting for fio {}", self.name), e))?;
        }
        Ok(self.status.is_some())
    }

    /// Waits for fio to end and returns its JSON report.
    pub fn finish(mut self) -> Result<String, BenchError> {
        let status = match self.status {
            Some(s) => s,
            None => self
                .child
                .wait()
                .map_err(|e| BenchError::failed(format!("waiting for fio {}", self.name), e))?,
        };
        let errors = std::fs::read_to_string(self.errlog.path()).unwrap_or_default();
        if !status.success() {
            return Err(BenchError::Failed(format!(
                "fio {} failed ({status}): {}",
                self.name,
                errors.trim()
            )));
        }
        std::fs::read_to_string(self.output.path()).map_err(|e| {
            BenchError::failed(
                format!("reading fio's report {}", self.output.path().display()),
                e,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filenames_with_colons_are_escaped() {
        assert_eq!(fio_filename(Path::new("/a:b/f")), "/a\\:b/f");
    }

    #[test]
    fn writer_is_buffered_psync_with_an_fsync_at_the_end() {
        let a = writer_args(Path::new("/d/w"), 1 << 30);
        for arg in ["--direct=0", "--ioengine=psync", "--end_fsync=1", "--bs=1M"] {
            assert!(a.contains(&arg.to_string()), "{arg} in {a:?}");
        }
        assert!(a.contains(&format!("--size={}", 1u64 << 30)), "{a:?}");
    }
}
