//! `wb bench sim-speed`: how many times faster than real time the
//! simulator runs each scenario, and against another build.
//!
//! Each run is `wb sim SCENARIO --json` in a child process (this binary,
//! and the baseline binary when given, taking turns scenario by scenario
//! so both meet the same machine). A run's speed is its `sim_time_s`
//! over its `wall_time_s`, both from the report: the simulator times its
//! own event loop, so process start and the scenario's parsing are not
//! counted. With a baseline, each scenario's reports are also compared
//! with the wall-clock fields left out: a change meant to make the
//! simulator faster must not change what it computes.

use super::doc::Doc;
use super::harness::{self, Experiment, Notes, Output, Report, Turn};
use super::table::{ratio, Table};
use super::{median, parse_repeat, BenchError};
use crate::html_file::HtmlFile;
use clap::Args;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Args)]
#[command(after_help = "\
What is measured: for every scenario (*.toml) in --scenarios, `wb sim SCENARIO --json` is run
--repeat times in a child process of this binary, and, with --baseline, as many times with
that binary, the two taking turns. A run's speed is the simulated time over the wall time of
the simulator's event loop (sim_time_s / wall_time_s in the report), so process start and
parsing are left out. The table shows each scenario's median speed, the baseline's and their
ratio (above 1: this build is faster).

With --baseline the reports of both builds are compared with their wall-clock fields left out
(wall_time_s and the like): 'same' says whether the builds computed the same thing. A
baseline that cannot run a scenario (one newer than it) shows 'n/a' and the first line of its
error.

Quick run: wb bench sim-speed --repeat 1
Against another build: wb bench sim-speed --baseline /path/to/old/wb --repeat 3

Exit status: 0 on success (also when reports differ: see the 'same' column), 1 if this
build failed to run a scenario, 2 for bad arguments.")]
pub struct SimSpeedArgs {
    /// Directory of the scenario files (every *.toml in it, by name).
    #[arg(long, default_value = "scenarios")]
    pub scenarios: PathBuf,
    /// Another build of `wb` to run alternately with this one (e.g. target/release/wb of an older commit).
    #[arg(long, value_name = "WB_BINARY")]
    pub baseline: Option<PathBuf>,
    /// Runs per scenario and build; medians are shown (1..100).
    #[arg(long, default_value = "3", value_parser = parse_repeat)]
    pub repeat: usize,
    /// Only the scenarios whose file name contains this text.
    #[arg(long)]
    pub only: Option<String>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// One build's runs of one scenario.
#[derive(Default)]
struct Runs {
    speeds: Vec<f64>,
    /// The first report with its wall-clock fields left out.
    report: Option<Value>,
    /// Why a run failed (the first line of its error).
    error: Option<String>,
}

impl Runs {
    fn median(&self) -> Option<f64> {
        (self.error.is_none() && !self.speeds.is_empty()).then(|| median(&self.speeds))
    }
}

struct Scenario {
    name: String,
    sim_time_s: f64,
    new: Runs,
    base: Option<Runs>,
}

impl Scenario {
    /// Whether both builds computed the same report (None without a
    /// baseline or when a run failed).
    fn same(&self) -> Option<bool> {
        let base = self.base.as_ref()?;
        Some(self.new.report.as_ref()? == base.report.as_ref()?)
    }
}

/// The scenarios, each run --repeat times by both builds in turn.
struct SimSpeed<'a> {
    args: &'a SimSpeedArgs,
    /// This build.
    this: PathBuf,
}

impl Experiment for SimSpeed<'_> {
    /// A scenario file.
    type Setup = PathBuf;
    type Run = Scenario;

    fn name(&self, path: &PathBuf) -> String {
        path.file_stem()
            .map_or_else(String::new, |s| s.to_string_lossy().into_owned())
    }

    fn label(&self, path: &PathBuf, turn: Turn) -> String {
        format!("[{}/{}] {}", turn.index + 1, turn.count, self.name(path))
    }

    fn announce(&self, _: &PathBuf, label: &str) -> Option<String> {
        Some(label.to_string())
    }

    /// Both builds take turns, run by run, so both meet the same machine.
    fn run_once(&mut self, path: &PathBuf, _: &str, _: &mut Notes) -> Result<Scenario, BenchError> {
        let name = self.name(path);
        let mut new = Runs::default();
        let mut base = self.args.baseline.as_ref().map(|_| Runs::default());
        let mut sim_time_s = 0.0;
        for _ in 0..self.args.repeat {
            sim_time_s = run_once(&self.this, path, &mut new);
            if let (Some(b), Some(runs)) = (&self.args.baseline, base.as_mut()) {
                run_once(b, path, runs);
            }
        }
        if let Some(e) = &new.error {
            return Err(BenchError::Failed(format!("{name}: this build: {e}")));
        }
        Ok(Scenario {
            name,
            sim_time_s,
            new,
            base,
        })
    }

    fn describe(&self, _: &str, _: &Scenario) -> Vec<String> {
        Vec::new()
    }
}

pub fn run(args: SimSpeedArgs, html: Option<HtmlFile>) -> Result<(), BenchError> {
    let this = std::env::current_exe()
        .map_err(|e| BenchError::failed("finding this program's path", e))?;
    if let Some(b) = &args.baseline {
        if !b.is_file() {
            return Err(BenchError::BadInput(format!(
                "--baseline {}: no such file (give the path of another build's wb binary)",
                b.display()
            )));
        }
    }
    let files = scenario_files(&args.scenarios, args.only.as_deref())?;
    let mut exp = SimSpeed { args: &args, this };
    let measured = harness::run(&mut exp, files, 1, &mut Notes::new())?;
    let results: Vec<Scenario> = measured.into_iter().flat_map(|m| m.runs).collect();
    let report = Report::new(
        render(&results, args.baseline.as_deref()),
        to_json(&results),
    );
    Output::new("wb bench sim-speed", args.json, html).publish(report)
}

