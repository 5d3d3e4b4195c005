//! The HTML reports (`--html`, `wb report`) read back as a browser would
//! parse them: every plot promised is there and has data from every run.

use scraper::{ElementRef, Html, Selector};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

mod common;
use common::wb;

/// The colours of the first two runs, as plotters writes them.
const RUN_STROKES: [&str; 2] = ["#1F77B4", "#D62728"];

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wb-report-test-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn scenario(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name)
        .to_str()
        .expect("UTF-8 path")
        .to_string()
}

fn select(s: &str) -> Selector {
    Selector::parse(s).expect("valid selector")
}

/// Points of a polyline's `points` attribute.
fn points(line: ElementRef<'_>) -> Vec<(f64, f64)> {
    line.value()
        .attr("points")
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|p| {
            let (x, y) = p.split_once(',')?;
            Some((x.parse().ok()?, y.parse().ok()?))
        })
        .collect()
}

/// The page's figures: id → for each run colour, the points of its lines
/// (line plots) or the widths of its bars (bar charts).
fn figures(html: &str) -> Vec<(String, [Vec<f64>; 2])> {
    let doc = Html::parse_document(html);
    let mut out = Vec::new();
    for figure in doc.select(&select("figure.plot")) {
        let id = figure
            .value()
            .attr("data-plot")
            .expect("named figure")
            .to_string();
        let svg = figure.select(&select("svg")).next().expect("an inline SVG");
        let mut per_run: [Vec<f64>; 2] = Default::default();
        for (r, color) in RUN_STROKES.iter().enumerate() {
            for line in svg.select(&select("polyline")) {
                if line.value().attr("stroke") == Some(color) {
                    per_run[r].extend(points(line).iter().map(|&(_, y)| y));
                }
            }
            for bar in svg.select(&select("rect")) {
                if bar.value().attr("fill") == Some(color) {
                    let width: f64 = bar
                        .value()
                        .attr("width")
                        .unwrap_or("0")
                        .parse()
                        .unwrap_or(0.0);
                    per_run[r].push(width);
                }
            }
        }
        out.push((id, per_run));
    }
    out
}

/// The page `wb` wrote to `html`, after checking it succeeded.
fn page_of(out: &std::process::Output, html: &Path) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(html).expect("report written")
}

fn ids(figures: &[(String, [Vec<f64>; 2])]) -> BTreeSet<String> {
    figures.iter().map(|(id, _)| id.clone()).collect()
}

/// Every figure has lines or bars of both runs, and some of them move
/// (not a flat line at zero).
fn assert_every_plot_has_data_of_both_runs(figures: &[(String, [Vec<f64>; 2])]) {
    for (id, runs) in figures {
        for (r, values) in runs.iter().enumerate() {
            assert!(
                values.len() >= 2 || id == "stalls" && !values.is_empty(),
                "{id}: run {r} has no data"
            );
        }
        let all: Vec<f64> = runs.iter().flatten().copied().collect();
        let (lo, hi) = all
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
        assert!(hi > lo, "{id}: every point is the same");
    }
}

