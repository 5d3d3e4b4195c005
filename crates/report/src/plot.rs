//! Drawing: a [`Plot`] (lines over time), a [`Bars`] chart (a value per
//! category and run) or a [`Scatter`] (labelled points) becomes one inline SVG, through plotters' SVG
//! backend. Nothing here knows what the values mean.

use crate::ReportError;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::CoordTranslate;
use plotters::prelude::*;

/// Size of every chart, in CSS pixels.
pub const WIDTH_PX: u32 = 1000;
pub const HEIGHT_PX: u32 = 300;

/// Colours of the runs, in order (a seventh run takes the first again).
const RUN_COLORS: [RGBColor; 6] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x8c, 0x56, 0x4b),
];

/// The colour of run `run`, also as CSS (for the page's legend).
pub fn run_color(run: usize) -> RGBColor {
    RUN_COLORS[run % RUN_COLORS.len()]
}

pub fn run_css_color(run: usize) -> String {
    let RGBColor(r, g, b) = run_color(run);
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// How a line is drawn: its run's colour, solid or dashed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stroke {
    Solid,
    Dashed,
    /// Thin: a limit or a second figure of the same run.
    Thin,
}

/// One line of a plot, in the colour of its run. The page's legend names
/// the runs and each plot's caption says what its strokes mean.
#[derive(Clone, Debug)]
pub struct Line {
    pub run: usize,
    pub stroke: Stroke,
    /// (seconds, value), in time order.
    pub points: Vec<(f64, f64)>,
}

/// Lines over time on one pair of axes.
#[derive(Clone, Debug)]
pub struct Plot {
    pub title: String,
    /// What the strokes mean, and how the values were taken.
    pub caption: String,
    pub y_desc: String,
    /// A log scale (latencies that span orders of magnitude).
    pub log_y: bool,
    pub lines: Vec<Line>,
}

/// A log axis from the whole decade below the smallest value above zero
/// (at least 1e-3) to the whole decade at or above `max`, at least one
/// decade wide.
fn decades(values: impl Iterator<Item = f64>, max: f64) -> (f64, f64) {
    let min = values.filter(|&y| y > 0.0).fold(f64::INFINITY, f64::min);
    let lo = 10f64.powf(min.min(max).max(1e-3).log10().floor());
    let hi = 10f64.powf(max.max(lo * 10.0).log10().ceil());
    (lo, hi)
}

impl Plot {
    /// Whether any line has a point off zero: a plot of nothing but zeros
    /// is left out of the page.
    pub fn has_data(&self) -> bool {
        self.lines
            .iter()
            .any(|l| l.points.iter().any(|&(_, y)| y != 0.0))
    }

    /// The plot as an SVG element.
    pub fn svg(&self) -> Result<String, ReportError> {
        svg_of(&self.title, |svg| self.draw(svg))
    }

    fn draw(&self, svg: &mut String) -> Result<(), Box<dyn std::error::Error>> {
        let root = SVGBackend::with_string(svg, (WIDTH_PX, HEIGHT_PX)).into_drawing_area();
        root.fill(&WHITE)?;
        let points = || self.lines.iter().flat_map(|l| l.points.iter().copied());
        let x_max = points().map(|(x, _)| x).fold(0.0, f64::max).max(1e-3);
        let y_max = points().map(|(_, y)| y).fold(0.0, f64::max);
        let mut builder = ChartBuilder::on(&root);
        builder
            .caption(&self.title, ("sans-serif", 18))
            .margin(8)
            .x_label_area_size(40)
            .y_label_area_size(70);
        if self.log_y {
            // From the smallest value above zero to the largest, in
            // whole decades.
            let (lo, hi) = decades(points().map(|(_, y)| y), y_max);
            let mut chart = builder.build_cartesian_2d(0f64..x_max, (lo..hi).log_scale())?;
            chart
                .configure_mesh()
                .x_desc("time (s)")
                .y_desc(&self.y_desc)
                .draw()?;
            self.draw_lines(&mut chart, Some(lo))?;
        } else {
            let hi = if y_max > 0.0 { y_max * 1.08 } else { 1.0 };
            let mut chart: ChartContext<_, Cartesian2d<RangedCoordf64, RangedCoordf64>> =
                builder.build_cartesian_2d(0f64..x_max, 0f64..hi)?;
            chart
                .configure_mesh()
                .x_desc("time (s)")
                .y_desc(&self.y_desc)
                .draw()?;
            self.draw_lines(&mut chart, None)?;
        }
        root.present()?;
        Ok(())
    }

