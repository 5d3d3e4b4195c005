//! The frontier of `wb bench interference --html`: what each configuration
//! buys in reader latency for what it costs in writer throughput.
//!
//! Two scatter plots, reader p99 and reader p50 (ms, log scale) against
//! writer MiB/s: a labelled point per kernel configuration; the engine's
//! other configurations as points of the engine's colour, its default one
//! (engine, or mount with --fuse) ringed; the --sweep points joined by a
//! line in the order given, each labelled with its value; the floor (the
//! reader alone) as a dashed line across. Rows without a writer figure
//! (the floor) are not points.

use super::configs::{BenchConfig, ConfigSummary};
use crate::bench::fio::ReaderResult;
use wb_report::plot::{run_css_color, LabelledPoint, PointGroup, Scatter};
use wb_report::{Figure, ReportError};

/// Size of each plot: two side by side.
const WIDTH_PX: u32 = 490;
const HEIGHT_PX: u32 = 380;
/// Colours (wb_report's run colours) of the kernel's points and the engine's.
const KERNEL_RUN: usize = 0;
const ENGINE_RUN: usize = 1;

/// The reader latency a plot shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Latency {
    P99,
    P50,
}

impl Latency {
    fn name(self) -> &'static str {
        match self {
            Latency::P99 => "p99",
            Latency::P50 => "p50",
        }
    }

    fn ms(self, r: &ReaderResult) -> f64 {
        match self {
            Latency::P99 => r.p99_us / 1000.0,
            Latency::P50 => r.p50_us / 1000.0,
        }
    }
}

/// The two plots, p99 then p50, for the HTML page.
pub fn figures(summaries: &[ConfigSummary]) -> Result<Vec<Figure>, ReportError> {
    [Latency::P99, Latency::P50]
        .into_iter()
        .map(|latency| {
            Ok(Figure {
                id: format!("frontier/{}", latency.name()),
                svg: scatter(summaries, latency).svg()?,
                caption: caption(summaries),
            })
        })
        .collect()
}

/// The configuration a --sweep varies, whose default row is ringed.
fn swept(summaries: &[ConfigSummary]) -> BenchConfig {
    summaries
        .iter()
        .find_map(|s| s.point.as_ref().map(|_| s.config))
        .unwrap_or(
            if summaries.iter().any(|s| s.config == BenchConfig::Mount) {
                BenchConfig::Mount
            } else {
                BenchConfig::Engine
            },
        )
}

fn caption(summaries: &[ConfigSummary]) -> String {
    let (kernel, engine) = (run_css_color(KERNEL_RUN), run_css_color(ENGINE_RUN));
    let mut text = format!(
        "Each configuration's median reader latency against its writer's MiB/s: lower is a \
         quieter reader, further right a faster writer. Kernel configurations in {kernel}, \
         the engine's in {engine}, {} ringed (its defaults)",
        swept(summaries).name()
    );
    if let Some(p) = summaries.iter().find_map(|s| s.point.as_ref()) {
        text.push_str(&format!(
            "; the line joins {}[{}=…] in the order given, each point labelled with its {}",
            swept(summaries).name(),
            p.knob,
            p.knob
        ));
    }
    text.push_str("; dashed: the floor (the reader alone).");
    text
}

/// One plot: reader `latency` against writer MiB/s.
fn scatter(summaries: &[ConfigSummary], latency: Latency) -> Scatter {
    let swept = swept(summaries);
    let point = |s: &ConfigSummary, label: String, marked: bool| {
        let x = s.writer_mib_s.filter(|x| x.is_finite() && *x >= 0.0)?;
        let y = latency.ms(&s.reader);
        y.is_finite().then_some(LabelledPoint {
            label,
            x,
            y,
            marked,
        })
    };
    let kernel: Vec<LabelledPoint> = summaries
        .iter()
        .filter(|s| s.config.is_kernel())
        .filter_map(|s| point(s, s.name(), false))
        .collect();
    let engine: Vec<LabelledPoint> = summaries
        .iter()
        .filter(|s| !s.config.is_kernel() && s.config != BenchConfig::Floor && s.point.is_none())
        .filter_map(|s| point(s, s.name(), s.config == swept))
        .collect();
    let sweep: Vec<LabelledPoint> = summaries
        .iter()
        .filter_map(|s| point(s, s.point.as_ref()?.value.clone(), false))
        .collect();
    let references = summaries
        .iter()
        .filter(|s| matches!(s.config, BenchConfig::Floor | BenchConfig::MountFloor))
        .map(|s| (s.name(), latency.ms(&s.reader)))
        .filter(|(_, y)| y.is_finite() && *y > 0.0)
        .collect();
    let group = |run, joined, points| PointGroup {
        run,
        joined,
        points,
    };
    Scatter {
        title: format!("reader {} vs writer throughput", latency.name()),
        width_px: WIDTH_PX,
        height_px: HEIGHT_PX,
        x_desc: "writer MiB/s".into(),
        y_desc: format!("reader {} ms", latency.name()),
        log_y: true,
        groups: vec![
            group(KERNEL_RUN, false, kernel),
            group(ENGINE_RUN, false, engine),
            group(ENGINE_RUN, true, sweep),
        ],
        references,
    }
}

