//! `--html FILE`, as `wb sim` and `wb run` take it, and the file `wb
//! report -o FILE` writes: the file is made before anything runs (a path
//! that cannot be written fails at once, exit 2) and the page written
//! when the runs are done (wb_report).

use crate::{EXIT_BAD_INPUT, EXIT_FAILURE};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use wb_sim::report::RunReport;

#[derive(Args)]
pub struct HtmlArgs {
    /// Write a self-contained HTML report with plots to FILE (no network or
    /// JavaScript needed): per job latency percentiles and latency over
    /// time; dirty, writeback and the dirty limit; each device's throughput
    /// and wbt depth over time; time stalled by reason.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// A report file made, waiting for its page.
pub struct HtmlFile {
    file: std::fs::File,
    path: PathBuf,
    /// The command, for messages ("wb sim").
    command: &'static str,
}

impl HtmlArgs {
    /// The report file, if one was asked for; Err: the exit code, after
    /// saying why on stderr.
    pub fn create(&self, command: &'static str) -> Result<Option<HtmlFile>, ExitCode> {
        self.html
            .as_ref()
            .map(|path| HtmlFile::create(path.clone(), command))
            .transpose()
    }
}

impl HtmlFile {
    pub fn create(path: PathBuf, command: &'static str) -> Result<HtmlFile, ExitCode> {
        match std::fs::File::create(&path) {
            Ok(file) => Ok(HtmlFile {
                file,
                path,
                command,
            }),
            Err(e) => {
                eprintln!(
                    "{command}: cannot write the report to {}: {e}",
                    path.display()
                );
                Err(ExitCode::from(EXIT_BAD_INPUT))
            }
        }
    }

    /// Writes the report of `runs` (label, report) titled `title`, with
    /// `summary` lines under the runs; Err: the exit code, after saying
    /// why on stderr.
    pub fn write(
        self,
        title: &str,
        summary: &[String],
        runs: &[(String, &RunReport)],
    ) -> Result<(), ExitCode> {
        let runs: Vec<wb_report::Run<'_>> = runs
            .iter()
            .map(|(label, report)| wb_report::Run {
                label: label.clone(),
                report,
            })
            .collect();
        let html = match wb_report::html(title, summary, &runs) {
            Ok(html) => html,
            Err(e) => {
                eprintln!("{}: {e}", self.command);
                return Err(ExitCode::from(EXIT_FAILURE));
            }
        };
        self.write_page(&html).map_err(|e| {
            eprintln!("{e}");
            ExitCode::from(EXIT_FAILURE)
        })
    }

    /// Writes `html` as it is; Err: what went wrong, for a person.
    pub fn write_page(mut self, html: &str) -> Result<(), String> {
        self.file
            .write_all(html.as_bytes())
            .and_then(|()| self.file.sync_all())
            .map_err(|e| {
                format!(
                    "{}: writing {} failed: {e}",
                    self.command,
                    self.path.display()
                )
            })?;
        eprintln!(
            "{}: report written to {}",
            self.command,
            self.path.display()
        );
        Ok(())
    }
}
