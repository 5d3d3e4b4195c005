//! The bench's report: the medians of each configuration's runs, the
//! table with its line of ratios, and the JSON object.

use super::{BenchConfig, Dontcache};
use crate::bench::doc::Doc;
use crate::bench::harness::{median_of, Notes};
use crate::bench::kernel_write;
use crate::bench::table::{self, Table};
use hdrhistogram::Histogram;
use serde_json::json;
use wb_engine::units::format_bytes;

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Latency {
    pub p50_us: f64,
    pub p99_us: f64,
    pub p99_9_us: f64,
    pub max_us: f64,
}

impl Latency {
    pub fn of(hist: &Histogram<u64>) -> Latency {
        let us = |ns: u64| ns as f64 / 1000.0;
        Latency {
            p50_us: us(hist.value_at_quantile(0.5)),
            p99_us: us(hist.value_at_quantile(0.99)),
            p99_9_us: us(hist.value_at_quantile(0.999)),
            max_us: us(hist.max()),
        }
    }
}

/// One run of one configuration, or the medians of a configuration's runs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RunResult {
    pub mib_s: f64,
    pub lat: Latency,
    pub dirty_peak_mib: f64,
    pub cached_end_mib: f64,
}

/// The medians of each figure over `runs`.
pub fn summarize(runs: &[RunResult]) -> RunResult {
    let m = |f: fn(&RunResult) -> f64| median_of(runs, f);
    RunResult {
        mib_s: m(|r| r.mib_s),
        lat: Latency {
            p50_us: m(|r| r.lat.p50_us),
            p99_us: m(|r| r.lat.p99_us),
            p99_9_us: m(|r| r.lat.p99_9_us),
            max_us: m(|r| r.lat.max_us),
        },
        dirty_peak_mib: m(|r| r.dirty_peak_mib),
        cached_end_mib: m(|r| r.cached_end_mib),
    }
}

pub fn to_json(
    summaries: &[(BenchConfig, RunResult)],
    exp: &Dontcache,
    repeat: usize,
    io_backend: &str,
) -> serde_json::Value {
    let configs: Vec<serde_json::Value> = summaries
        .iter()
        .map(|(config, r)| {
            json!({
                "name": config.name(),
                "mib_s": r.mib_s,
                "lat_us": {
                    "p50": r.lat.p50_us,
                    "p99": r.lat.p99_us,
                    "p99_9": r.lat.p99_9_us,
                    "max": r.lat.max_us,
                },
                "dirty_peak_mib": r.dirty_peak_mib,
                "cached_end_mib": r.cached_end_mib,
            })
        })
        .collect();
    json!({
        "configs": configs,
        "size_mib": exp.size >> 20,
        "repeat": repeat,
        "dir": exp.dir.display().to_string(),
        "fs": exp.fs,
        "kernel": kernel_write::kernel_release(),
        "memory_mib": exp.memory >> 20,
        "vm_dirty_bytes": exp.dirty_limits.0,
        "vm_dirty_background_bytes": exp.dirty_limits.1,
        "io_backend": io_backend,
    })
}