#[test]
fn sim_compare_html_has_every_plot_with_both_runs() {
    let dir = temp_dir("compare");
    let html = dir.join("axboe.html");
    let out = wb(&[
        "sim",
        &scenario("axboe-2016.toml"),
        "--compare",
        "wbt_lat_usec=0,-1",
        "--html",
        html.to_str().expect("UTF-8"),
    ]);
    let text = page_of(&out, &html);
    // Self-contained: nothing fetched, nothing run.
    assert!(!text.contains("<script"), "no JavaScript");
    let outside = text.replace("\"http://www.w3.org/2000/svg\"", "");
    assert!(
        !outside.contains("http:") && !outside.contains("https:"),
        "no link out"
    );
    let figures = figures(&text);
    let expected: BTreeSet<String> = [
        "latency/writers",
        "latency/reader",
        "dirty",
        "cached",
        "reads/disk",
        "writes/disk",
        "wbt/disk",
        "stalls",
    ]
    .map(String::from)
    .into();
    assert_eq!(ids(&figures), expected);
    assert_every_plot_has_data_of_both_runs(&figures);
    // The summary line compares the reader's p99 with wbt off and on.
    let doc = Html::parse_document(&text);
    let paragraphs: Vec<String> = doc
        .select(&select("p"))
        .map(|p| p.text().collect::<String>())
        .collect();
    assert!(
        paragraphs
            .iter()
            .any(|p| p.starts_with("reader p99: ") && p.contains("with wbt_lat_usec=-1 (")),
        "{paragraphs:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn wb_report_draws_saved_results_and_refuses_what_is_not_one() {
    let dir = temp_dir("saved");
    let (on, off) = (dir.join("on.json"), dir.join("off.json"));
    for (path, set) in [(&on, "wbt_lat_usec=-1"), (&off, "wbt_lat_usec=0")] {
        let out = wb(&["sim", &scenario("axboe-2016.toml"), "--set", set, "--json"]);
        assert!(out.status.success());
        std::fs::write(path, &out.stdout).expect("save");
    }
    let html = dir.join("r.html");
    let out = wb(&[
        "report",
        on.to_str().expect("UTF-8"),
        off.to_str().expect("UTF-8"),
        "-o",
        html.to_str().expect("UTF-8"),
    ]);
    let text = page_of(&out, &html);
    let figures = figures(&text);
    assert_eq!(figures.len(), 8, "{:?}", ids(&figures));
    assert_every_plot_has_data_of_both_runs(&figures);
    // The runs are named after their files.
    let doc = Html::parse_document(&text);
    let runs: Vec<String> = doc
        .select(&select("ul.runs b"))
        .map(|b| b.text().collect())
        .collect();
    assert_eq!(runs, ["on", "off"]);

    // Not a result: exit 2, the file named.
    let garbage = dir.join("garbage.json");
    std::fs::write(&garbage, "{\"hello\": 1}").expect("write");
    let out = wb(&[
        "report",
        garbage.to_str().expect("UTF-8"),
        "-o",
        html.to_str().expect("UTF-8"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "wb report: {}: not a result of",
            garbage.display()
        )),
        "{stderr}"
    );
    // A report that cannot be written: exit 2 before anything else.
    let out = wb(&[
        "report",
        on.to_str().expect("UTF-8"),
        "-o",
        "/nonexistent/dir/r.html",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("cannot write the report to /nonexistent/dir/r.html"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fresh directory beside the build for real I/O, or None (after a
/// skip, which fails under WB_REQUIRE_ALL_TESTS) without O_DIRECT there.
fn direct_dir(name: &str) -> Option<PathBuf> {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("wb-report-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&base).expect("a directory for the run");
    if !writeback::io::supports_direct(&base) {
        let _ = std::fs::remove_dir_all(&base);
        wb_testkit::skip(&format!("{} does not support O_DIRECT", base.display()));
        return None;
    }
    Some(base)
}

/// `wb run --html`: the real runtime's report has the job's latency, the
/// dirty pages and the device's writes over time.
#[test]
fn run_html_plots_the_real_run() {
    let Some(base) = direct_dir("run") else {
        return;
    };
    let scenario = base.join("s.toml");
    std::fs::write(
        &scenario,
        r#"
name = "writes"
seed = 1
[cache]
memory = "64MiB"
[[device]]
name = "disk"
model = "nvme"
[[job]]
name = "w"
kind = "writer"
device = "disk"
files = 2
file_size = "32MiB"
sync = true
"#,
    )
    .expect("scenario");
    let html = base.join("run.html");
    let trace = base.join("run.json");
    let out = wb(&[
        "run",
        scenario.to_str().expect("UTF-8"),
        "--no-calibrate",
        "--dir",
        base.join("data").to_str().expect("UTF-8"),
        "--html",
        html.to_str().expect("UTF-8"),
        "--trace",
        trace.to_str().expect("UTF-8"),
        "--trace-events",
        "100",
    ]);
    // The trace keeps the last 100 events of more (how many more depends
    // on timing), and says so.
    common::bounded_trace(&out, &trace, 100);
    let text = std::fs::read_to_string(&html).expect("report written");
    let figures = figures(&text);
    let found = ids(&figures);
    for id in ["latency/w", "dirty", "cached", "writes/disk"] {
        assert!(found.contains(id), "{id} missing: {found:?}");
    }
    for (id, [run, _]) in &figures {
        assert!(
            run.len() >= 2 || id == "stalls" && !run.is_empty(),
            "{id}: no data"
        );
    }
    let _ = std::fs::remove_dir_all(&base);
}

/// `wb bench … --html`: the benchmark's tables as a page, a bar chart per
/// measured column with a bar per configuration that has a value.
#[test]
fn bench_html_charts_every_measured_column() {
    let Some(base) = direct_dir("bench") else {
        return;
    };
    let html = base.join("cached.html");
    let dir = base.join("files");
    let out = wb(&[
        "bench",
        "cached",
        "--seconds",
        "1",
        "--repeat",
        "1",
        "--dir",
        dir.to_str().expect("UTF-8"),
        "--html",
        html.to_str().expect("UTF-8"),
    ]);
    let text = page_of(&out, &html);
    let doc = Html::parse_document(&text);
    // The table as printed: 8 rows (kernel and engine, read and write, 1
    // and 2 threads) under a header.
    assert_eq!(doc.select(&select("table tr")).count(), 9);
    let figures = figures(&text);
    assert_eq!(
        ids(&figures),
        ["table1/ops/s", "table1/engine/kernel", "table1/2 threads/1"]
            .map(String::from)
            .into()
    );
    let bars = |id: &str| {
        figures
            .iter()
            .find(|(f, _)| f == id)
            .map(|(_, [run, _])| run.len())
    };
    // Every row has ops/s; engine rows have a ratio to the kernel; 2-thread
    // rows a ratio to 1 thread.
    assert_eq!(bars("table1/ops/s"), Some(8));
    assert_eq!(bars("table1/engine/kernel"), Some(4));
    assert_eq!(bars("table1/2 threads/1"), Some(4));
    for (id, [run, _]) in &figures {
        assert!(run.iter().all(|&w| w > 0.0), "{id}: an empty bar");
    }
    // A page that cannot be written: exit 2 before any measurement.
    let out = wb(&[
        "bench",
        "cached",
        "--dir",
        dir.to_str().expect("UTF-8"),
        "--html",
        "/nonexistent/dir/b.html",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("wb bench: cannot write the report to /nonexistent/dir/b.html"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&base);
}
