//! The experiment's report: the medians of each row, the tables (absolute
//! figures; ratios to the floor, to `kernel` and to the best kernel
//! configuration) and the JSON object.

use super::best_kernel::{best_kernel, render_best_kernel};
use super::configs::{BenchConfig, ConfigSummary};
use super::kernel_configs;
use super::one_run::RunResult;
use super::rows::Row;
use super::Interference;
use crate::bench::doc::Doc;
use crate::bench::fio::ReaderResult;
use crate::bench::harness::{median_of, median_some, ratio_table, Notes, Values};
use crate::bench::table::{self, Table};
use serde_json::json;
use wb_engine::units::format_bytes;

/// The medians of a row's runs.
pub fn summarize(row: Row, runs: &[RunResult]) -> ConfigSummary {
    let m = |f: fn(&RunResult) -> f64| median_of(runs, f);
    ConfigSummary {
        config: row.config,
        point: row.point,
        reader: ReaderResult {
            p50_us: m(|r| r.reader.p50_us),
            p99_us: m(|r| r.reader.p99_us),
            p99_9_us: m(|r| r.reader.p99_9_us),
            max_us: m(|r| r.reader.max_us),
            iops: m(|r| r.reader.iops),
        },
        writer_mib_s: median_some(runs, |r| r.writer_mib_s),
    }
}

pub fn to_json(summaries: &[ConfigSummary]) -> serde_json::Value {
    let configs: Vec<serde_json::Value> = summaries
        .iter()
        .map(|s| {
            let mut v = json!({
                "name": s.name(),
                "reader": {
                    "p50_us": s.reader.p50_us,
                    "p99_us": s.reader.p99_us,
                    "p99_9_us": s.reader.p99_9_us,
                    "max_us": s.reader.max_us,
                    "iops": s.reader.iops,
                },
            });
            if let Some(w) = s.writer_mib_s {
                v["writer"] = json!({ "mib_s": w });
            }
            if let Some(p) = &s.point {
                v["config"] = json!(s.config.name());
                v["knob"] = json!(p.knob);
                v["value"] = json!(p.value);
            }
            v
        })
        .collect();
    let mut out = json!({ "configs": configs });
    let best = best_kernel(summaries);
    if !best.is_empty() {
        let mut map = serde_json::Map::new();
        for b in best {
            map.insert(
                b.figure.key().into(),
                json!({ "value": b.value, "config": b.config.name() }),
            );
        }
        out["best_kernel"] = serde_json::Value::Object(map);
    }
    out
}

/// The lines above the tables: what ran, and under which dirty limits.
fn header(summaries: &[ConfigSummary], exp: &Interference, repeat: usize) -> String {
    format!(
        "Reader: 4 KiB O_DIRECT random reads, queue depth 1, {} s, counted while the writer \
         runs; writer: {} sequential; medians of {repeat} run{}.\n\
         Kernel dirty limits for the kernel runs: {} / background {} (20% / 10% of the \
         engine's {}){}.\n\n",
        exp.seconds,
        format_bytes(exp.writer_size),
        if repeat == 1 { "" } else { "s" },
        format_bytes(exp.dirty_limits.0),
        format_bytes(exp.dirty_limits.1),
        format_bytes(exp.memory),
        match summaries
            .iter()
            .any(|s| s.config == BenchConfig::KernelDirty64m)
        {
            true => format!(
                "; kernel-dirty64m's: {} / background {}",
                format_bytes(kernel_configs::DIRTY64M_LIMITS.0),
                format_bytes(kernel_configs::DIRTY64M_LIMITS.1)
            ),
            false => String::new(),
        },
    )
}

/// A row's figures for the tables of ratios.
fn values(s: &ConfigSummary) -> Values {
    let r = &s.reader;
    Values {
        name: s.name(),
        values: [r.p50_us, r.p99_us, r.p99_9_us, r.max_us, r.iops]
            .into_iter()
            .map(Some)
            .chain([s.writer_mib_s])
            .collect(),
    }
}