#[cfg(test)]
mod tests {
    use super::super::sweep::SweepPoint;
    use super::*;

    fn summary(
        config: BenchConfig,
        value: Option<&str>,
        p50_ms: f64,
        p99_ms: f64,
        writer: Option<f64>,
    ) -> ConfigSummary {
        ConfigSummary {
            config,
            point: value.map(|v| SweepPoint {
                knob: "wbt_lat_usec".into(),
                value: v.into(),
            }),
            reader: ReaderResult {
                p50_us: p50_ms * 1000.0,
                p99_us: p99_ms * 1000.0,
                p99_9_us: p99_ms * 2000.0,
                max_us: p99_ms * 4000.0,
                iops: 1000.0,
            },
            writer_mib_s: writer,
        }
    }

    /// A run with a sweep whose writer speeds are not in knob order.
    fn sample() -> Vec<ConfigSummary> {
        vec![
            summary(BenchConfig::Floor, None, 0.1, 0.2, None),
            summary(BenchConfig::Kernel, None, 1.0, 90.0, Some(600.0)),
            summary(BenchConfig::KernelBfq, None, 2.0, 40.0, Some(400.0)),
            summary(BenchConfig::KernelDirty64m, None, 0.5, 20.0, Some(350.0)),
            // No writer figure: not a point.
            summary(BenchConfig::KernelDirect, None, 0.5, 20.0, None),
            summary(BenchConfig::EngineWbtOff, None, 1.0, 50.0, Some(700.0)),
            summary(BenchConfig::Engine, None, 0.3, 5.0, Some(500.0)),
            summary(BenchConfig::Engine, Some("500"), 0.2, 2.0, Some(300.0)),
            summary(BenchConfig::Engine, Some("1000"), 0.2, 3.0, Some(100.0)),
            summary(BenchConfig::Engine, Some("2000"), 0.25, 4.0, Some(200.0)),
        ]
    }

    /// The colour and text of each `<text>` element.
    fn texts(svg: &str) -> Vec<(String, String)> {
        svg.split("<text ")
            .skip(1)
            .filter_map(|t| {
                let fill = attr(&t[..t.find('>')?], "fill")?.to_uppercase();
                Some((
                    fill,
                    t[t.find('>')? + 1..t.find("</text>")?].trim().to_string(),
                ))
            })
            .collect()
    }

