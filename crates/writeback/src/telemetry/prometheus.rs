//! The Prometheus text exposition format 0.0.4: for each family `# HELP`
//! and `# TYPE`, then one line per series (`name{label="value"} value`);
//! a histogram's series as cumulative `_bucket{le="…"}` lines ending with
//! `le="+Inf"`, then `_sum` and `_count`. Families without series are left
//! out (a cache without domains has no domain families).

use super::{Family, Histogram, Kind, Value};
use std::fmt::Write;
use wb_engine::StallStats;

/// Renders `families` in the text format, in their order.
pub fn render_prometheus(families: &[Family]) -> String {
    let mut out = String::new();
    for family in families.iter().filter(|f| !f.series.is_empty()) {
        // Writing to a String cannot fail.
        let _ = writeln!(out, "# HELP {} {}", family.name, escape_help(family.help));
        let _ = writeln!(out, "# TYPE {} {}", family.name, family.kind.name());
        for s in &family.series {
            match &s.value {
                Value::Histogram(h) => histogram(&mut out, family.name, &s.labels, h),
                v => sample(&mut out, family.name, "", &s.labels, None, &value_text(v)),
            }
        }
        debug_assert!(
            family.kind == Kind::Histogram
                || family
                    .series
                    .iter()
                    .all(|s| !matches!(s.value, Value::Histogram(_)))
        );
    }
    out
}

/// A histogram's lines: cumulative buckets, `_sum` in seconds, `_count`.
fn histogram(out: &mut String, name: &str, labels: &[(&'static str, String)], h: &Histogram) {
    let mut cumulative = 0;
    for (k, n) in h.buckets.iter().enumerate() {
        cumulative += n;
        let le = match StallStats::bucket_end_us(k) {
            Some(us) => fixed(us, 6),
            None => "+Inf".to_string(),
        };
        sample(
            out,
            name,
            "_bucket",
            labels,
            Some(&le),
            &cumulative.to_string(),
        );
    }
    sample(out, name, "_sum", labels, None, &fixed(h.sum_ns, 9));
    sample(out, name, "_count", labels, None, &h.count().to_string());
}

fn sample(
    out: &mut String,
    name: &str,
    suffix: &str,
    labels: &[(&'static str, String)],
    le: Option<&str>,
    value: &str,
) {
    out.push_str(name);
    out.push_str(suffix);
    let all = labels
        .iter()
        .map(|(k, v)| (*k, v.as_str()))
        .chain(le.map(|le| ("le", le)));
    for (i, (k, v)) in all.enumerate() {
        out.push(if i == 0 { '{' } else { ',' });
        let _ = write!(out, "{k}=\"{}\"", escape_label(v));
    }
    if !labels.is_empty() || le.is_some() {
        out.push('}');
    }
    out.push(' ');
    out.push_str(value);
    out.push('\n');
}

fn value_text(v: &Value) -> String {
    match *v {
        Value::Int(v) => v.to_string(),
        Value::Signed(v) => v.to_string(),
        Value::Fixed { units, decimals } => fixed(units, decimals),
        Value::Histogram(_) => unreachable!("histograms have lines of their own"),
    }
}

/// `units / 10^decimals` in decimal, exactly, without trailing zeros:
/// `fixed(1500, 3)` is `1.5`, `fixed(2000, 3)` is `2`.
fn fixed(units: u64, decimals: u32) -> String {
    let scale = 10u64.pow(decimals);
    let (whole, frac) = (units / scale, units % scale);
    if frac == 0 {
        return whole.to_string();
    }
    let digits = format!("{frac:0width$}", width = decimals as usize);
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// A label value: `\`, `"` and newline escaped.
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Help text: `\` and newline escaped.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::{Histogram, Kind};
    use wb_engine::STALL_BUCKETS;

    #[test]
    fn fixed_point_is_exact_and_short() {
        assert_eq!(fixed(1500, 3), "1.5");
        assert_eq!(fixed(2000, 3), "2");
        assert_eq!(fixed(0, 9), "0");
        assert_eq!(fixed(1, 6), "0.000001");
        assert_eq!(fixed(8_388_608, 6), "8.388608");
        assert_eq!(fixed(u64::MAX, 9), "18446744073.709551615");
    }

    #[test]
    fn counters_and_gauges_with_escaped_labels() {
        let families = [
            Family::single(
                "wb_x_total",
                "Things.\nMore \\ here.",
                Kind::Counter,
                Value::Int(7),
            ),
            Family::new("wb_y_seconds", "A time.", Kind::Gauge)
                .with(
                    vec![("device", "vda".into()), ("domain", "a\\b\"c\nd".into())],
                    Value::seconds_from_ns(1_250_000),
                )
                .with(vec![("device", "vdb".into())], Value::Signed(-3)),
            Family::new("wb_empty", "Left out.", Kind::Gauge),
        ];
        let text = render_prometheus(&families);
        assert_eq!(
            text,
            "# HELP wb_x_total Things.\\nMore \\\\ here.\n\
             # TYPE wb_x_total counter\n\
             wb_x_total 7\n\
             # HELP wb_y_seconds A time.\n\
             # TYPE wb_y_seconds gauge\n\
             wb_y_seconds{device=\"vda\",domain=\"a\\\\b\\\"c\\nd\"} 0.00125\n\
             wb_y_seconds{device=\"vdb\"} -3\n"
        );
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_end_with_inf() {
        let mut stalls = StallStats::default();
        for ns in [500, 1_500, 1_700, 600_000, 3_600_000_000_000] {
            stalls.record(ns);
        }
        let h = Histogram::from_stalls(&stalls);
        let families = [
            Family::new("wb_pause_duration_seconds", "Waits.", Kind::Histogram)
                .with(vec![("reason", "sync".into())], Value::Histogram(h)),
        ];
        let text = render_prometheus(&families);
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some("# HELP wb_pause_duration_seconds Waits.")
        );
        assert_eq!(
            lines.next(),
            Some("# TYPE wb_pause_duration_seconds histogram")
        );
        let buckets: Vec<&str> = lines.by_ref().take(STALL_BUCKETS).collect();
        let p = "wb_pause_duration_seconds_bucket{reason=\"sync\",le=";
        // Under 1 µs: 500 ns; under 2 µs: 1.5 and 1.7 µs too.
        assert_eq!(buckets[0], format!("{p}\"0.000001\"}} 1"));
        assert_eq!(buckets[1], format!("{p}\"0.000002\"}} 3"));
        assert_eq!(buckets[9], format!("{p}\"0.000512\"}} 3"));
        // 600 µs is in [512, 1024) µs.
        assert_eq!(buckets[10], format!("{p}\"0.001024\"}} 4"));
        assert_eq!(buckets[23], format!("{p}\"8.388608\"}} 4"));
        assert_eq!(buckets[24], format!("{p}\"+Inf\"}} 5"));
        let counts: Vec<u64> = buckets
            .iter()
            .map(|l| {
                l.rsplit(' ')
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0)
            })
            .collect();
        assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{counts:?}");
        assert_eq!(
            lines.next(),
            Some("wb_pause_duration_seconds_sum{reason=\"sync\"} 3600.0006037")
        );
        assert_eq!(
            lines.next(),
            Some("wb_pause_duration_seconds_count{reason=\"sync\"} 5")
        );
        assert_eq!(lines.next(), None);
    }
}