    /// Draws the lines; on a log scale values below `floor` sit on it.
    fn draw_lines<'a, 'b: 'a, CT: CoordTranslate<From = (f64, f64)>>(
        &self,
        chart: &mut ChartContext<'a, SVGBackend<'b>, CT>,
        floor: Option<f64>,
    ) -> Result<(), Box<dyn std::error::Error>> {
        for line in &self.lines {
            let color = run_color(line.run);
            let style = match line.stroke {
                Stroke::Solid | Stroke::Dashed => color.stroke_width(2),
                Stroke::Thin => color.mix(0.6).stroke_width(1),
            };
            let points: Vec<(f64, f64)> = line
                .points
                .iter()
                .map(|&(x, y)| (x, floor.map_or(y, |f| y.max(f))))
                .collect();
            match line.stroke {
                Stroke::Dashed => chart.draw_series(DashedLineSeries::new(points, 6, 4, style))?,
                Stroke::Solid | Stroke::Thin => {
                    chart.draw_series(LineSeries::new(points, style))?
                }
            };
        }
        Ok(())
    }
}

/// A value per category and run, as horizontal bars grouped by category.
#[derive(Clone, Debug)]
pub struct Bars {
    pub title: String,
    /// Width of the chart in CSS pixels (its height follows the bars).
    pub width_px: u32,
    pub x_desc: String,
    pub categories: Vec<String>,
    /// Per run (in the order of the page's runs, whose colours they
    /// take): one value per category.
    pub runs: Vec<Vec<f64>>,
}

impl Bars {
    /// The chart as an SVG element.
    pub fn svg(&self) -> Result<String, ReportError> {
        svg_of(&self.title, |svg| self.draw(svg))
    }

