//! Running fio and reading its JSON output.
//!
//! fio is the kernel-side workload of the benchmarks: the O_DIRECT random
//! reader everywhere, and the buffered writer of the kernel configurations.
//! Each fio runs as a child process writing its JSON report to a file
//! (`--output`), so the child can be polled while it runs and its report
//! read once it ends.

use super::cleanup::{ChildGuard, TempFile};
use super::BenchError;
use serde_json::Value;
use std::path::{Path, PathBuf};
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

/// fio's per-I/O completion latency log of one job (`--write_lat_log`,
/// every I/O, wall-clock times): what lets a benchmark count only the
/// reads made while something else ran. fio writes `<prefix>_clat.1.log`
/// (and `_lat`, `_slat`, which are not read); all three are removed when
/// this is dropped.
pub struct LatencyLog {
    prefix: PathBuf,
    _files: [TempFile; 3],
}

impl LatencyLog {
    pub fn new(dir: &Path, name: &str) -> LatencyLog {
        let prefix = dir.join(format!(".wb-bench-{name}-lat"));
        let file =
            |kind: &str| TempFile::new(PathBuf::from(format!("{}_{kind}.1.log", prefix.display())));
        LatencyLog {
            _files: [file("clat"), file("lat"), file("slat")],
            prefix,
        }
    }

    /// The arguments that make fio write this log.
    pub fn args(&self) -> Vec<String> {
        vec![
            format!("--write_lat_log={}", fio_filename(&self.prefix)),
            "--log_avg_msec=0".into(),
            "--log_unix_epoch=1".into(),
        ]
    }

    /// The job's reads issued up to `until_ms` (Unix time in ms; None:
    /// all), once fio has finished.
    pub fn reads(&self, until_ms: Option<u64>) -> Result<ReaderResult, String> {
        let path = format!("{}_clat.1.log", self.prefix.display());
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading fio's latency log {path}: {e}"))?;
        reads_until(&parse_latency_log(&text)?, until_ms)
    }
}

/// One logged I/O: completed at `at_ms` (Unix time), `clat_ns` after
/// it was issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoggedIo {
    pub at_ms: u64,
    pub clat_ns: u64,
}

/// The reads of a log in fio's format (`time, value, ddir, bs, offset`,
/// one I/O per line; ddir 0 is a read).
pub fn parse_latency_log(text: &str) -> Result<Vec<LoggedIo>, String> {
    let mut ios = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let field = |k: usize| -> Result<u64, String> {
            fields
                .get(k)
                .and_then(|f| f.parse().ok())
                .ok_or_else(|| format!("fio's latency log, line {}: {line:?}", i + 1))
        };
        if fields.len() < 3 {
            return Err(format!("fio's latency log, line {}: {line:?}", i + 1));
        }
        if field(2)? == 0 {
            ios.push(LoggedIo {
                at_ms: field(0)?,
                clat_ns: field(1)?,
            });
        }
    }
    Ok(ios)
}

/// Percentiles (nearest rank), maximum and rate of the reads issued up to
/// `until_ms` (completed by then or after: a read stuck behind a writer
/// counts with its whole wait), over the time from the first read's issue
/// to `until_ms` or the last read's completion, whichever is first.
pub fn reads_until(ios: &[LoggedIo], until_ms: Option<u64>) -> Result<ReaderResult, String> {
    let issued_ms = |io: &LoggedIo| io.at_ms.saturating_sub(io.clat_ns / 1_000_000);
    let first_ms = ios
        .iter()
        .map(issued_ms)
        .min()
        .ok_or("fio's reader logged no reads")?;
    let last_ms = ios.iter().map(|io| io.at_ms).max().unwrap_or(first_ms);
    let end_ms = until_ms.map_or(last_ms, |u| u.min(last_ms));
    let mut lat_ns: Vec<u64> = ios
        .iter()
        .filter(|io| issued_ms(io) <= end_ms)
        .map(|io| io.clat_ns)
        .collect();
    if end_ms <= first_ms || lat_ns.is_empty() {
        return Err("no reads were issued while the writer ran".into());
    }
    lat_ns.sort_unstable();
    let rank = |p: f64| {
        let k = ((p / 100.0) * lat_ns.len() as f64).ceil() as usize;
        lat_ns[k.clamp(1, lat_ns.len()) - 1] as f64 / 1000.0
    };
    Ok(ReaderResult {
        p50_us: rank(50.0),
        p99_us: rank(99.0),
        p99_9_us: rank(99.9),
        max_us: lat_ns[lat_ns.len() - 1] as f64 / 1000.0,
        iops: lat_ns.len() as f64 * 1000.0 / (end_ms - first_ms) as f64,
    })
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

/// What the reader saw: completion latencies in microseconds, and IOPS.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReaderResult {
    pub p50_us: f64,
    pub p99_us: f64,
    pub p99_9_us: f64,
    pub max_us: f64,
    pub iops: f64,
}