/// A latency in microseconds, without needless decimals.
pub fn us(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

pub fn render(
    summaries: &[(BenchConfig, RunResult)],
    exp: &Dontcache,
    repeat: usize,
    io_backend: &str,
    notes: &Notes,
) -> Doc {
    let mut out = Doc::from(format!(
        "Sequential write of {} in 1 MiB calls to a new file in {} ({}, kernel {}), then one \
         fdatasync; medians of {repeat} round{}.\n\
         MiB/s includes the fdatasync; latencies are per write call. Kernel dirty limits for \
         the bench: vm.dirty_bytes={} ({}) / vm.dirty_background_bytes={} ({}), the engine's \
         (20% / 10% of its {}; {io_backend} backend).\n\n",
        format_bytes(exp.size),
        exp.dir.display(),
        exp.fs,
        kernel_write::kernel_release(),
        if repeat == 1 { "" } else { "s" },
        exp.dirty_limits.0,
        format_bytes(exp.dirty_limits.0),
        exp.dirty_limits.1,
        format_bytes(exp.dirty_limits.1),
        format_bytes(exp.memory),
    ));
    let mut t = Table::new(&[
        "config",
        "MiB/s",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "max us",
        "dirty peak MiB",
        "cached end MiB",
    ]);
    for (config, r) in summaries {
        t.row(vec![
            config.name().into(),
            table::rate(r.mib_s),
            us(r.lat.p50_us),
            us(r.lat.p99_us),
            us(r.lat.p99_9_us),
            us(r.lat.max_us),
            format!("{:.0}", r.dirty_peak_mib),
            format!("{:.1}", r.cached_end_mib),
        ]);
    }
    out.table(t);
    out.push('\n');
    out.push_str(&ratios(summaries));
    notes.render(&mut out);
    out
}

/// The line of ratios under the table.
fn ratios(summaries: &[(BenchConfig, RunResult)]) -> String {
    let get = |c: BenchConfig| summaries.iter().find(|(x, _)| *x == c).map(|(_, r)| *r);
    let field = |c: BenchConfig, f: fn(&RunResult) -> f64| get(c).map(|r| f(&r));
    let p99_9 = |r: &RunResult| r.lat.p99_9_us;
    format!(
        "Ratios: engine-dontcache / kernel-dontcache: p99.9 {}, MiB/s {}; \
         engine-dontcache / engine-buffered cached at end: {}; \
         engine-dontcache (kick) / engine-dontcache-inline p99.9: {}\n",
        table::ratio(
            field(BenchConfig::EngineDontcache, p99_9),
            field(BenchConfig::KernelDontcache, p99_9)
        ),
        table::ratio(
            field(BenchConfig::EngineDontcache, |r| r.mib_s),
            field(BenchConfig::KernelDontcache, |r| r.mib_s)
        ),
        table::ratio(
            field(BenchConfig::EngineDontcache, |r| r.cached_end_mib),
            field(BenchConfig::EngineBuffered, |r| r.cached_end_mib)
        ),
        table::ratio(
            field(BenchConfig::EngineDontcache, p99_9),
            field(BenchConfig::EngineDontcacheInline, p99_9)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn medians_keep_percentiles_in_order_and_json_has_the_promised_keys() {
        let run = |x: f64| RunResult {
            mib_s: x,
            lat: Latency {
                p50_us: x,
                p99_us: 2.0 * x,
                p99_9_us: 3.0 * x,
                max_us: 4.0 * x,
            },
            dirty_peak_mib: x,
            cached_end_mib: x,
        };
        let m = summarize(&[run(1.0), run(5.0), run(2.0)]);
        assert_eq!(m, run(2.0));
        let summaries: Vec<_> = BenchConfig::ALL.iter().map(|&c| (c, m)).collect();
        let exp = Dontcache {
            dir: PathBuf::from("/var/tmp"),
            fs: "ext4".into(),
            file: PathBuf::from("/var/tmp/x"),
            size: 4 << 30,
            memory: 1 << 30,
            data_dir: PathBuf::from("wb-data"),
            dirty_limits: (200 << 20, 100 << 20),
            io_backend: "io_uring",
        };
        let v = to_json(&summaries, &exp, 3, "io_uring");
        assert_eq!(v["size_mib"], 4096);
        assert_eq!(v["repeat"], 3);
        assert_eq!(v["fs"], "ext4");
        let configs = v["configs"].as_array().expect("configs");
        let names: Vec<_> = configs.iter().filter_map(|c| c["name"].as_str()).collect();
        assert_eq!(
            names,
            [
                "kernel-buffered",
                "kernel-dontcache",
                "kernel-direct",
                "engine-buffered",
                "engine-dontcache",
                "engine-dontcache-inline"
            ]
        );
        let mut keys: Vec<_> = configs[0]
            .as_object()
            .expect("object")
            .keys()
            .cloned()
            .collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "cached_end_mib",
                "dirty_peak_mib",
                "lat_us",
                "mib_s",
                "name"
            ]
        );
        assert_eq!(configs[0]["lat_us"]["p99_9"], 6.0);
        let text = render(&summaries, &exp, 3, "io_uring", &Notes::new()).to_string();
        assert!(text.contains("engine-dontcache-inline"), "{text}");
        assert!(text.contains("vm.dirty_bytes=209715200"), "{text}");
        assert!(text.contains("p99.9 1.00x"), "{text}");
    }
}
