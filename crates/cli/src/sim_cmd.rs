//! `wb sim FILE`: run a scenario on the simulator.

use crate::progress::Progress;
use crate::{EXIT_BAD_INPUT, EXIT_FAILURE};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use wb_sim::runner::{self, SimOptions};

#[derive(Args)]
pub struct SimArgs {
    /// Scenario file (TOML); see scenarios/ for examples.
    pub scenario: PathBuf,
    /// Seed for the run; the same seed gives the same results. Defaults to the scenario's seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print one JSON object instead of the human report.
    #[arg(long)]
    pub json: bool,
    /// Override a knob for this run: KNOB=VALUE for a cache knob (or a device
    /// knob on every device, e.g. wbt_lat_usec=0), DEVICE.KNOB=VALUE for one device.
    /// Repeatable.
    #[arg(long = "set", value_name = "KNOB=VALUE")]
    pub sets: Vec<String>,
    /// Check the engine's invariants after every event (slow).
    #[arg(long)]
    pub check: bool,
}

pub fn run(args: SimArgs) -> ExitCode {
    let mut scenario = match wb_scenario::load(&args.scenario, &wb_sim::device::validate) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("wb sim: {e}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    for spec in &args.sets {
        if let Err(e) = wb_scenario::apply_set(&mut scenario, spec) {
            eprintln!("wb sim: {e}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    }
    if let Some(seed) = args.seed {
        scenario.seed = seed;
    }
    let mut progress = Progress::new(&format!("simulating {}", scenario.name));
    let mut tick = |f: f64| progress.update(f);
    let options = SimOptions {
        check_invariants: args.check,
        progress: Some(&mut tick),
    };
    let result = runner::run(&scenario, options);
    progress.finish();
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("wb sim: {}: {e}", args.scenario.display());
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("wb sim: could not encode the report: {e}");
                return ExitCode::from(EXIT_FAILURE);
            }
        }
    } else {
        print!("{}", crate::human::render(&report));
    }
    ExitCode::SUCCESS
}
