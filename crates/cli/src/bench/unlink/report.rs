//! The report: unlink latencies, the walk and the total per
//! configuration, the mount over the kernel; and the JSON object.

use super::{BenchConfig, Removal};
use crate::bench::doc::Doc;
use crate::bench::table::Table;
use serde_json::json;

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

pub fn to_json(results: &[Removal]) -> serde_json::Value {
    let configs: Vec<_> = results
        .iter()
        .map(|r| {
            json!({
                "name": r.config.name(),
                "unlinks": r.unlinks,
                "unlink_us": {
                    "p50": us(r.hist.value_at_quantile(0.50)),
                    "p99": us(r.hist.value_at_quantile(0.99)),
                    "p99_9": us(r.hist.value_at_quantile(0.999)),
                    "max": us(r.hist.max()),
                },
                "walk_s": r.walk_s,
                "total_s": r.total_s,
                "big_file_unlink_max_us": us(r.big_max_ns),
                "backlog_pauses": r.backlog_pauses.map(|p| p.0),
                "backlog_pause_max_us": r.backlog_pauses.map(|p| p.1),
            })
        })
        .collect();
    json!({ "configs": configs })
}

pub fn render(results: &[Removal]) -> Doc {
    let mut t = Table::new(&[
        "config",
        "unlinks",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "max ms",
        "large-file max ms",
        "walk s",
        "total s",
    ]);
    for r in results {
        t.row(vec![
            r.config.name().into(),
            r.unlinks.to_string(),
            format!("{:.1}", us(r.hist.value_at_quantile(0.50))),
            format!("{:.1}", us(r.hist.value_at_quantile(0.99))),
            format!("{:.1}", us(r.hist.value_at_quantile(0.999))),
            format!("{:.2}", r.hist.max() as f64 / 1e6),
            format!("{:.2}", r.big_max_ns as f64 / 1e6),
            format!("{:.2}", r.walk_s),
            format!("{:.2}", r.total_s),
        ]);
    }
    let mut out = Doc::from(
        "rm -rf of the same tree: directly on the filesystem, and through wb mount \
         (backlog_throttle watermarks, flush-all).\n\n",
    );
    out.table(t);
    let kernel = results.iter().find(|r| r.config == BenchConfig::Kernel);
    let mount = results.iter().find(|r| r.config == BenchConfig::Mount);
    if let (Some(k), Some(m)) = (kernel, mount) {
        let ratio = |a: u64, b: u64| {
            if b == 0 {
                f64::NAN
            } else {
                a as f64 / b as f64
            }
        };
        out.push_str(&format!(
            "\nmount / kernel: unlink max {:.3}x, large-file unlink max {:.3}x, total {:.2}x\n",
            ratio(m.hist.max(), k.hist.max()),
            ratio(m.big_max_ns, k.big_max_ns),
            m.total_s / k.total_s
        ));
    }
    out
}
