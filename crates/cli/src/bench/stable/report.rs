//! The report: the medians of each mode, their ratios to `wait`, and the
//! JSON object.

use super::load::FILES;
use super::{RunResult, StableArgs, CONFIGS};
use crate::bench::doc::Doc;
use crate::bench::table::Table;
use serde_json::json;
use std::fmt::Write as _;

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}x", a / b)
    } else {
        "-".to_string()
    }
}

pub fn render(args: &StableArgs, results: &[RunResult]) -> Doc {
    let mut out = Doc::new();
    writeln!(
        out,
        "dbench-like rewrites: {} clients sharing {} files of 256 KiB, 4 KiB writes, {} s per run, \
         cache {}, medians of {} rounds; zero-copy writeout but for always-copy\n",
        args.clients, FILES, args.seconds, args.memory, args.repeat
    )
    .expect("a Doc takes any text");
    let mut t = Table::new(&[
        "config",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "max us",
        "MiB/s",
        "cpu s/GiB",
        "stable waits",
        "pages copied",
    ]);
    for ((name, _, _), r) in CONFIGS.iter().zip(results) {
        t.row(vec![
            name.to_string(),
            format!("{:.1}", r.p50_us),
            format!("{:.1}", r.p99_us),
            format!("{:.1}", r.p99_9_us),
            format!("{:.1}", r.max_us),
            format!("{:.1}", r.mib_s),
            r.cpu_s_per_gib.map_or("-".into(), |c| format!("{c:.2}")),
            r.stable_waits.to_string(),
            r.snapshot_pages.to_string(),
        ]);
    }
    out.table(t);
    let wait = results[0];
    for ((name, _, _), r) in CONFIGS.iter().zip(results).skip(1) {
        writeln!(
            out,
            "{name} / wait: p99.9 {}, max {}, MiB/s {}",
            ratio(r.p99_9_us, wait.p99_9_us),
            ratio(r.max_us, wait.max_us),
            ratio(r.mib_s, wait.mib_s)
        )
        .expect("a Doc takes any text");
    }
    let cpu = |i: usize| results[i].cpu_s_per_gib.unwrap_or(0.0);
    writeln!(
        out,
        "none (zero-copy) / always-copy: CPU per GiB written back {}",
        ratio(cpu(1), cpu(3))
    )
    .expect("a Doc takes any text");
    out
}

pub fn to_json(args: &StableArgs, results: &[RunResult]) -> serde_json::Value {
    let configs: Vec<_> = CONFIGS
        .iter()
        .zip(results)
        .map(|((name, _, _), r)| {
            json!({
                "name": name,
                "write_lat_us": {"p50": r.p50_us, "p99": r.p99_us, "p99_9": r.p99_9_us, "max": r.max_us},
                "mib_s": r.mib_s,
                "cpu_s_per_gib": r.cpu_s_per_gib,
                "stable_waits": r.stable_waits,
                "snapshot_pages": r.snapshot_pages,
            })
        })
        .collect();
    json!({
        "clients": args.clients,
        "seconds": args.seconds,
        "repeat": args.repeat,
        "memory": args.memory,
        "configs": configs,
    })
}