pub fn render(
    summaries: &[ConfigSummary],
    exp: &Interference,
    repeat: usize,
    notes: &Notes,
) -> Doc {
    let mut out = Doc::from(header(summaries, exp, repeat));
    let mut abs = Table::new(&[
        "config",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "IOPS",
        "writer MiB/s",
    ]);
    for s in summaries {
        abs.row(vec![
            s.name(),
            table::ms(s.reader.p50_us),
            table::ms(s.reader.p99_us),
            table::ms(s.reader.p99_9_us),
            table::ms(s.reader.max_us),
            table::rate(s.reader.iops),
            s.writer_mib_s.map_or("-".into(), table::rate),
        ]);
    }
    out.table(abs);
    let find = |c: BenchConfig| {
        summaries
            .iter()
            .find(|s| s.config == c && s.point.is_none())
    };
    let rows: Vec<Values> = summaries.iter().map(values).collect();
    let columns = ["p50", "p99", "p99.9", "max", "IOPS", "writer"];
    for (title, base) in [
        ("ratio to floor", find(BenchConfig::Floor)),
        ("ratio to kernel", find(BenchConfig::Kernel)),
    ] {
        let Some(base) = base else { continue };
        out.push('\n');
        out.table(ratio_table(title, &columns, &rows, &values(base)));
    }
    render_best_kernel(summaries, &mut out);
    notes.render(&mut out);
    out
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::sweep::SweepPoint;
    use super::*;

    pub fn summary(
        config: BenchConfig,
        lat_us: [f64; 4],
        iops: f64,
        writer: Option<f64>,
    ) -> ConfigSummary {
        ConfigSummary {
            config,
            point: None,
            reader: ReaderResult {
                p50_us: lat_us[0],
                p99_us: lat_us[1],
                p99_9_us: lat_us[2],
                max_us: lat_us[3],
                iops,
            },
            writer_mib_s: writer,
        }
    }

    pub fn sample() -> Vec<ConfigSummary> {
        use BenchConfig as C;
        vec![
            summary(C::Floor, [1.0, 2.0, 3.0, 4.0], 9000.0, None),
            summary(
                C::Kernel,
                [20.0, 900.0, 5000.0, 90000.0],
                1000.0,
                Some(600.0),
            ),
            summary(
                C::KernelDontcache,
                [20.0, 400.0, 7000.0, 80000.0],
                900.0,
                Some(700.0),
            ),
            summary(
                C::KernelKyber,
                [15.0, 500.0, 3000.0, 95000.0],
                1500.0,
                Some(500.0),
            ),
            summary(
                C::KernelBfq,
                [18.0, 450.0, 4000.0, 70000.0],
                1400.0,
                Some(400.0),
            ),
            summary(
                C::EngineWbtOff,
                [19.0, 300.0, 2000.0, 60000.0],
                2000.0,
                Some(800.0),
            ),
            summary(
                C::Engine,
                [22.0, 200.0, 1500.0, 50000.0],
                3000.0,
                Some(650.0),
            ),
        ]
    }

    fn swept(value: &str, p99_us: f64, writer: f64) -> ConfigSummary {
        ConfigSummary {
            point: Some(SweepPoint {
                knob: "wbt_lat_usec".into(),
                value: value.into(),
            }),
            ..summary(
                BenchConfig::Engine,
                [10.0, p99_us, 1000.0, 2000.0],
                3000.0,
                Some(writer),
            )
        }
    }

    #[test]
    fn sweep_rows_have_their_own_names_in_json_and_tables() {
        let mut rows = sample();
        rows.push(swept("2000", 150.0, 500.0));
        rows.push(swept("0", 800.0, 900.0));
        let v = to_json(&rows);
        let configs = v["configs"].as_array().expect("configs");
        assert_eq!(configs.len(), 9);
        let point = &configs[7];
        assert_eq!(point["name"], "engine[wbt_lat_usec=2000]");
        assert_eq!(point["config"], "engine");
        assert_eq!(point["knob"], "wbt_lat_usec");
        assert_eq!(point["value"], "2000");
        assert_eq!(point["reader"]["p99_us"], 150.0);
        assert!(configs[6].get("knob").is_none(), "{}", configs[6]);
        assert_eq!(configs[6]["name"], "engine");
        // Sweep rows are not kernel configurations.
        assert_eq!(
            v["best_kernel"]["writer_mib_s"]["config"],
            "kernel-dontcache"
        );
        let mut doc = Doc::new();
        render_best_kernel(&rows, &mut doc);
        let text = doc.to_string();
        assert!(text.contains("\nengine[wbt_lat_usec=2000] "), "{text}");
        assert!(text.contains("\nengine[wbt_lat_usec=0] "), "{text}");
        // Ratios against the floor and the kernel: the default engine row
        // is found as `engine`, not as a sweep point.
        let find = |c: BenchConfig| rows.iter().find(|s| s.config == c && s.point.is_none());
        assert_eq!(
            find(BenchConfig::Engine)
                .map(ConfigSummary::name)
                .as_deref(),
            Some("engine")
        );
    }

    #[test]
    fn json_keeps_its_keys_and_adds_best_kernel() {
        let v: serde_json::Value =
            serde_json::from_str(&to_json(&sample()).to_string()).expect("valid JSON");
        let configs = v["configs"].as_array().expect("configs");
        assert_eq!(configs.len(), 7);
        assert_eq!(configs[0]["name"], "floor");
        assert!(configs[0].get("writer").is_none());
        assert_eq!(configs[1]["reader"]["p99_us"], 900.0);
        assert_eq!(configs[1]["writer"]["mib_s"], 600.0);
        let best = &v["best_kernel"];
        assert_eq!(best["p99_us"]["config"], "kernel-dontcache");
        assert_eq!(best["p99_us"]["value"], 400.0);
        assert_eq!(best["writer_mib_s"]["config"], "kernel-dontcache");
        assert_eq!(best.as_object().map(|m| m.len()), Some(6));
        let none = to_json(&[summary(BenchConfig::Engine, [1.0; 4], 5.0, Some(5.0))]);
        assert!(none.get("best_kernel").is_none(), "{none}");
    }

    #[test]
    fn the_ratio_tables_leave_out_their_base_and_show_missing_writers() {
        let rows: Vec<Values> = sample().iter().map(values).collect();
        let floor = values(&sample()[0]);
        let columns = ["p50", "p99", "p99.9", "max", "IOPS", "writer"];
        let text = ratio_table("ratio to floor", &columns, &rows, &floor).render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 7, "{text}");
        assert!(lines[1].starts_with("kernel "), "{text}");
        // kernel p50 20 / floor 1; the floor has no writer: "-".
        assert!(
            lines[1].contains("20.00x") && lines[1].ends_with('-'),
            "{text}"
        );
    }
}
