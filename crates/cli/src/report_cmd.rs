//! `wb report RESULT.json… -o report.html`: the HTML report (wb_report) of
//! results saved with `--json`: a `wb sim` or `wb run` report, or the
//! runs of a `wb sim --compare` (each labelled `KNOB=VALUE`). Runs from
//! several files are drawn on the same axes, labelled by file name.

use crate::html_file::HtmlFile;
use crate::EXIT_BAD_INPUT;
use clap::Args;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use wb_sim::report::RunReport;

#[derive(Args)]
#[command(after_help = "\
Examples:
  wb sim scenarios/axboe-2016.toml --json > on.json
  wb sim scenarios/axboe-2016.toml --set wbt_lat_usec=0 --json > off.json
  wb report on.json off.json -o wbt.html
  wb sim scenarios/axboe-2016.toml --compare wbt_lat_usec=-1,0 --json > cmp.json
  wb report cmp.json -o cmp.html

Exit status: 0 on success, 2 for a file that cannot be read or is not a result.")]
pub struct ReportArgs {
    /// Results saved with --json by `wb sim`, `wb sim --compare` or `wb run`.
    #[arg(required = true, value_name = "RESULT.json")]
    pub results: Vec<PathBuf>,
    /// The HTML file to write.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// The page's title (default: the scenario's name).
    #[arg(long)]
    pub title: Option<String>,
}

/// What a result file holds.
#[derive(Deserialize)]
#[serde(untagged)]
enum ResultFile {
    Compare { knob: String, runs: Vec<CompareRun> },
    One(Box<RunReport>),
}

#[derive(Deserialize)]
struct CompareRun {
    value: String,
    report: RunReport,
}

/// The labelled runs of one file.
fn load(path: &Path) -> Result<Vec<(String, RunReport)>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let parsed: ResultFile = serde_json::from_str(&text).map_err(|e| {
        format!(
            "{}: not a result of `wb sim --json`, `wb sim --compare --json` or `wb run --json` ({e})",
            path.display()
        )
    })?;
    let stem = path.file_stem().map_or_else(
        || path.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    );
    Ok(match parsed {
        ResultFile::Compare { knob, runs } => runs
            .into_iter()
            .map(|r| (format!("{knob}={}", r.value), r.report))
            .collect(),
        ResultFile::One(report) => vec![(stem, *report)],
    })
}

pub fn run(args: ReportArgs) -> ExitCode {
    let mut runs: Vec<(String, RunReport)> = Vec::new();
    for path in &args.results {
        match load(path) {
            Ok(loaded) => runs.extend(loaded),
            Err(e) => {
                eprintln!("wb report: {e}");
                return ExitCode::from(EXIT_BAD_INPUT);
            }
        }
    }
    // Files of one compare and of single runs can mix; labels tell them
    // apart when two are the same.
    if args.results.len() > 1 {
        let labels: Vec<String> = runs.iter().map(|(l, _)| l.clone()).collect();
        for (i, (label, _)) in runs.iter_mut().enumerate() {
            if labels.iter().filter(|l| *l == label).count() > 1 {
                *label = format!("{label} #{}", i + 1);
            }
        }
    }
    let out = match HtmlFile::create(args.output.clone(), "wb report") {
        Ok(out) => out,
        Err(code) => return code,
    };
    let title = args.title.clone().unwrap_or_else(|| {
        runs.first()
            .map(|(_, r)| r.scenario.clone())
            .unwrap_or_default()
    });
    let refs: Vec<(String, &RunReport)> = runs.iter().map(|(l, r)| (l.clone(), r)).collect();
    match out.write(&title, &[], &refs) {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}
