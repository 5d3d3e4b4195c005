//! fio's JSON report: the reader's percentiles and IOPS, the writer's
//! bytes and bandwidth, and fio's own errors.

use serde_json::Value;

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
    const READER: &str = include_str!("../testdata/fio-3.33-randread.json");
    /// Captured from `fio-3.33 --name=writer --rw=write --bs=1M --direct=0
    /// --size=512M --end_fsync=1 --output-format=json`.
    const WRITER: &str = include_str!("../testdata/fio-3.33-write.json");

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
}
