//! `wb sim FILE`: run a scenario on the simulator.

use crate::progress::Progress;
use crate::EXIT_BAD_INPUT;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use wb_sim::runner::{self, SimOptions};

#[derive(Args)]
#[command(after_help = "\
Cache knobs: memory, dirty_ratio, dirty_background_ratio, dirty_bytes, dirty_background_bytes,
  dirty_expire_centisecs, dirty_writeback_centisecs, dirty_throttle (io-less | global-2007),
  dontcache_flush (kick | inline), dontcache_counter (per-domain | global-split),
  backlog_throttle (watermarks | flush-all), backlog_wait_ms, lru (active-inactive | clock).
Device knobs: wbt_lat_usec (-1 auto, 0 off, N us), stable_writes (none | wait | snapshot | auto),
  min_ratio, max_ratio, strict_limit, queue_depth, nr_requests, read_ahead_kb, max_sectors_kb,
  serial (0/1: the device serves one request at a time, in order), wbt_pace (0/1: at depth 1
  slow commits pace background writes; default 1), wbt_slice_ms (while reads compete, writes
  in phases of this many ms with a quiet quarter between, and reads the engine issues in a
  write phase wait for its end; default 0, off), wbt_slice_quiet_ms (the quiet phase; 0: a
  quarter of wbt_slice_ms), extending_writes (parallel | one-per-file: a file's writes that
  make it longer go side by side, the default, or one at a time, in order).
Job setting: JOB.mode=buffered | dontcache | direct (how the job writes).

Examples:
  wb sim scenarios/axboe-2016.toml --set wbt_lat_usec=0
  wb sim scenarios/sekiyama-2007.toml --set dirty_throttle=global-2007 --json
  wb sim scenarios/axboe-2016.toml --set disk.queue_depth=1 --seed 7
  wb sim scenarios/layton-2026-seq.toml --set dontcache_flush=inline
  wb sim scenarios/layton-2026-seq.toml --set writer.mode=buffered
  wb sim scenarios/hot-set-vs-copy.toml --set lru=clock
  wb sim scenarios/axboe-2016.toml --trace axboe.json     # then open axboe.json at ui.perfetto.dev
  wb sim scenarios/axboe-2016.toml --compare wbt_lat_usec=-1,0   # wbt on and off, side by side
  wb sim scenarios/axboe-2016.toml --compare wbt_lat_usec=-1,0 --html axboe.html   # ... as plots

Exit status: 0 on success, 2 for a bad scenario file, knob value or argument.")]
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
    /// knob on every device, e.g. wbt_lat_usec=0), DEVICE.KNOB=VALUE for one device,
    /// JOB.mode=MODE for how one job writes. Repeatable.
    #[arg(long = "set", value_name = "KNOB=VALUE")]
    pub sets: Vec<String>,
    /// Check the engine's invariants after every event (slow).
    #[arg(long)]
    pub check: bool,
    #[command(flatten)]
    pub trace: crate::trace_file::TraceArgs,
    #[command(flatten)]
    pub html: crate::html_file::HtmlArgs,
    /// Run the scenario once per value of one knob and print them side by
    /// side, with each job's p99 against the first value's: KNOB=V1,V2,...
    /// (any knob --set takes, e.g. wbt_lat_usec=-1,0). With --json: {"knob",
    /// "runs": [{"value", "report"}]}.
    #[arg(long, value_name = "KNOB=V1,V2,...")]
    pub compare: Option<String>,
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
    if let Some(spec) = &args.compare {
        return compare(&args, &scenario, spec);
    }
    // The trace file is made before the run: a bad path fails at once.
    let trace_out = match args.trace.create("wb sim") {
        Ok(out) => out,
        Err(code) => return code,
    };
    let html_out = match args.html.create("wb sim") {
        Ok(out) => out,
        Err(code) => return code,
    };
    let mut trace = trace_out
        .as_ref()
        .map(|_| wb_trace::Trace::new(args.trace.events()));
    let limit_s = scenario.duration_ns as f64 / 1e9;
    let progress = Progress::simulated(&format!("simulating {}", scenario.name), limit_s);
    let mut tick = |f: f64| progress.update(f);
    let options = SimOptions {
        check_invariants: args.check,
        progress: Some(&mut tick),
        faults: None,
        trace: trace.as_mut(),
        one_event_per_read: false,
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
    if let (Some(out), Some(trace)) = (trace_out, trace.as_ref()) {
        if let Err(code) = out.write(trace) {
            return code;
        }
    }
    if let Some(out) = html_out {
        if let Err(code) = out.write(&report.scenario, &[], &[(report.scenario.clone(), &report)]) {
            return code;
        }
    }
    if args.json {
        if let Err(code) = crate::print_json("wb sim", &report) {
            return code;
        }
    } else {
        print!("{}", crate::human::render(&report, false));
    }
    ExitCode::SUCCESS
}

/// `--compare`: one run per value, side by side.
fn compare(args: &SimArgs, scenario: &wb_scenario::Scenario, spec: &str) -> ExitCode {
    if args.trace.trace.is_some() {
        eprintln!("wb sim: --trace records one run; use it without --compare");
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    let compare = match crate::compare::Compare::parse(spec, scenario) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("wb sim: {e}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let html_out = match args.html.create("wb sim") {
        Ok(out) => out,
        Err(code) => return code,
    };
    let mut runs = Vec::new();
    for value in &compare.values {
        // Checked in `parse`: every value applies.
        let s = match compare.scenario(scenario, value) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("wb sim: {e}");
                return ExitCode::from(EXIT_BAD_INPUT);
            }
        };
        let limit_s = s.duration_ns as f64 / 1e9;
        let what = format!("simulating {} with {}={value}", s.name, compare.knob);
        let progress = Progress::simulated(&what, limit_s);
        let mut tick = |f: f64| progress.update(f);
        let options = SimOptions {
            check_invariants: args.check,
            progress: Some(&mut tick),
            ..SimOptions::default()
        };
        let result = runner::run(&s, options);
        progress.finish();
        match result {
            Ok(r) => runs.push(r),
            Err(e) => {
                eprintln!("wb sim: {}: {e}", args.scenario.display());
                return ExitCode::from(EXIT_BAD_INPUT);
            }
        }
    }
    if let Some(out) = html_out {
        let title = format!(
            "{}: {} = {}",
            scenario.name,
            compare.knob,
            compare.values.join(" | ")
        );
        let labelled: Vec<(String, &wb_sim::report::RunReport)> = compare
            .values
            .iter()
            .zip(&runs)
            .map(|(v, r)| (format!("{}={v}", compare.knob), r))
            .collect();
        if let Err(code) = out.write(&title, &compare.summary(&runs), &labelled) {
            return code;
        }
    }
    if args.json {
        let runs: Vec<serde_json::Value> = compare
            .values
            .iter()
            .zip(&runs)
            .map(|(v, r)| serde_json::json!({"value": v, "report": r}))
            .collect();
        let doc = serde_json::json!({"knob": compare.knob, "runs": runs});
        if let Err(code) = crate::print_json("wb sim", &doc) {
            return code;
        }
    } else {
        print!("{}", compare.render(&runs));
    }
    ExitCode::SUCCESS
}