    fn draw(&self, svg: &mut String) -> Result<(), Box<dyn std::error::Error>> {
        let runs = self.runs.len().max(1);
        // Each category takes a slot per run and one of space.
        let group = runs + 1;
        let slots = (self.categories.len() * group) as u32;
        let height = (70 + 16 * slots).max(140);
        let root = SVGBackend::with_string(svg, (self.width_px, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let x_max = self
            .runs
            .iter()
            .flat_map(|v| v.iter().copied())
            .fold(0.0, f64::max);
        let mut chart = ChartBuilder::on(&root)
            .caption(&self.title, ("sans-serif", 18))
            .margin(8)
            .x_label_area_size(40)
            .y_label_area_size(150)
            .build_cartesian_2d(
                0f64..(x_max * 1.08).max(1e-3),
                (0u32..slots).into_segmented(),
            )?;
        // The first category at the top, as in a table: slots count up
        // from the bottom.
        let n = self.categories.len();
        let slot_of = |category: usize, run: usize| ((n - 1 - category) * group + run) as u32;
        let name = |v: &SegmentValue<u32>| match *v {
            // plotters may ask for a label past the last slot: none there.
            SegmentValue::CenterOf(k) if (k as usize) % group == runs / 2 => (n - 1)
                .checked_sub(k as usize / group)
                .and_then(|c| self.categories.get(c))
                .cloned()
                .unwrap_or_default(),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(slots as usize)
            .y_label_formatter(&name)
            .x_label_formatter(&|v| short_number(*v))
            .x_desc(&self.x_desc)
            .draw()?;
        for (r, values) in self.runs.iter().enumerate() {
            let color = run_color(r);
            let bars = values.iter().enumerate().map(move |(c, &v)| {
                let slot = slot_of(c, r);
                Rectangle::new(
                    [
                        (0.0, SegmentValue::Exact(slot)),
                        (v, SegmentValue::Exact(slot + 1)),
                    ],
                    color.filled(),
                )
            });
            chart.draw_series(bars)?;
        }
        root.present()?;
        Ok(())
    }
}

/// One point of a [`Scatter`], with the name written beside it.
#[derive(Clone, Debug, PartialEq)]
pub struct LabelledPoint {
    pub label: String,
    pub x: f64,
    pub y: f64,
    /// Ringed: the point the others are judged against.
    pub marked: bool,
}

/// Points in the colour of run `run`, joined by a line in their order if
/// `joined`.
#[derive(Clone, Debug, PartialEq)]
pub struct PointGroup {
    pub run: usize,
    pub joined: bool,
    pub points: Vec<LabelledPoint>,
}

/// Labelled points on a linear x axis from 0 and a (log) y axis, with
/// dashed horizontal reference lines (label, y) across.
#[derive(Clone, Debug, PartialEq)]
pub struct Scatter {
    pub title: String,
    pub width_px: u32,
    pub height_px: u32,
    pub x_desc: String,
    pub y_desc: String,
    pub log_y: bool,
    pub groups: Vec<PointGroup>,
    pub references: Vec<(String, f64)>,
}

/// Grey of reference lines and their labels.
const REFERENCE_COLOR: RGBColor = RGBColor(0x60, 0x60, 0x60);

impl Scatter {
    /// The chart as an SVG element.
    pub fn svg(&self) -> Result<String, ReportError> {
        svg_of(&self.title, |svg| self.draw(svg))
    }

    fn points(&self) -> impl Iterator<Item = &LabelledPoint> {
        self.groups.iter().flat_map(|g| g.points.iter())
    }

    fn draw(&self, svg: &mut String) -> Result<(), Box<dyn std::error::Error>> {
        let root =
            SVGBackend::with_string(svg, (self.width_px, self.height_px)).into_drawing_area();
        root.fill(&WHITE)?;
        // Room on the right for the labels of the fastest points.
        let x_max = self.points().map(|p| p.x).fold(0.0, f64::max).max(1e-3) * 1.2;
        let ys = || {
            self.points()
                .map(|p| p.y)
                .chain(self.references.iter().map(|&(_, y)| y))
                .filter(|y| y.is_finite())
        };
        let y_max = ys().fold(0.0, f64::max);
        let mut builder = ChartBuilder::on(&root);
        builder
            .caption(&self.title, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(40)
            .y_label_area_size(60);
        if self.log_y {
            let (lo, hi) = decades(ys(), y_max);
            let mut chart = builder.build_cartesian_2d(0f64..x_max, (lo..hi).log_scale())?;
            chart
                .configure_mesh()
                .x_desc(&self.x_desc)
                .y_desc(&self.y_desc)
                .x_label_formatter(&|v| short_number(*v))
                .draw()?;
            self.draw_marks(&mut chart, x_max, Some(lo))?;
        } else {
            let hi = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
            let mut chart: ChartContext<_, Cartesian2d<RangedCoordf64, RangedCoordf64>> =
                builder.build_cartesian_2d(0f64..x_max, 0f64..hi)?;
            chart
                .configure_mesh()
                .x_desc(&self.x_desc)
                .y_desc(&self.y_desc)
                .x_label_formatter(&|v| short_number(*v))
                .draw()?;
            self.draw_marks(&mut chart, x_max, None)?;
        }
        root.present()?;
        Ok(())
    }

    /// The reference lines, the joining lines, then the points and their
    /// labels; on a log scale values below `floor` sit on it.
    fn draw_marks<'a, 'b: 'a, CT: CoordTranslate<From = (f64, f64)>>(
        &self,
        chart: &mut ChartContext<'a, SVGBackend<'b>, CT>,
        x_max: f64,
        floor: Option<f64>,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let at = |x: f64, y: f64| (x, floor.map_or(y, |f| y.max(f)));
        let font = ("sans-serif", 12).into_font();
        let mut taken: Vec<Boxed> = Vec::new();
        for (label, y) in &self.references {
            let line = vec![at(0.0, *y), at(x_max, *y)];
            let style = REFERENCE_COLOR.stroke_width(1);
            chart.draw_series(DashedLineSeries::new(line, 5, 4, style))?;
            let text = font.color(&REFERENCE_COLOR);
            let (x0, y0) = chart.plotting_area().map_coordinate(&at(0.0, *y));
            let w = (label.chars().count() as f64 * LABEL_CHAR_PX).ceil() as i32;
            taken.push([x0 + 4, y0 - 14, x0 + 4 + w, y0 - 14 + LABEL_HEIGHT_PX]);
            chart.draw_series(std::iter::once(
                EmptyElement::at(at(0.0, *y)) + Text::new(label.clone(), (4, -14), text),
            ))?;
        }
        for group in self.groups.iter().filter(|g| g.joined) {
            let color = run_color(group.run);
            let line: Vec<(f64, f64)> = group.points.iter().map(|p| at(p.x, p.y)).collect();
            chart.draw_series(LineSeries::new(line, color.stroke_width(2)))?;
        }
        // Dots first, then each label where it covers no dot and no
        // label placed before it (beside its dot if it can).
        for group in &self.groups {
            let color = run_color(group.run);
            for p in &group.points {
                let (cx, cy) = chart.plotting_area().map_coordinate(&at(p.x, p.y));
                let r = if p.marked { 9 } else { 4 };
                taken.push([cx - r, cy - r, cx + r, cy + r]);
                let dot = Circle::new(at(p.x, p.y), 4, color.filled());
                chart.draw_series(std::iter::once(dot))?;
                if p.marked {
                    let ring = Circle::new(at(p.x, p.y), 9, color.stroke_width(2));
                    chart.draw_series(std::iter::once(ring))?;
                }
            }
        }
        for group in &self.groups {
            let text = font.color(&run_color(group.run));
            for p in &group.points {
                let anchor = chart.plotting_area().map_coordinate(&at(p.x, p.y));
                let offset = place_label(anchor, &p.label, &mut taken);
                let label = Text::new(p.label.clone(), offset, text.clone());
                chart.draw_series(std::iter::once(EmptyElement::at(at(p.x, p.y)) + label))?;
            }
        }
        Ok(())
    }
}

/// A box in pixels: left, top, right, bottom.
type Boxed = [i32; 4];

/// Height of a point's label in pixels, and the width of one of its
/// characters (12 px sans-serif, as plotters writes it: 9.7 px).
const LABEL_HEIGHT_PX: i32 = 11;
const LABEL_CHAR_PX: f64 = 5.6;

/// Where (as an offset from its point at `anchor`) a label goes: the
/// first of the places around the point where it overlaps nothing in
/// `taken` (else the first), which it then takes.
fn place_label(anchor: (i32, i32), label: &str, taken: &mut Vec<Boxed>) -> (i32, i32) {
    let w = (label.chars().count() as f64 * LABEL_CHAR_PX).ceil() as i32;
    let h = LABEL_HEIGHT_PX;
    let candidates = [
        (7, -h - 2),
        (7, 2),
        (-7 - w, -h - 2),
        (-7 - w, 2),
        (-w / 2, -h - 8),
        (-w / 2, 8),
        (7, -2 * h - 4),
        (7, h + 4),
    ];
    let boxed = |(dx, dy): (i32, i32)| {
        let (x, y) = (anchor.0 + dx, anchor.1 + dy);
        [x, y, x + w, y + h]
    };
    let overlaps = |a: &Boxed, b: &Boxed| a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3];
    let offset = candidates
        .into_iter()
        .find(|&c| !taken.iter().any(|t| overlaps(&boxed(c), t)))
        .unwrap_or(candidates[0]);
    taken.push(boxed(offset));
    offset
}

/// What `draw` draws into a string, or why it could not (named by the
/// chart's `title`).
fn svg_of(
    title: &str,
    draw: impl FnOnce(&mut String) -> Result<(), Box<dyn std::error::Error>>,
) -> Result<String, ReportError> {
    let mut svg = String::new();
    draw(&mut svg).map_err(|e| ReportError::Plot {
        title: title.to_string(),
        message: e.to_string(),
    })?;
    Ok(svg)
}

/// An axis label without needless digits: 0.25, 12, 3.5k, 1.2M.
fn short_number(v: f64) -> String {
    let a = v.abs();
    let (scaled, unit) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let text = format!("{scaled:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}{unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(label: &str, x: f64, y: f64, marked: bool) -> LabelledPoint {
        LabelledPoint {
            label: label.into(),
            x,
            y,
            marked,
        }
    }

    #[test]
    fn a_scatter_draws_its_points_labels_lines_and_references() {
        let scatter = Scatter {
            title: "p99 <vs> MiB/s".into(),
            width_px: 400,
            height_px: 300,
            x_desc: "MiB/s".into(),
            y_desc: "ms".into(),
            log_y: true,
            groups: vec![
                PointGroup {
                    run: 0,
                    joined: false,
                    points: vec![point("a", 100.0, 50.0, false), point("b", 200.0, 5.0, true)],
                },
                PointGroup {
                    run: 1,
                    joined: true,
                    points: vec![point("x", 10.0, 1.0, false), point("y", 30.0, 2.0, false)],
                },
            ],
            references: vec![("floor".into(), 0.05)],
        };
        let svg = scatter.svg().expect("drawn");
        assert!(svg.starts_with("<svg"), "{svg}");
        assert_eq!(svg.matches("<circle").count(), 5, "4 points and a ring");
        for label in ["a", "b", "x", "y", "floor"] {
            assert_eq!(
                svg.matches(&format!(">\n{label}\n</text>")).count(),
                1,
                "{label}"
            );
        }
        // The title's markup is escaped.
        assert!(!svg.contains("<vs>"));
        let joined = svg
            .split("<polyline")
            .filter(|l| l.contains(&format!("stroke=\"{}\"", run_css_color(1).to_uppercase())))
            .count();
        assert_eq!(joined, 1);
        // A linear scale draws too.
        let linear = Scatter {
            log_y: false,
            ..scatter
        };
        assert!(linear.svg().is_ok());
    }

    #[test]
    fn labels_of_points_close_together_do_not_overlap() {
        let overlaps =
            |a: &Boxed, b: &Boxed| a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3];
        // Three points on top of each other, their dots taken.
        let mut taken: Vec<Boxed> = vec![[96, 96, 104, 104]];
        let first = place_label((100, 100), "kernel-blkio", &mut taken);
        assert_eq!(first, (7, -LABEL_HEIGHT_PX - 2), "beside its dot when free");
        let second = place_label((100, 100), "kernel", &mut taken);
        let third = place_label((100, 100), "engine", &mut taken);
        assert!(first != second && second != third && first != third);
        let labels = &taken[1..];
        for (i, a) in labels.iter().enumerate() {
            assert!(!overlaps(a, &taken[0]), "a label covers the dot: {taken:?}");
            for b in &labels[i + 1..] {
                assert!(!overlaps(a, b), "{taken:?}");
            }
        }
    }

    #[test]
    fn axis_labels_are_short() {
        assert_eq!(short_number(0.0), "0");
        assert_eq!(short_number(0.25), "0.25");
        assert_eq!(short_number(12.0), "12");
        assert_eq!(short_number(3500.0), "3500");
        assert_eq!(short_number(35_000.0), "35k");
        assert_eq!(short_number(1_500_000.0), "1.5M");
        assert_eq!(short_number(2e9), "2G");
    }
}
