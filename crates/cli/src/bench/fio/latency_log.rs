//! fio's per-I/O latency log: the reads of a job, and their figures up
//! to a moment (what lets a benchmark count only the reads made while
//! something else ran).

use super::{fio_filename, ReaderResult};
use crate::bench::cleanup::TempFile;
use std::path::{Path, PathBuf};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