/// The *.toml files of `dir` whose names contain `only`, by name.
fn scenario_files(dir: &Path, only: Option<&str>) -> Result<Vec<PathBuf>, BenchError> {
    let bad = |e: std::io::Error| {
        BenchError::BadInput(format!(
            "--scenarios {}: {e} (give the directory of the scenario files)",
            dir.display()
        ))
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(bad)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .filter(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            only.is_none_or(|o| name.is_some_and(|n| n.contains(o)))
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(BenchError::BadInput(format!(
            "--scenarios {}: no scenario (*.toml){} there",
            dir.display(),
            only.map_or(String::new(), |o| format!(" with '{o}' in its name"))
        )));
    }
    Ok(files)
}

/// Runs `binary sim scenario --json` once and adds its speed (or its
/// error) to `runs`; returns the simulated seconds (0 on failure).
fn run_once(binary: &Path, scenario: &Path, runs: &mut Runs) -> f64 {
    match sim_report(binary, scenario) {
        Ok((sim, wall, report)) => {
            runs.speeds.push(sim / wall.max(1e-9));
            runs.report.get_or_insert(report);
            sim
        }
        Err(e) => {
            runs.error.get_or_insert(e);
            0.0
        }
    }
}

/// The report of one run: simulated seconds, wall seconds, and the report
/// without its wall-clock fields.
fn sim_report(binary: &Path, scenario: &Path) -> Result<(f64, f64, Value), String> {
    let out = Command::new(binary)
        .arg("sim")
        .arg(scenario)
        .arg("--json")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(format!("{} ({})", line.trim(), out.status));
    }
    let report: Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("its report is not JSON: {e}"))?;
    let field = |k: &str| report.get(k).and_then(Value::as_f64);
    let (Some(sim), Some(wall)) = (field("sim_time_s"), field("wall_time_s")) else {
        return Err("its report has no sim_time_s or wall_time_s".into());
    };
    Ok((sim, wall, without_wall_clock(report)))
}

/// `report` without the fields that measure wall-clock time (their names
/// contain "wall"), at any depth.
fn without_wall_clock(report: Value) -> Value {
    match report {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(k, _)| !k.contains("wall"))
                .map(|(k, v)| (k, without_wall_clock(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_wall_clock).collect()),
        other => other,
    }
}

fn speed(x: Option<f64>) -> String {
    x.map_or_else(|| "n/a".into(), |s| format!("{s:.0}x"))
}

fn render(results: &[Scenario], baseline: Option<&Path>) -> Doc {
    let mut doc = Doc::new();
    let mut table = if baseline.is_some() {
        Table::new(&[
            "scenario",
            "sim s",
            "this build",
            "baseline",
            "ratio",
            "same",
        ])
    } else {
        Table::new(&["scenario", "sim s", "this build"])
    };
    for s in results {
        let mut row = vec![
            s.name.clone(),
            format!("{:.1}", s.sim_time_s),
            speed(s.new.median()),
        ];
        if let Some(base) = &s.base {
            row.push(speed(base.median()));
            row.push(ratio(s.new.median(), base.median()));
            row.push(match s.same() {
                Some(true) => "yes".into(),
                Some(false) => "NO".into(),
                None => "n/a".into(),
            });
        }
        table.row(row);
    }
    doc.push_str("Simulated time per wall second (medians), higher is faster\n");
    if let Some(b) = baseline {
        doc.push_str(&format!("baseline: {}\n", b.display()));
    }
    doc.table(table);
    for s in results {
        if let Some(e) = s.base.as_ref().and_then(|b| b.error.as_ref()) {
            doc.push_str(&format!("{}: the baseline failed: {e}\n", s.name));
        }
    }
    doc
}

fn to_json(results: &[Scenario]) -> Value {
    let runs = |r: &Runs| {
        json!({
            "speeds": r.speeds,
            "median": r.median(),
            "error": r.error,
        })
    };
    json!({
        "scenarios": results.iter().map(|s| json!({
            "name": s.name,
            "sim_time_s": s.sim_time_s,
            "this_build": runs(&s.new),
            "baseline": s.base.as_ref().map(runs),
            "same_report": s.same(),
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_clock_fields_are_left_out_at_any_depth() {
        let report = json!({
            "sim_time_s": 2.0,
            "wall_time_s": 0.5,
            "jobs": [{"ops": 3, "wall_ms": 1}],
        });
        assert_eq!(
            without_wall_clock(report),
            json!({"sim_time_s": 2.0, "jobs": [{"ops": 3}]})
        );
    }

    #[test]
    fn a_directory_without_scenarios_is_bad_input() {
        let dir = std::env::temp_dir().join(format!("wb-sim-speed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        std::fs::write(dir.join("notes.txt"), "x").expect("write");
        let err = scenario_files(&dir, None).expect_err("no toml");
        assert!(
            matches!(&err, BenchError::BadInput(m) if m.contains("no scenario (*.toml)")),
            "{err}"
        );
        std::fs::write(dir.join("b.toml"), "").expect("write");
        std::fs::write(dir.join("a.toml"), "").expect("write");
        let names: Vec<_> = scenario_files(&dir, None)
            .expect("two")
            .iter()
            .map(|p| p.file_name().expect("name").to_owned())
            .collect();
        assert_eq!(names, ["a.toml", "b.toml"], "by name");
        assert_eq!(scenario_files(&dir, Some("b")).expect("one").len(), 1);
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
