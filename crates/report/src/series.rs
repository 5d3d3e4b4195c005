//! What is plotted: from the runs' reports (their jobs' latency slots and
//! the engine's timeline, `wb_sim::timeline`) to [`Plot`]s and [`Bars`],
//! every run on the same axes in its own colour.

use crate::plot::{Bars, Line, Plot, Stroke};
use crate::Run;
use wb_sim::report::{JobReport, RunReport};
use wb_sim::timeline::EngineSample;

/// A job's latency over time: the mean of each slot (solid) and its
/// longest (thin), on a log scale.
pub fn job_latency(job: &str, runs: &[Run<'_>]) -> Plot {
    let mut lines = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        let Some(report) = find_job(run.report, job) else {
            continue;
        };
        // A slot's figures belong to its middle.
        let mid = report.lat_slot_s / 2.0;
        let at = |f: fn(&wb_sim::timeline::LatencySlot) -> f64| {
            report
                .lat_over_time
                .iter()
                .map(|s| (s.t_s + mid, f(s) / 1000.0))
                .collect::<Vec<_>>()
        };
        lines.push(Line {
            run: r,
            stroke: Stroke::Solid,
            points: at(|s| s.mean_us),
        });
        lines.push(Line {
            run: r,
            stroke: Stroke::Thin,
            points: at(|s| s.max_us),
        });
    }
    let slot_ms = runs
        .iter()
        .filter_map(|run| find_job(run.report, job))
        .map(|j| j.lat_slot_s * 1000.0)
        .fold(0.0, f64::max);
    Plot {
        title: format!("{job}: latency over time"),
        caption: format!(
            "Mean (thick) and longest (thin) latency of the job's writes or reads ending in each slot of {slot_ms:.0} ms (log scale)."
        ),
        y_desc: "latency (ms)".to_string(),
        log_y: true,
        lines,
    }
}

pub fn find_job<'r>(report: &'r RunReport, job: &str) -> Option<&'r JobReport> {
    report.jobs.iter().find(|j| j.name == job)
}

/// Dirty (solid) and writeback (dashed) pages, and the dirty limit (thin).
pub fn dirty(runs: &[Run<'_>]) -> Plot {
    let mut lines = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        let series = |f: fn(&EngineSample) -> f64| gauge(&run.report.timeline, f);
        lines.push(Line {
            run: r,
            stroke: Stroke::Solid,
            points: series(|s| s.dirty_mib),
        });
        lines.push(Line {
            run: r,
            stroke: Stroke::Dashed,
            points: series(|s| s.writeback_mib),
        });
        lines.push(Line {
            run: r,
            stroke: Stroke::Thin,
            points: series(|s| s.thresh_mib),
        });
    }
    Plot {
        title: "Dirty and writeback pages".to_string(),
        caption: "Dirty (solid), under writeback (dashed) and the dirty limit (thin), sampled over the run.".to_string(),
        y_desc: "MiB".to_string(),
        log_y: false,
        lines,
    }
}

