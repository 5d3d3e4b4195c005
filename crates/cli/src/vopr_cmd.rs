//! `wb vopr`: many seeds, each a random scenario on the simulator with
//! faults injected and the oracle checking every run (wb-sim's faults.rs
//! and vopr.rs). A violation prints its seed and the command that replays
//! it.

use crate::progress::Progress;
use crate::EXIT_FAILURE;
use clap::Args;
use serde_json::json;
use std::collections::BTreeMap;
use std::process::ExitCode;
use wb_sim::faults::{FaultProfile, CHECK_KINDS, FAULT_KINDS};

/// Most seeds in one invocation (a limit on everything).
const MAX_SEEDS: u64 = 10_000_000;

#[derive(Args)]
#[command(after_help = "\
Each seed draws a scenario (devices, jobs, knobs: `wb vopr --print-scenario SEED` shows it)
and its faults; the run is checked by the oracle:
  invariants      the engine's invariants every 64 events and at the end (memory within budget, ...)
  fsync_reports   an fsync reports a failed write-back exactly once to each handle
  restart         at the crash, acknowledged pages are on the device, files as long as synced
  durability      after the power cut, every page an Ok fsync or sync acknowledged is on the media
  stall_bounds    no sleep longer than its reason's bound (a throttle pause 200 ms, an event
                  wait re-checked after 100 ms), and every sleeper woken by its end
  no_panic        the engine returns errors, never panics
Faults (--faults io): write_eio, read_eio, enospc, latency_spike; all: also knob_change
(wbt_lat_usec, queue_depth, nr_requests, stable_writes, dirty limits, memory under load), a crash
(the engine restarts over what survived) in the first half of most runs, and one power_cut
a run (device write caches lost, writes in flight torn at 4 KiB).

Exit status: 0 with no violation, 1 with one or more, 2 for bad arguments.")]
pub struct VoprArgs {
    /// Seeds to run: A..B (B excluded) or one seed.
    #[arg(long, default_value = "1..1000", value_parser = parse_seeds)]
    pub seeds: (u64, u64),
    /// Fault profile: io or all.
    #[arg(long, default_value = "all", value_parser = FaultProfile::parse)]
    pub faults: FaultProfile,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Print the scenario a seed draws (TOML) and exit.
    #[arg(long, value_name = "SEED")]
    pub print_scenario: Option<u64>,
    /// Run one seed and print its whole report as `wb sim --json` does,
    /// with the faults and checks (the same seed: the same bytes, apart
    /// from wall_time_s).
    #[arg(long, value_name = "SEED")]
    pub report: Option<u64>,
}

fn parse_seeds(text: &str) -> Result<(u64, u64), String> {
    let bad = || format!("'{text}' is not a seed or a range A..B of seeds");
    let (a, b) = match text.split_once("..") {
        Some((a, b)) => (
            a.trim().parse::<u64>().map_err(|_| bad())?,
            b.trim().parse::<u64>().map_err(|_| bad())?,
        ),
        None => {
            let a = text.trim().parse::<u64>().map_err(|_| bad())?;
            (a, a.checked_add(1).ok_or_else(bad)?)
        }
    };
    if b <= a {
        return Err(format!(
            "'{text}': the range is empty (A..B runs A up to B - 1)"
        ));
    }
    if b - a > MAX_SEEDS {
        return Err(format!("'{text}': at most {MAX_SEEDS} seeds at once"));
    }
    Ok((a, b))
}

/// The command that replays one seed.
fn replay(seed: u64, profile: FaultProfile) -> String {
    format!("wb vopr --seeds {seed} --faults {profile}")
}

pub fn run(args: VoprArgs) -> ExitCode {
    if let Some(seed) = args.print_scenario {
        print!("{}", wb_sim::vopr::scenario_text(seed));
        return ExitCode::SUCCESS;
    }
    if let Some(seed) = args.report {
        return report(seed, args.faults);
    }
    let (first, end) = args.seeds;
    let total = end - first;
    let progress = Progress::counted("wb vopr", total, "seeds", !args.json);
    let mut faults: BTreeMap<&str, u64> = FAULT_KINDS.iter().map(|&k| (k, 0)).collect();
    let mut checks: BTreeMap<&str, u64> = CHECK_KINDS.iter().map(|&k| (k, 0)).collect();
    let mut failures = Vec::new();
    let started = std::time::Instant::now();
    for (i, seed) in (first..end).enumerate() {
        let run = quietly(|| wb_sim::vopr::run_seed(seed, args.faults));
        for (k, n) in run.outcome.injected {
            *faults.entry(k).or_insert(0) += n;
        }
        for (k, n) in run.outcome.checks {
            *checks.entry(k).or_insert(0) += n;
        }
        if let Some((check, what)) = run.outcome.violation {
            failures.push((seed, check, what));
        }
        progress.set(i as u64 + 1, format!("{} violations", failures.len()));
    }
    progress.finish();
    if args.json {
        let list: Vec<_> = failures
            .iter()
            .map(|(seed, check, what)| {
                json!({"seed": seed, "check": check, "what": what, "replay": replay(*seed, args.faults)})
            })
            .collect();
        let out = json!({
            "runs": total,
            "violations": failures.len(),
            "faults": faults,
            "checks": checks,
            "failures": list,
        });
        println!("{out}");
    } else {
        println!(
            "{total} runs (seeds {first}..{end}, faults {}), {} violations, {:.1} s",
            args.faults,
            failures.len(),
            started.elapsed().as_secs_f64()
        );
        let line = |m: &BTreeMap<&str, u64>| {
            m.iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!("faults injected: {}", line(&faults));
        println!("checks made: {}", line(&checks));
        for (seed, check, what) in &failures {
            println!("violation of {check} with seed {seed}: {what}");
            println!("  replay: {}", replay(*seed, args.faults));
        }
    }
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILURE)
    }
}

/// `--report SEED`: one run's whole report, its faults and its checks.
fn report(seed: u64, profile: FaultProfile) -> ExitCode {
    let run = quietly(|| wb_sim::vopr::run_seed_report(seed, profile));
    let (report, outcome) = match run {
        Ok(r) => r,
        Err(what) => {
            eprintln!("wb vopr: seed {seed}: {what}");
            return ExitCode::from(EXIT_FAILURE);
        }
    };
    let violation = outcome
        .violation
        .as_ref()
        .map(|(check, what)| json!({"check": check, "what": what}));
    let out = json!({
        "report": report,
        "faults": outcome.injected,
        "checks": outcome.checks,
        "violation": violation,
    });
    match serde_json::to_string_pretty(&out) {
        Ok(text) => println!("{text}"),
        Err(e) => {
            eprintln!("wb vopr: could not encode the report: {e}");
            return ExitCode::from(EXIT_FAILURE);
        }
    }
    if outcome.violation.is_some() {
        ExitCode::from(EXIT_FAILURE)
    } else {
        ExitCode::SUCCESS
    }
}

/// Runs `f` with panic messages unprinted: a panic in a run is a
/// violation, reported with the others.
fn quietly<T>(f: impl FnOnce() -> T) -> T {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let out = f();
    std::panic::set_hook(hook);
    out
}
