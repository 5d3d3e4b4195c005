//! The best kernel configuration at each figure: what every other
//! configuration is compared with (`best_kernel` in JSON, a table of
//! ratios in the text).

use super::configs::{BenchConfig, ConfigSummary};
use crate::bench::doc::Doc;
use crate::bench::table::{self, Table};

/// A figure of a configuration's summary, compared across configurations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Figure {
    P50,
    P99,
    P99_9,
    Max,
    Iops,
    WriterMibS,
}

impl Figure {
    pub const ALL: [Figure; 6] = [
        Figure::P50,
        Figure::P99,
        Figure::P99_9,
        Figure::Max,
        Figure::Iops,
        Figure::WriterMibS,
    ];

    /// Its key in `best_kernel` (the reader's keys, and the writer's MiB/s).
    pub fn key(self) -> &'static str {
        match self {
            Figure::P50 => "p50_us",
            Figure::P99 => "p99_us",
            Figure::P99_9 => "p99_9_us",
            Figure::Max => "max_us",
            Figure::Iops => "iops",
            Figure::WriterMibS => "writer_mib_s",
        }
    }

    pub fn of(self, s: &ConfigSummary) -> Option<f64> {
        let r = &s.reader;
        match self {
            Figure::P50 => Some(r.p50_us),
            Figure::P99 => Some(r.p99_us),
            Figure::P99_9 => Some(r.p99_9_us),
            Figure::Max => Some(r.max_us),
            Figure::Iops => Some(r.iops),
            Figure::WriterMibS => s.writer_mib_s,
        }
        .filter(|x| x.is_finite())
    }

    /// Latencies are better low; IOPS and writer MiB/s high.
    fn lower_is_better(self) -> bool {
        matches!(
            self,
            Figure::P50 | Figure::P99 | Figure::P99_9 | Figure::Max
        )
    }
}

/// The best kernel configuration at one figure, and its value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Best {
    pub figure: Figure,
    pub config: BenchConfig,
    pub value: f64,
}

/// For each figure, the kernel configuration that did best at it (empty if
/// no kernel configuration ran). A tie goes to the one listed first.
pub fn best_kernel(summaries: &[ConfigSummary]) -> Vec<Best> {
    Figure::ALL
        .into_iter()
        .filter_map(|figure| {
            let better = |a: f64, b: f64| {
                if figure.lower_is_better() {
                    a < b
                } else {
                    a > b
                }
            };
            summaries
                .iter()
                .filter(|s| s.config.is_kernel())
                .filter_map(|s| figure.of(s).map(|v| (s.config, v)))
                .fold(None, |best: Option<Best>, (config, value)| match best {
                    Some(b) if !better(value, b.value) => Some(b),
                    _ => Some(Best {
                        figure,
                        config,
                        value,
                    }),
                })
        })
        .collect()
}

/// The table of ratios to the best kernel configuration at each figure,
/// for the configurations that are not the kernel's (empty without both).
pub fn render_best_kernel(summaries: &[ConfigSummary], out: &mut Doc) {
    let best = best_kernel(summaries);
    let others: Vec<&ConfigSummary> = summaries
        .iter()
        .filter(|s| !s.config.is_kernel() && s.config != BenchConfig::Floor)
        .collect();
    if best.is_empty() || others.is_empty() {
        return;
    }
    let mut t = Table::new(&[
        "ratio to best kernel",
        "p50",
        "p99",
        "p99.9",
        "max",
        "IOPS",
        "writer",
    ]);
    let cell = |figure: Figure, f: &dyn Fn(&Best) -> String| {
        best.iter()
            .find(|b| b.figure == figure)
            .map_or("-".into(), f)
    };
    for s in others {
        t.row(
            std::iter::once(s.name())
                .chain(
                    Figure::ALL
                        .into_iter()
                        .map(|figure| cell(figure, &|b| table::ratio(figure.of(s), Some(b.value)))),
                )
                .collect(),
        );
    }
    t.row(
        std::iter::once("(best kernel)".to_string())
            .chain(
                Figure::ALL
                    .into_iter()
                    .map(|figure| cell(figure, &|b| b.config.name().to_string())),
            )
            .collect(),
    );
    out.push('\n');
    out.table(t);
    out.push_str(
        "(the best kernel configuration chosen per column: lowest latency, highest IOPS \
         and writer MiB/s)\n",
    );
}

#[cfg(test)]
mod tests {
    use super::super::report::tests::{sample, summary};
    use super::*;

    #[test]
    fn best_kernel_is_chosen_per_figure_among_kernel_configs_only() {
        let best = best_kernel(&sample());
        let got: Vec<(&str, &str, f64)> = best
            .iter()
            .map(|b| (b.figure.key(), b.config.name(), b.value))
            .collect();
        assert_eq!(
            got,
            [
                ("p50_us", "kernel-kyber", 15.0),
                ("p99_us", "kernel-dontcache", 400.0),
                ("p99_9_us", "kernel-kyber", 3000.0),
                ("max_us", "kernel-bfq", 70000.0),
                ("iops", "kernel-kyber", 1500.0),
                ("writer_mib_s", "kernel-dontcache", 700.0),
            ]
        );
        // A tie goes to the configuration listed first.
        let tie = [
            summary(BenchConfig::Kernel, [1.0; 4], 5.0, Some(5.0)),
            summary(BenchConfig::KernelBfq, [1.0; 4], 5.0, Some(5.0)),
        ];
        assert!(best_kernel(&tie)
            .iter()
            .all(|b| b.config == BenchConfig::Kernel));
        // No kernel configuration: nothing to compare with.
        let engine_only = [summary(BenchConfig::Engine, [1.0; 4], 5.0, Some(5.0))];
        assert!(best_kernel(&engine_only).is_empty());
    }

    #[test]
    fn best_kernel_table_has_a_row_per_engine_config_and_names_the_best() {
        let mut doc = Doc::new();
        render_best_kernel(&sample(), &mut doc);
        let text = doc.to_string();
        let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
        assert!(lines[0].starts_with("ratio to best kernel"), "{text}");
        // engine p99 200 / best 400 = 0.50x; IOPS 3000 / 1500 = 2.00x.
        assert!(lines[2].starts_with("engine "), "{text}");
        assert!(
            lines[2].contains("0.50x") && lines[2].contains("2.00x"),
            "{text}"
        );
        assert!(lines[3].starts_with("(best kernel)"), "{text}");
        assert!(lines[3].contains("kernel-bfq"), "{text}");
        assert!(!text.contains("\nfloor"), "{text}");
        let mut doc = Doc::new();
        render_best_kernel(&sample()[..2], &mut doc);
        assert_eq!(doc.to_string(), "");
    }
}