/// Pages in the cache.
pub fn cached(runs: &[Run<'_>]) -> Plot {
    let lines = runs
        .iter()
        .enumerate()
        .map(|(r, run)| Line {
            run: r,
            stroke: Stroke::Solid,
            points: gauge(&run.report.timeline, |s| s.cached_mib),
        })
        .collect();
    Plot {
        title: "Cached pages".to_string(),
        caption: "Pages in the cache, sampled over the run.".to_string(),
        y_desc: "MiB".to_string(),
        log_y: false,
        lines,
    }
}

/// What a device read (`write` false) or wrote per second, like vmstat's
/// bi and bo columns.
pub fn device_traffic(device: &str, write: bool, runs: &[Run<'_>]) -> Plot {
    let mut lines = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        let Some(d) = device_index(run.report, device) else {
            continue;
        };
        let total = |s: &EngineSample| {
            s.devices
                .get(d)
                .map_or(0.0, |d| if write { d.written_mib } else { d.read_mib })
        };
        lines.push(Line {
            run: r,
            stroke: Stroke::Solid,
            points: rate(&run.report.timeline, total),
        });
    }
    let what = if write { "writes" } else { "reads" };
    Plot {
        title: format!("{device}: {what}"),
        caption: format!("MiB/s of {what} the device completed between two samples."),
        y_desc: "MiB/s".to_string(),
        log_y: false,
        lines,
    }
}

/// wbt's limit on a device's writes in flight.
pub fn wbt_depth(device: &str, runs: &[Run<'_>]) -> Plot {
    let mut lines = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        let Some(d) = device_index(run.report, device) else {
            continue;
        };
        lines.push(Line {
            run: r,
            stroke: Stroke::Solid,
            points: gauge(&run.report.timeline, |s| {
                s.devices.get(d).map_or(0.0, |d| d.wbt_depth as f64)
            }),
        });
    }
    Plot {
        title: format!("{device}: wbt depth"),
        caption: "How many writes wbt lets the device have in flight (its max depth); with wbt off, the device's queue depth.".to_string(),
        y_desc: "requests".to_string(),
        log_y: false,
        lines,
    }
}

fn device_index(report: &RunReport, device: &str) -> Option<usize> {
    report.engine.devices.iter().position(|d| d.name == device)
}

/// Total stall time by reason, for the reasons any run stalled for.
pub fn stalls(runs: &[Run<'_>]) -> Bars {
    let reasons: Vec<String> = runs
        .first()
        .map(|run| {
            run.report
                .engine
                .stalls
                .iter()
                .map(|s| s.reason.clone())
                .collect()
        })
        .unwrap_or_default();
    let stalled = |reason: &str| {
        runs.iter().any(|run| {
            run.report
                .engine
                .stalls
                .iter()
                .any(|s| s.reason == reason && s.count > 0)
        })
    };
    let categories: Vec<String> = reasons.into_iter().filter(|r| stalled(r)).collect();
    let values = |report: &RunReport| {
        categories
            .iter()
            .map(|c| {
                report
                    .engine
                    .stalls
                    .iter()
                    .find(|s| &s.reason == c)
                    .map_or(0.0, |s| s.total_ms / 1000.0)
            })
            .collect()
    };
    Bars {
        title: "Time stalled, by reason (all tasks)".to_string(),
        width_px: crate::plot::WIDTH_PX,
        x_desc: "seconds".to_string(),
        runs: runs.iter().map(|run| values(run.report)).collect(),
        categories,
    }
}

/// A gauge of the timeline as (seconds, value).
fn gauge(timeline: &[EngineSample], f: impl Fn(&EngineSample) -> f64) -> Vec<(f64, f64)> {
    timeline.iter().map(|s| (s.t_s, f(s))).collect()
}

/// The rate of a running total of the timeline, per second, at the end of
/// each interval between two samples. A total that went down (the engine
/// restarted after a simulated crash) counts as 0 for that interval.
fn rate(timeline: &[EngineSample], total: impl Fn(&EngineSample) -> f64) -> Vec<(f64, f64)> {
    timeline
        .windows(2)
        .filter(|w| w[1].t_s > w[0].t_s)
        .map(|w| {
            let per_s = (total(&w[1]) - total(&w[0])).max(0.0) / (w[1].t_s - w[0].t_s);
            (w[1].t_s, per_s)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use wb_sim::timeline::DeviceSample;

    fn sample(t_s: f64, written_mib: f64) -> EngineSample {
        EngineSample {
            t_s,
            devices: vec![DeviceSample {
                written_mib,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn a_rate_is_the_difference_over_each_interval_and_never_negative() {
        let timeline = [
            sample(0.0, 0.0),
            sample(0.5, 50.0),
            sample(1.5, 150.0),
            // A restart: totals start again.
            sample(2.0, 10.0),
            sample(2.0, 20.0),
        ];
        let points = rate(&timeline, |s| s.devices[0].written_mib);
        assert_eq!(points, vec![(0.5, 100.0), (1.5, 100.0), (2.0, 0.0)]);
    }
}
