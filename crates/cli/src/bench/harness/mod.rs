//! The harness every `wb bench` runs on: what the benches share, so that
//! each bench holds only what is its own.
//!
//! - A bench is an [`Experiment`]: its configurations (each a row of the
//!   report, [`Experiment::Setup`]), how to prepare for a run, run once
//!   and restore what the run changed, and what a run's progress line says.
//! - [`run`] owns the loop: every configuration once per round, `rounds`
//!   rounds, interleaved (round by round, so slow drifts of the disk
//!   spread over all the configurations); the progress lines on standard
//!   error; leaving out an optional configuration whose first run fails
//!   (with a note); the notes the report ends with ([`Notes`]).
//! - [`median_of`] and [`median_some`] give the medians over a
//!   configuration's runs; [`ratio_table`] a table of ratios to a named
//!   baseline row.
//! - [`Output::publish`]: the report as text, or one JSON object with
//!   `--json`, on standard output; with `--html` the same report as a
//!   page ([`wb_report::document`]).
//!
//! Restoring the machine: every change a bench makes (files, children,
//! sysctls, schedulers, cgroups, mounts) is held by a guard of
//! [`super::cleanup`], undone when the guard is dropped and, on Ctrl-C,
//! by the handler `wb bench` installs before any bench starts. [`run`]
//! calls [`Experiment::restore`] after every run, also after a failed one.

mod output;
mod summary;

pub use output::{Output, Report};
pub use summary::{median_of, median_some, ratio_table, Values};

use super::doc::Doc;
use super::{progress, BenchError};

/// Where a run stands among the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Turn {
    /// The configuration's place in the list (from 0) and the list's length.
    pub index: usize,
    pub count: usize,
    /// The round (from 1) and how many there are.
    pub round: usize,
    pub rounds: usize,
}

/// A benchmark: its configurations and how one run of one goes.
pub trait Experiment {
    /// One configuration: a row of the report.
    type Setup;
    /// What one run of a configuration measured.
    type Run;

    /// The configuration's name, as the report prints it.
    fn name(&self, setup: &Self::Setup) -> String;

    /// How the progress lines name a run: `kernel (2/3)` by default.
    fn label(&self, setup: &Self::Setup, turn: Turn) -> String {
        format!("{} ({}/{})", self.name(setup), turn.round, turn.rounds)
    }

    /// Clears the way for a run (settles the disk, syncs, creates files).
    fn prepare(
        &mut self,
        _setup: &Self::Setup,
        _turn: Turn,
        _notes: &mut Notes,
    ) -> Result<(), BenchError> {
        Ok(())
    }

    /// The progress line as a run starts, if it has one.
    fn announce(&self, _setup: &Self::Setup, _label: &str) -> Option<String> {
        None
    }

    /// One run of `setup`, named `label` in messages.
    fn run_once(
        &mut self,
        setup: &Self::Setup,
        label: &str,
        notes: &mut Notes,
    ) -> Result<Self::Run, BenchError>;

    /// Puts back what [`Experiment::prepare`] and the run changed; called
    /// after every run, also after a failed one.
    fn restore(&mut self, _setup: &Self::Setup) -> Result<(), BenchError> {
        Ok(())
    }

    /// The progress lines of a finished run.
    fn describe(&self, label: &str, run: &Self::Run) -> Vec<String>;

    /// Whether `setup` is left out (with a note) when its first run
    /// fails, instead of failing the bench.
    fn optional(&self, _setup: &Self::Setup) -> bool {
        false
    }
}

/// A configuration and its runs, in the order they ran.
pub struct Measured<E: Experiment + ?Sized> {
    pub setup: E::Setup,
    pub runs: Vec<E::Run>,
    /// Left out after its first run failed ([`Experiment::optional`]).
    left_out: bool,
}

/// Runs every configuration of `setups` once per round, `rounds` rounds,
/// round by round. Returns the configurations with their runs, in the
/// order given, without those left out.
pub fn run<E: Experiment>(
    exp: &mut E,
    setups: Vec<E::Setup>,
    rounds: usize,
    notes: &mut Notes,
) -> Result<Vec<Measured<E>>, BenchError> {
    // --repeat is 1..=100 (parse_repeat); the benches without it run once.
    assert!(
        (1..=100).contains(&rounds),
        "{rounds} rounds: a bench runs 1 to 100"
    );
    let count = setups.len();
    let mut rows: Vec<Measured<E>> = setups
        .into_iter()
        .map(|setup| Measured {
            setup,
            runs: Vec::new(),
            left_out: false,
        })
        .collect();
    for round in 1..=rounds {
        for (index, row) in rows.iter_mut().enumerate() {
            if row.left_out {
                continue;
            }
            let turn = Turn {
                index,
                count,
                round,
                rounds,
            };
            match run_turn(exp, &row.setup, turn, notes) {
                Ok(r) => row.runs.push(r),
                Err(Failed::Run(e)) if round == 1 && exp.optional(&row.setup) => {
                    // It could be set up, but its run failed for real:
                    // leave the configuration out.
                    notes.push(format!("{}: left out: {e}", exp.name(&row.setup)));
                    row.left_out = true;
                }
                Err(Failed::Run(e) | Failed::Around(e)) => return Err(e),
            }
        }
    }
    Ok(rows.into_iter().filter(|row| !row.left_out).collect())
}

/// Why a turn failed: its run, or what comes around it.
enum Failed {
    Run(BenchError),
    Around(BenchError),
}