/// What the writer did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WriterResult {
    pub bytes: u64,
    /// Bytes per second over fio's runtime, which includes the final fsync.
    pub bw_bytes_s: f64,
}

/// The JSON object of a fio report; text fio printed before it (warnings
/// such as "fio: file hash not empty on exit") is skipped.
fn parse_report(text: &str) -> Result<Value, String> {
    let start = text
        .find("\n{")
        .map(|i| i + 1)
        .or_else(|| text.starts_with('{').then_some(0))
        .ok_or("fio's report holds no JSON object")?;
    serde_json::from_str(&text[start..]).map_err(|e| format!("fio's report is not valid JSON: {e}"))
}

/// The first job of a report, checked for fio's own error code.
fn first_job(report: &Value) -> Result<&Value, String> {
    let job = report
        .get("jobs")
        .and_then(|j| j.get(0))
        .ok_or("fio's report has no jobs")?;
    match job.get("error").and_then(Value::as_i64) {
        Some(0) | None => Ok(job),
        Some(e) => Err(format!(
            "fio job {} ended with error {e} ({})",
            job.get("jobname").and_then(Value::as_str).unwrap_or("?"),
            std::io::Error::from_raw_os_error(e as i32)
        )),
    }
}

fn number(v: &Value, path: &[&str]) -> Result<f64, String> {
    let mut cur = v;
    for key in path {
        cur = cur
            .get(key)
            .ok_or_else(|| format!("fio's report lacks {}", path.join(".")))?;
    }
    cur.as_f64()
        .ok_or_else(|| format!("fio's report: {} is not a number", path.join(".")))
}

/// The value of percentile `p` in fio's `clat_ns.percentile` map (keys like
/// "99.900000"), in nanoseconds.
fn percentile_ns(clat: &Value, p: f64) -> Result<f64, String> {
    let map = clat
        .get("percentile")
        .and_then(Value::as_object)
        .ok_or("fio's report lacks clat_ns.percentile")?;
    map.iter()
        .find(|(k, _)| k.parse::<f64>().is_ok_and(|kp| (kp - p).abs() < 1e-6))
        .and_then(|(_, v)| v.as_f64())
        .ok_or_else(|| format!("fio's report lacks the {p} percentile"))
}

/// The read section of a report's first job, which must have read something.
fn read_section(report: &Value) -> Result<&Value, String> {
    let read = first_job(report)?
        .get("read")
        .ok_or("fio's report has no read section")?;
    if number(read, &["total_ios"]).unwrap_or(1.0) == 0.0 {
        return Err("fio's reader completed no reads".into());
    }
    Ok(read)
}

/// Reads the reader's numbers from a fio JSON report.
pub fn parse_reader(text: &str) -> Result<ReaderResult, String> {
    let report = parse_report(text)?;
    let read = read_section(&report)?;
    let clat = read.get("clat_ns").ok_or("fio's report lacks clat_ns")?;
    Ok(ReaderResult {
        p50_us: percentile_ns(clat, 50.0)? / 1000.0,
        p99_us: percentile_ns(clat, 99.0)? / 1000.0,
        p99_9_us: percentile_ns(clat, 99.9)? / 1000.0,
        max_us: number(clat, &["max"])? / 1000.0,
        iops: number(read, &["iops"])?,
    })
}

/// Reads the writer's numbers from a fio JSON report.
pub fn parse_writer(text: &str) -> Result<WriterResult, String> {
    let report = parse_report(text)?;
    let write = first_job(&report)?
        .get("write")
        .ok_or("fio's report has no write section")?;
    Ok(WriterResult {
        bytes: number(write, &["io_bytes"])? as u64,
        bw_bytes_s: number(write, &["bw_bytes"])?,
    })
}