    /// The value of attribute `name` in the element text `element`
    /// (its attributes, after the tag's name).
    fn attr<'a>(element: &'a str, name: &str) -> Option<&'a str> {
        let key = format!("{name}=\"");
        let start = if element.starts_with(&key) {
            key.len()
        } else {
            element.find(&format!(" {key}"))? + key.len() + 1
        };
        let len = element[start..].find('"')?;
        Some(&element[start..start + len])
    }

    /// The elements `<tag .../>` of an SVG, as text.
    fn elements<'a>(svg: &'a str, tag: &str) -> Vec<&'a str> {
        svg.split(&format!("<{tag} "))
            .skip(1)
            .filter_map(|e| e.find("/>").map(|end| &e[..end]))
            .collect()
    }

    #[test]
    fn each_kernel_config_is_one_labelled_point_and_writerless_rows_are_skipped() {
        let svg = scatter(&sample(), Latency::P99).svg().expect("drawn");
        let texts = texts(&svg);
        let (kernel, engine) = (
            run_css_color(KERNEL_RUN).to_uppercase(),
            run_css_color(ENGINE_RUN).to_uppercase(),
        );
        let count = |color: &str, label: &str| {
            let is = |(c, t): &&(String, String)| c == color && t == label;
            texts.iter().filter(is).count()
        };
        for name in ["kernel", "kernel-bfq", "kernel-dirty64m"] {
            assert_eq!(count(&kernel, name), 1, "{name} in {texts:?}");
        }
        assert_eq!(count(&engine, "engine-wbt-off"), 1, "{texts:?}");
        assert_eq!(count(&engine, "engine"), 1, "{texts:?}");
        assert!(
            !texts.iter().any(|(_, t)| t == "kernel-direct"),
            "{texts:?}"
        );
        assert_eq!(texts.iter().filter(|(_, t)| t == "floor").count(), 1);
        // The sweep's points are labelled with their values (not all of
        // which differ from the axis' numbers: the colour tells).
        for value in ["500", "1000", "2000"] {
            assert_eq!(count(&engine, value), 1, "{value} in {texts:?}");
        }
        // Points: 3 kernel, engine-wbt-off and engine, 3 of the sweep;
        // one ring, around the default engine.
        let circles = elements(&svg, "circle");
        let (rings, dots): (Vec<&str>, Vec<&str>) = circles
            .iter()
            .partition(|c| attr(c, "fill") == Some("none"));
        assert_eq!(dots.len(), 8, "{circles:?}");
        assert_eq!(rings.len(), 1, "{circles:?}");
        let engine_dot = dots.iter().find(|d| {
            attr(d, "cx") == attr(rings[0], "cx") && attr(d, "cy") == attr(rings[0], "cy")
        });
        assert!(
            engine_dot.is_some(),
            "the ring is around no point: {circles:?}"
        );
    }

    #[test]
    fn the_sweep_is_one_line_through_its_points_in_knob_order() {
        let svg = scatter(&sample(), Latency::P99).svg().expect("drawn");
        let engine = run_css_color(ENGINE_RUN).to_uppercase();
        let lines: Vec<&str> = elements(&svg, "polyline")
            .into_iter()
            .filter(|l| attr(l, "stroke").map(str::to_uppercase) == Some(engine.clone()))
            .collect();
        assert_eq!(lines.len(), 1, "{lines:?}");
        let xs: Vec<i32> = attr(lines[0], "points")
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.split(',').next()?.parse().ok())
            .collect();
        // 500 (300 MiB/s), 1000 (100 MiB/s), 2000 (200 MiB/s), in that order.
        assert_eq!(xs.len(), 3, "{lines:?}");
        assert!(xs[1] < xs[2] && xs[2] < xs[0], "{xs:?}");
        // Each vertex is a sweep point's dot.
        let dots = elements(&svg, "circle");
        for x in &xs {
            let on_dot = dots.iter().any(|d| attr(d, "cx") == Some(&x.to_string()));
            assert!(on_dot, "vertex at x={x} is no point: {dots:?}");
        }
    }

    #[test]
    fn without_a_sweep_there_is_no_line_and_p50_is_drawn_too() {
        let rows: Vec<ConfigSummary> = sample().into_iter().filter(|s| s.point.is_none()).collect();
        let plot = scatter(&rows, Latency::P50);
        assert!(plot.groups.iter().all(|g| !g.joined || g.points.is_empty()));
        assert_eq!(plot.references, [("floor".to_string(), 0.1)]);
        let engine = plot.groups[1].points.iter().find(|p| p.label == "engine");
        assert_eq!(
            engine.map(|p| (p.x, p.y, p.marked)),
            Some((500.0, 0.3, true))
        );
        let figures = figures(&sample()).expect("drawn");
        let ids: Vec<&str> = figures.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["frontier/p99", "frontier/p50"]);
        assert!(figures[0].caption.contains("engine[wbt_lat_usec=…]"));
        assert!(figures[1].svg.contains("reader p50"));
    }

    #[test]
    fn with_fuse_the_mount_is_the_ringed_default() {
        let rows = vec![
            summary(BenchConfig::Floor, None, 0.1, 0.2, None),
            summary(BenchConfig::Kernel, None, 1.0, 90.0, Some(600.0)),
            summary(BenchConfig::Mount, None, 0.3, 5.0, Some(500.0)),
            summary(BenchConfig::Mount, Some("4000"), 0.3, 6.0, Some(550.0)),
        ];
        let plot = scatter(&rows, Latency::P99);
        let mount = &plot.groups[1].points;
        assert_eq!(mount.len(), 1);
        assert!(mount[0].marked && mount[0].label == "mount");
        assert_eq!(plot.groups[2].points[0].label, "4000");
    }
}