/// One run: prepare, announce, run, restore, describe.
fn run_turn<E: Experiment>(
    exp: &mut E,
    setup: &E::Setup,
    turn: Turn,
    notes: &mut Notes,
) -> Result<E::Run, Failed> {
    exp.prepare(setup, turn, notes).map_err(Failed::Around)?;
    let label = exp.label(setup, turn);
    if let Some(line) = exp.announce(setup, &label) {
        progress!("{line}");
    }
    let result = exp.run_once(setup, &label, notes);
    let restored = exp.restore(setup);
    let run = result.map_err(Failed::Run)?;
    restored.map_err(Failed::Around)?;
    for line in exp.describe(&label, &run) {
        progress!("{line}");
    }
    Ok(run)
}

/// What a bench has to say besides its figures: said on standard error
/// at once, and listed at the end of the report.
#[derive(Default)]
pub struct Notes {
    lines: Vec<String>,
}

impl Notes {
    pub fn new() -> Notes {
        Notes::default()
    }

    /// Says `note` now and keeps it for the report.
    pub fn push(&mut self, note: String) {
        progress!("{note}");
        self.lines.push(note);
    }

    /// [`Notes::push`], unless the same note was already made.
    pub fn push_once(&mut self, note: String) {
        if !self.lines.contains(&note) {
            self.push(note);
        }
    }

    #[cfg(test)]
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// The notes at the end of a report: "Notes:" and one indented line
    /// each (nothing without notes).
    pub fn render(&self, out: &mut Doc) {
        if self.lines.is_empty() {
            return;
        }
        out.push_str("\nNotes:\n");
        for n in &self.lines {
            out.push_str(&format!("  {n}\n"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what the harness asks of it; configuration "bad" fails
    /// its run, "worse" fails its preparation.
    #[derive(Default)]
    struct Script {
        log: Vec<String>,
        optional: bool,
    }

    impl Experiment for Script {
        type Setup = &'static str;
        type Run = usize;

        fn name(&self, setup: &&'static str) -> String {
            setup.to_string()
        }

        fn prepare(
            &mut self,
            setup: &&'static str,
            turn: Turn,
            _notes: &mut Notes,
        ) -> Result<(), BenchError> {
            self.log.push(format!("prepare {setup} {}", turn.index));
            match *setup {
                "worse" => Err(BenchError::Failed("no room".into())),
                _ => Ok(()),
            }
        }

        fn run_once(
            &mut self,
            setup: &&'static str,
            label: &str,
            _notes: &mut Notes,
        ) -> Result<usize, BenchError> {
            self.log.push(format!("run {label}"));
            match *setup {
                "bad" => Err(BenchError::Failed("broken".into())),
                _ => Ok(self.log.len()),
            }
        }

        fn restore(&mut self, setup: &&'static str) -> Result<(), BenchError> {
            self.log.push(format!("restore {setup}"));
            Ok(())
        }

        fn describe(&self, label: &str, run: &usize) -> Vec<String> {
            vec![format!("{label}: {run}")]
        }

        fn optional(&self, setup: &&'static str) -> bool {
            self.optional && *setup != "a"
        }
    }

    #[test]
    fn rounds_interleave_the_configurations_and_keep_their_order() {
        let mut exp = Script::default();
        let mut notes = Notes::new();
        let rows = run(&mut exp, vec!["a", "b"], 2, &mut notes).expect("runs");
        let runs: Vec<(&str, usize)> = rows.iter().map(|r| (r.setup, r.runs.len())).collect();
        assert_eq!(runs, [("a", 2), ("b", 2)]);
        let order: Vec<&str> = exp
            .log
            .iter()
            .filter(|l| l.starts_with("run"))
            .map(String::as_str)
            .collect();
        assert_eq!(
            order,
            ["run a (1/2)", "run b (1/2)", "run a (2/2)", "run b (2/2)"]
        );
        assert!(notes.lines().is_empty());
    }

    #[test]
    fn a_failed_run_is_restored_and_fails_the_bench_unless_optional() {
        let mut exp = Script::default();
        let err = run(&mut exp, vec!["a", "bad", "c"], 1, &mut Notes::new()).err();
        assert!(matches!(err, Some(BenchError::Failed(m)) if m == "broken"));
        assert_eq!(exp.log.last().map(String::as_str), Some("restore bad"));
        assert!(!exp.log.iter().any(|l| l.contains(" c")), "{:?}", exp.log);

        let mut exp = Script {
            optional: true,
            ..Script::default()
        };
        let mut notes = Notes::new();
        let rows = run(&mut exp, vec!["a", "bad", "c"], 2, &mut notes).expect("runs");
        let names: Vec<&str> = rows.iter().map(|r| r.setup).collect();
        assert_eq!(names, ["a", "c"]);
        assert_eq!(notes.lines(), ["bad: left out: broken"]);
        // Left out after its first round: not run again.
        let bad_runs = exp.log.iter().filter(|l| l.starts_with("run bad")).count();
        assert_eq!(bad_runs, 1);
        // A failed preparation is not a failed run: it fails the bench.
        let mut exp = Script {
            optional: true,
            ..Script::default()
        };
        assert!(run(&mut exp, vec!["worse"], 1, &mut Notes::new()).is_err());
    }

    #[test]
    fn notes_are_kept_once_and_rendered_at_the_end() {
        let mut notes = Notes::new();
        notes.push_once("fstrim failed".into());
        notes.push_once("fstrim failed".into());
        notes.push("engine (1/1): slow".into());
        let mut doc = Doc::new();
        notes.render(&mut doc);
        assert_eq!(
            doc.to_string(),
            "\nNotes:\n  fstrim failed\n  engine (1/1): slow\n"
        );
        let mut empty = Doc::new();
        Notes::new().render(&mut empty);
        assert_eq!(empty.to_string(), "");
    }
}
