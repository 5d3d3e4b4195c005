//! The report: each run and the medians, as a table and as JSON.

use super::{writeout_name, Run, Sizes};
use crate::bench::doc::Doc;
use crate::bench::harness::median_of;
use crate::bench::table::Table;
use serde_json::json;
use wb_engine::units::format_bytes;
use writeback::Writeout;

pub fn to_json(sizes: Sizes, runs: &[Run], writeout: Writeout) -> serde_json::Value {
    let list: Vec<_> = runs
        .iter()
        .map(|r| {
            json!({
                "cpu_s": r.cpu_s(),
                "user_s": r.user_s,
                "sys_s": r.sys_s,
                "wall_s": r.wall_s,
                "cpu_s_per_gib": r.cpu_s_per_gib(sizes.size),
                "mib_s": r.mib_s(sizes.size),
            })
        })
        .collect();
    json!({
        "size_bytes": sizes.size,
        "block_size": sizes.block_size,
        "memory_bytes": sizes.memory,
        "writeout": writeout_name(writeout),
        "runs": list,
        "median_cpu_s_per_gib": median_of(runs, |r| r.cpu_s_per_gib(sizes.size)),
        "median_mib_s": median_of(runs, |r| r.mib_s(sizes.size)),
    })
}

pub fn render(sizes: Sizes, runs: &[Run], backend: &str, writeout: Writeout) -> Doc {
    let mut t = Table::new(&[
        "run",
        "cpu s",
        "user s",
        "sys s",
        "wall s",
        "cpu s/GiB",
        "MiB/s",
    ]);
    for (i, r) in runs.iter().enumerate() {
        t.row(vec![
            (i + 1).to_string(),
            format!("{:.2}", r.cpu_s()),
            format!("{:.2}", r.user_s),
            format!("{:.2}", r.sys_s),
            format!("{:.2}", r.wall_s),
            format!("{:.3}", r.cpu_s_per_gib(sizes.size)),
            format!("{:.0}", r.mib_s(sizes.size)),
        ]);
    }
    t.row(vec![
        "median".into(),
        format!("{:.2}", median_of(runs, |r| r.cpu_s())),
        format!("{:.2}", median_of(runs, |r| r.user_s)),
        format!("{:.2}", median_of(runs, |r| r.sys_s)),
        format!("{:.2}", median_of(runs, |r| r.wall_s)),
        format!("{:.3}", median_of(runs, |r| r.cpu_s_per_gib(sizes.size))),
        format!("{:.0}", median_of(runs, |r| r.mib_s(sizes.size))),
    ]);
    let mut out = Doc::from(format!(
        "Sequential write of {} in {} write_at calls into one new file, then sync_data, \
         through a cache of {} ({backend} backend, {} writeout); CPU time (user + sys) of the child process \
         doing it, {} run{} (medians of each column).\n\n",
        format_bytes(sizes.size),
        exact_bytes(sizes.block_size),
        exact_bytes(sizes.memory),
        writeout_name(writeout),
        runs.len(),
        if runs.len() == 1 { "" } else { "s" }
    ));
    out.table(t);
    out
}

/// "1 MiB", "12 KiB", "4097 bytes": a size exactly, in the largest unit that divides it.
pub fn exact_bytes(bytes: u64) -> String {
    for (unit, name) in [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{} {name}", bytes / unit);
        }
    }
    format!("{bytes} bytes")
}
#[cfg(test)]
mod tests {
    use super::*;

    const GIB_U: u64 = 1 << 30;

    #[test]
    fn json_has_runs_and_medians() {
        let sizes = Sizes {
            size: 2 * GIB_U,
            block_size: 1 << 20,
            memory: GIB_U,
        };
        let runs = [
            Run {
                user_s: 1.0,
                sys_s: 3.0,
                wall_s: 4.0,
            },
            Run {
                user_s: 0.5,
                sys_s: 1.5,
                wall_s: 8.0,
            },
            Run {
                user_s: 1.0,
                sys_s: 2.0,
                wall_s: 2.0,
            },
        ];
        let v = to_json(sizes, &runs, Writeout::ZeroCopy);
        assert_eq!(v["writeout"], "zero-copy");
        assert_eq!(v["size_bytes"], 2 * GIB_U);
        assert_eq!(v["block_size"], 1 << 20);
        assert_eq!(v["memory_bytes"], GIB_U);
        let list = v["runs"].as_array().expect("runs");
        assert_eq!(list.len(), 3);
        assert_eq!(list[0]["cpu_s"], 4.0);
        assert_eq!(list[0]["user_s"], 1.0);
        assert_eq!(list[0]["sys_s"], 3.0);
        assert_eq!(list[0]["wall_s"], 4.0);
        assert_eq!(list[0]["cpu_s_per_gib"], 2.0);
        assert_eq!(list[0]["mib_s"], 512.0);
        // cpu s/GiB: 2.0, 1.0, 1.5; MiB/s: 512, 256, 1024.
        assert_eq!(v["median_cpu_s_per_gib"], 1.5);
        assert_eq!(v["median_mib_s"], 512.0);
        let text = render(sizes, &runs, "io_uring", Writeout::Copy).to_string();
        assert!(text.contains("(io_uring backend, copy writeout)"), "{text}");
        assert!(text.contains("median"), "{text}");
        assert!(text.contains("1.500"), "{text}");
    }

    #[test]
    fn exact_bytes_picks_the_unit_that_divides() {
        assert_eq!(exact_bytes(1 << 20), "1 MiB");
        assert_eq!(exact_bytes(12 << 10), "12 KiB");
        assert_eq!(exact_bytes(4097), "4097 bytes");
        assert_eq!(exact_bytes(3 << 30), "3 GiB");
    }
}
