//! A page of text and tables (what `wb bench` prints) with a bar chart for
//! every numeric column of every table, so the configurations a benchmark
//! compares (the kernel, the engine, …) can be taken in at a glance.

use crate::page::Page;
use crate::plot::Bars;
use crate::ReportError;

/// Width of one column chart: two side by side.
const COLUMN_CHART_PX: u32 = 490;

/// A part of a document, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    /// Lines of text, shown as they are.
    Text(String),
    /// A table; the first cell of each row names it.
    Table {
        headers: Vec<String>,
        rows: Vec<Vec<String>>,
    },
    /// Charts drawn by the caller, side by side (not part of the text).
    Figures(Vec<Figure>),
}

/// A chart drawn by the caller (an SVG element from [`crate::plot`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// Its name for whoever reads the page back.
    pub id: String,
    pub svg: String,
    pub caption: String,
}

/// The document as an HTML page titled `title`.
pub fn document(title: &str, blocks: &[Block]) -> Result<String, ReportError> {
    let mut page = Page::new(title);
    let mut tables = 0;
    for block in blocks {
        match block {
            Block::Text(text) if text.trim().is_empty() => {}
            Block::Text(text) => page.preformatted(text.trim_end()),
            Block::Table { headers, rows } => {
                tables += 1;
                let mut all = vec![headers.clone()];
                all.extend(rows.iter().cloned());
                page.table(&all);
                page.open_charts();
                for chart in column_charts(headers, rows) {
                    let id = format!("table{tables}/{}", chart.x_desc);
                    page.figure(&id, &chart.svg()?, "");
                }
                page.close_charts();
            }
            Block::Figures(figures) => {
                page.open_charts();
                for f in figures {
                    page.figure(&f.id, &f.svg, &f.caption);
                }
                page.close_charts();
            }
        }
    }
    Ok(page.finish())
}

/// A number as a table shows it: "1.23x", "45%", "1234", or None ("-",
/// blank, a name).
fn number(cell: &str) -> Option<f64> {
    let cell = cell.trim();
    let digits = cell
        .strip_suffix('x')
        .or_else(|| cell.strip_suffix('%'))
        .unwrap_or(cell);
    digits.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// What each row is called in a chart: its first cell, with the second
/// when the first alone does not tell rows apart (then the second column
/// is a setting, like threads, and gets no chart: the bool).
fn row_names(rows: &[Vec<String>]) -> (Vec<String>, bool) {
    let first = |r: &Vec<String>| r.first().cloned().unwrap_or_default();
    let twice = |name: &String| rows.iter().filter(|o| &first(o) == name).count() > 1;
    let with_second = rows.iter().any(|r| twice(&first(r)) && r.len() > 1);
    let names = rows
        .iter()
        .map(|r| match r.get(1) {
            Some(second) if with_second => format!("{} / {second}", first(r)),
            _ => first(r),
        })
        .collect();
    (names, with_second)
}

/// One chart per column (after the first, and the second when it names
/// rows) that has numbers in at least two rows, of the rows that have one.
fn column_charts(headers: &[String], rows: &[Vec<String>]) -> Vec<Bars> {
    let (names, second_names) = row_names(rows);
    let skip = if second_names { 2 } else { 1 };
    let mut charts = Vec::new();
    for (c, header) in headers.iter().enumerate().skip(skip) {
        let values: Vec<(String, f64)> = rows
            .iter()
            .zip(&names)
            .filter_map(|(row, name)| Some((name.clone(), number(row.get(c)?)?)))
            .collect();
        if values.len() < 2 {
            continue;
        }
        charts.push(Bars {
            title: header.clone(),
            width_px: COLUMN_CHART_PX,
            x_desc: header.clone(),
            categories: values.iter().map(|(n, _)| n.clone()).collect(),
            runs: vec![values.iter().map(|&(_, v)| v).collect()],
        });
    }
    charts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn numbers_are_read_as_tables_print_them() {
        assert_eq!(number("1.23x"), Some(1.23));
        assert_eq!(number(" 45% "), Some(45.0));
        assert_eq!(number("1234"), Some(1234.0));
        assert_eq!(number("-"), None);
        assert_eq!(number(""), None);
        assert_eq!(number("kernel"), None);
        assert_eq!(number("NaN"), None);
    }

    #[test]
    fn each_numeric_column_gets_a_chart_of_the_rows_that_have_a_value() {
        let headers = s(&["name", "threads", "ops/s", "engine/kernel"]);
        let rows = vec![
            s(&["kernel-read", "1", "100", ""]),
            s(&["kernel-read", "2", "180", ""]),
            s(&["engine-read", "1", "120", "1.20x"]),
            s(&["engine-read", "2", "200", "1.11x"]),
        ];
        let charts = column_charts(&headers, &rows);
        let titles: Vec<&str> = charts.iter().map(|c| c.title.as_str()).collect();
        assert_eq!(titles, ["ops/s", "engine/kernel"]);
        assert_eq!(charts[0].categories[1], "kernel-read / 2");
        assert_eq!(charts[0].runs, vec![vec![100.0, 180.0, 120.0, 200.0]]);
        assert_eq!(charts[1].categories, ["engine-read / 1", "engine-read / 2"]);
        let html = document(
            "wb bench cached",
            &[
                Block::Text("4 KiB ops <cached>\n".into()),
                Block::Table { headers, rows },
            ],
        )
        .expect("drawn");
        assert_eq!(html.matches("<figure class=\"plot\"").count(), 2);
        assert!(html.contains("<pre>4 KiB ops &lt;cached&gt;</pre>"));
    }

    #[test]
    fn figures_drawn_by_the_caller_sit_side_by_side_with_their_captions() {
        let figure = |id: &str| Figure {
            id: id.into(),
            svg: format!("<svg id=\"{id}\"></svg>"),
            caption: format!("about <{id}>"),
        };
        let html = document(
            "wb bench interference",
            &[Block::Figures(vec![
                figure("frontier/p99"),
                figure("frontier/p50"),
            ])],
        )
        .expect("drawn");
        let charts = html.find("<div class=\"charts\">").expect("a charts row");
        let p99 = html.find("data-plot=\"frontier/p99\"").expect("p99");
        let p50 = html.find("data-plot=\"frontier/p50\"").expect("p50");
        assert!(charts < p99 && p99 < p50, "{html}");
        assert!(html.contains("<svg id=\"frontier/p50\"></svg>"));
        assert!(html.contains("<figcaption>about &lt;frontier/p99&gt;</figcaption>"));
    }
}
