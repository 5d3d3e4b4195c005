//! `wb-report`: one self-contained HTML file (inline SVG: no network, no
//! JavaScript) from the reports of one or more runs (`wb sim`, `wb run`,
//! `wb sim --compare`, or `wb report RESULT.json…`). Two or more runs are
//! drawn on the same axes, one colour each.
//!
//! What the page shows, in order:
//! - per job: latency percentiles as fio prints them, and latency over
//!   time (each slot's mean and longest);
//! - dirty, writeback and the dirty limit over time; pages cached;
//! - per device: read and write throughput over time (like vmstat's bi
//!   and bo) and wbt's depth;
//! - time stalled, by reason.
//!
//! [`document`] makes a page of text and tables (`wb bench --html`) with
//! a bar chart per numeric column, and any charts the caller drew
//! ([`Block::Figures`], e.g. a [`plot::Scatter`]).
//!
//! Plots with nothing but zeros (a device never read from, wbt off) are
//! left out, with a line saying so.

mod document;
mod page;
pub mod plot;
pub mod series;

pub use document::{document, Block, Figure};
use page::Page;
use wb_sim::report::RunReport;

/// One run to show, and what to call it (its knob value, its file, …).
pub struct Run<'a> {
    pub label: String,
    pub report: &'a RunReport,
}

/// Why a report could not be made.
#[derive(Debug, Clone, PartialEq)]
pub enum ReportError {
    /// Nothing to show.
    NoRuns,
    /// A plot could not be drawn.
    Plot { title: String, message: String },
}

impl std::fmt::Display for ReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReportError::NoRuns => f.write_str("no runs to report"),
            ReportError::Plot { title, message } => {
                write!(f, "cannot draw the plot '{title}': {message}")
            }
        }
    }
}

impl std::error::Error for ReportError {}

/// The report of `runs` as an HTML page titled `title`, with `summary`
/// lines (e.g. each job's p99 against the first run's) under the runs.
pub fn html(title: &str, summary: &[String], runs: &[Run<'_>]) -> Result<String, ReportError> {
    if runs.is_empty() {
        return Err(ReportError::NoRuns);
    }
    let mut page = Page::new(title);
    page.legend(
        &runs
            .iter()
            .map(|r| (r.label.clone(), about(r.report)))
            .collect::<Vec<_>>(),
    );
    for line in summary {
        page.paragraph(line);
    }
    jobs(&mut page, runs)?;
    page.heading(2, "Memory");
    plot(&mut page, "dirty", &series::dirty(runs))?;
    plot(&mut page, "cached", &series::cached(runs))?;
    page.heading(2, "Devices");
    for device in names(runs, |r| {
        r.engine.devices.iter().map(|d| d.name.clone()).collect()
    }) {
        page.heading(3, &device);
        plot(
            &mut page,
            &format!("reads/{device}"),
            &series::device_traffic(&device, false, runs),
        )?;
        plot(
            &mut page,
            &format!("writes/{device}"),
            &series::device_traffic(&device, true, runs),
        )?;
        plot(
            &mut page,
            &format!("wbt/{device}"),
            &series::wbt_depth(&device, runs),
        )?;
    }
    stalls(&mut page, runs)?;
    Ok(page.finish())
}

/// One line on a run: its scenario, seed and length.
fn about(report: &RunReport) -> String {
    let time = match &report.io_backend {
        Some(backend) => format!("{:.1} s real time ({backend})", report.sim_time_s),
        None => format!("{:.1} s simulated", report.sim_time_s),
    };
    format!("{}, seed {}, {time}", report.scenario, report.seed)
}

/// Names found in any run, in the order they first appear.
fn names(runs: &[Run<'_>], of: impl Fn(&RunReport) -> Vec<String>) -> Vec<String> {
    let mut all: Vec<String> = Vec::new();
    for run in runs {
        for name in of(run.report) {
            if !all.contains(&name) {
                all.push(name);
            }
        }
    }
    all
}

/// Per job: its percentiles per run, then its latency over time.
fn jobs(page: &mut Page, runs: &[Run<'_>]) -> Result<(), ReportError> {
    page.heading(2, "Jobs");
    for job in names(runs, |r| r.jobs.iter().map(|j| j.name.clone()).collect()) {
        let mut rows = vec![[
            "run", "ops", "IOPS", "MiB/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms",
        ]
        .map(String::from)
        .to_vec()];
        let mut kind = String::new();
        for run in runs {
            let Some(j) = series::find_job(run.report, &job) else {
                continue;
            };
            kind = format!("{} on {}", j.kind, j.device);
            let l = &j.lat_us;
            let mut row = vec![
                run.label.clone(),
                j.ops.to_string(),
                format!("{:.0}", j.iops),
                format!("{:.1}", j.bw_mib_s),
            ];
            row.extend(
                [l.p50, l.p90, l.p99, l.p99_9, l.max].map(|us| format!("{:.3}", us / 1000.0)),
            );
            rows.push(row);
        }
        page.heading(3, &format!("{job} ({kind})"));
        page.table(&rows);
        plot(
            page,
            &format!("latency/{job}"),
            &series::job_latency(&job, runs),
        )?;
    }
    Ok(())
}

fn stalls(page: &mut Page, runs: &[Run<'_>]) -> Result<(), ReportError> {
    page.heading(2, "Stalls");
    let bars = series::stalls(runs);
    if bars.categories.is_empty() {
        page.paragraph("No task stalled.");
        return Ok(());
    }
    page.figure(
        "stalls",
        &bars.svg()?,
        "Total time tasks spent stalled, per reason; the table has counts and the longest.",
    );
    let mut rows = vec![["run", "reason", "stalls", "total ms", "max ms"]
        .map(String::from)
        .to_vec()];
    for run in runs {
        for s in run.report.engine.stalls.iter().filter(|s| s.count > 0) {
            rows.push(vec![
                run.label.clone(),
                s.reason.clone(),
                s.count.to_string(),
                format!("{:.1}", s.total_ms),
                format!("{:.1}", s.max_ms),
            ]);
        }
    }
    page.table(&rows);
    Ok(())
}

/// A plot with its caption, or a line saying it had nothing to show.
fn plot(page: &mut Page, id: &str, plot: &plot::Plot) -> Result<(), ReportError> {
    if !plot.has_data() {
        page.paragraph(&format!("{}: nothing to plot (all zero).", plot.title));
        return Ok(());
    }
    page.figure(id, &plot.svg()?, &plot.caption);
    Ok(())
}
