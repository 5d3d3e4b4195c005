//! The report: each configuration quiet and during the copy, the copy's
//! speed and the hot file still cached; and the JSON object.

use super::{DbCopy, Outcome};
use crate::bench::doc::Doc;
use crate::bench::table::{self, Table};
use crate::bench::MIB;
use serde_json::json;
use wb_engine::units::format_bytes;

pub fn render(outcomes: &[Outcome], exp: &DbCopy) -> Doc {
    let mut out = Doc::from(format!(
        "{} clients: 3 random 8 KiB reads + 1 write + fdatasync per transaction, over a {} hot \
         file; quiet for {} s, then during a {} copy (1 MiB writes, fsync); mount memory {}{}.\n\n",
        exp.clients,
        format_bytes(exp.hot_size),
        exp.seconds,
        format_bytes(exp.copy_size),
        format_bytes(exp.memory),
        exp.mount_sets
            .iter()
            .map(|(k, v)| format!(", {k}={v}"))
            .collect::<String>(),
    ));
    let mut t = Table::new(&[
        "config",
        "quiet txn/s",
        "quiet p99 ms",
        "copy txn/s",
        "copy p99 ms",
        "txn/s during/quiet",
        "p99 during/quiet",
        "copy MiB/s",
        "hot cached",
    ]);
    for o in outcomes {
        t.row(vec![
            o.name.clone(),
            format!("{:.0}", o.quiet.tps()),
            table::ms(o.quiet.p99_us()),
            format!("{:.0}", o.during.tps()),
            table::ms(o.during.p99_us()),
            table::ratio(Some(o.during.tps()), Some(o.quiet.tps())),
            table::ratio(Some(o.during.p99_us()), Some(o.quiet.p99_us())),
            table::rate(o.copy_mib_s),
            format!(
                "{:.1}%",
                100.0 * o.hot_cached_bytes as f64 / exp.hot_size as f64
            ),
        ]);
    }
    out.table(t);
    let copy = |n: &str| outcomes.iter().find(|o| o.name == n).map(|o| o.copy_mib_s);
    if let (Some(m), Some(k)) = (copy("mount"), copy("kernel")) {
        out.push_str(&format!(
            "\ncopy, mount/kernel: {}\n",
            table::ratio(Some(m), Some(k))
        ));
    }
    out
}

pub fn to_json(outcomes: &[Outcome], exp: &DbCopy) -> serde_json::Value {
    let configs: Vec<_> = outcomes
        .iter()
        .map(|o| {
            json!({
                "name": o.name,
                "quiet": o.quiet.json(),
                "during_copy": o.during.json(),
                "copy_mib_s": o.copy_mib_s,
                "hot_cached_mib": o.hot_cached_bytes as f64 / MIB,
                "hot_mib": exp.hot_size as f64 / MIB,
            })
        })
        .collect();
    json!({ "configs": configs })
}