/// Read bandwidth in bytes per second from a fio JSON report.
pub fn parse_read_bw(text: &str) -> Result<f64, String> {
    let report = parse_report(text)?;
    number(read_section(&report)?, &["bw_bytes"])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from `fio-3.33 --name=reader --rw=randread --bs=4k --direct=1
    /// --ioengine=psync --runtime=1 --time_based --percentile_list=50:99:99.9
    /// --output-format=json` on a virtio disk.
    const READER: &str = include_str!("testdata/fio-3.33-randread.json");
    /// Captured from `fio-3.33 --name=writer --rw=write --bs=1M --direct=0
    /// --size=512M --end_fsync=1 --output-format=json`.
    const WRITER: &str = include_str!("testdata/fio-3.33-write.json");

    #[test]
    fn reader_percentiles_iops_and_max() {
        let r = parse_reader(READER).expect("parse");
        assert_eq!(r.p50_us, 27.776);
        assert_eq!(r.p99_us, 46.336);
        assert_eq!(r.p99_9_us, 1105.92);
        assert_eq!(r.max_us, 20410.583);
        assert!((r.iops - 26499.007937).abs() < 1e-6);
    }

    #[test]
    fn writer_bytes_and_bandwidth() {
        let w = parse_writer(WRITER).expect("parse");
        assert_eq!(w.bytes, 512 << 20);
        assert_eq!(w.bw_bytes_s, 413613953.0);
    }

    #[test]
    fn read_bandwidth() {
        assert_eq!(parse_read_bw(READER), Ok(108539936.0));
        assert!(parse_read_bw(WRITER).unwrap_err().contains("no reads"));
    }

    #[test]
    fn warnings_before_the_json_are_skipped() {
        let text = format!("fio: file hash not empty on exit\n{READER}");
        assert_eq!(parse_reader(&text), parse_reader(READER));
    }

    #[test]
    fn errors_are_explained() {
        assert!(parse_reader("").unwrap_err().contains("no JSON"));
        assert!(parse_reader("{ \"jobs\": [] }")
            .unwrap_err()
            .contains("no jobs"));
        let failed = READER.replacen("\"error\" : 0", "\"error\" : 28", 1);
        let e = parse_reader(&failed).unwrap_err();
        assert!(e.contains("error 28"), "{e}");
        // A writer report has no reads: the reader parser says so.
        assert!(parse_reader(WRITER).unwrap_err().contains("no reads"));
        let truncated = &READER[..READER.len() / 2];
        assert!(parse_reader(truncated)
            .unwrap_err()
            .contains("not valid JSON"));
    }

    const LOG: &str = "1000, 50000, 0, 4096, 0\n\
                       1000, 900000, 1, 4096, 0\n\
                       1500, 70000, 0, 4096, 0\n\
                       2000, 60000, 0, 4096, 0\n\
                       3000, 5000000, 0, 4096, 0\n";

    #[test]
    fn a_latency_log_keeps_reads_only() {
        let ios = parse_latency_log(LOG).unwrap();
        assert_eq!(ios.len(), 4);
        assert_eq!(
            ios[1],
            LoggedIo {
                at_ms: 1500,
                clat_ns: 70_000
            }
        );
        let e = parse_latency_log("1000, x, 0, 4096, 0\n").unwrap_err();
        assert!(e.contains("line 1"), "{e}");
        assert!(parse_latency_log("1000\n").unwrap_err().contains("line 1"));
    }

    #[test]
    fn reads_issued_after_the_cut_are_not_counted() {
        let ios = parse_latency_log(LOG).unwrap();
        let all = reads_until(&ios, None).unwrap();
        assert_eq!(all.max_us, 5000.0);
        assert_eq!(all.p50_us, 60.0);
        // 4 reads over 1000..3000 ms.
        assert_eq!(all.iops, 2.0);
        // The writer ended at 2 s: the 5 ms read issued after it is not counted.
        let cut = reads_until(&ios, Some(2000)).unwrap();
        assert_eq!(cut.max_us, 70.0);
        assert_eq!(cut.p50_us, 60.0);
        assert_eq!(cut.p99_us, 70.0);
        // 3 reads over 1000..2000 ms.
        assert_eq!(cut.iops, 3.0);
        // A read issued before the cut and stuck past it counts, whole.
        let mut stuck = ios.clone();
        stuck.push(LoggedIo {
            at_ms: 4000,
            clat_ns: 2_500_000_000,
        });
        let cut = reads_until(&stuck, Some(2000)).unwrap();
        assert_eq!(cut.max_us, 2_500_000.0);
        assert_eq!(cut.iops, 4.0);
        let e = reads_until(&ios, Some(1000)).unwrap_err();
        assert!(e.contains("while the writer ran"), "{e}");
        assert!(reads_until(&[], None).unwrap_err().contains("no reads"));
    }

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
