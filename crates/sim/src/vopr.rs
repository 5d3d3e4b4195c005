//! Many seeds, each a random scenario run with faults and the oracle
//! (faults.rs): the simulator's VOPR. A seed names its whole run (the
//! scenario is drawn from it, the faults too), so a violation is replayed
//! with that one seed.

use crate::faults::FaultProfile;
use crate::report::RunReport;
use crate::rng::Rng;
use crate::runner::{self, panic_message, FaultOutcome, SimOptions};
use std::fmt::Write;

/// The random stream the scenario is drawn from.
const SCENARIO_STREAM: u64 = 0x5ce7;

/// What one seed's run came to.
#[derive(Debug, Default)]
pub struct SeedRun {
    pub outcome: FaultOutcome,
}

/// The scenario of `seed`, as TOML (so it is checked as a user's file is,
/// and can be printed to replay a run by hand).
pub fn scenario_text(seed: u64) -> String {
    let mut t = String::new();
    cache_text(&mut t, seed);
    // Devices and jobs from a stream of their own.
    let mut picks = Picks(Rng::new(seed).fork(SCENARIO_STREAM + 1));
    let devices = if picks.pick(&["1", "2"]) == "1" { 1 } else { 2 };
    for d in 0..devices {
        device_text(&mut t, d, &mut picks);
    }
    let jobs = 2 + picks.pick(&["0", "1", "2"]).parse::<usize>().unwrap_or(0);
    for j in 0..jobs {
        job_text(&mut t, j, devices, &mut picks);
    }
    t
}

/// Random choices among given values, from one stream.
struct Picks(Rng);

impl Picks {
    /// One of `values`, each as likely.
    fn pick(&mut self, values: &[&str]) -> String {
        values[self.0.below(values.len() as u64) as usize].to_string()
    }
}

/// The scenario's head: its name, seed and duration, and the cache.
fn cache_text(t: &mut String, seed: u64) {
    let mut picks = Picks(Rng::new(seed).fork(SCENARIO_STREAM));
    let memory = picks.pick(&["16MiB", "32MiB", "64MiB"]);
    let duration = picks.pick(&["1s", "2s", "3s"]);
    let ratio = picks.pick(&["10", "20", "40"]);
    let bg = picks.pick(&["2", "5"]);
    // Writing to a String cannot fail.
    let _ = write!(
        t,
        "name = \"vopr-{seed}\"\nseed = {seed}\nduration = \"{duration}\"\n\n\
         [cache]\nmemory = \"{memory}\"\ndirty_ratio = {ratio}\ndirty_background_ratio = {bg}\n"
    );
}

/// Device `d`: `d<d>`, of a random model and knobs.
fn device_text(t: &mut String, d: usize, picks: &mut Picks) {
    let model = picks.pick(&["hdd", "sata-ssd", "nvme"]);
    let wbt = picks.pick(&["-1", "0", "2000"]);
    let depth = picks.pick(&["1", "4", "32"]);
    let stable = picks.pick(&["none", "wait", "snapshot"]);
    let _ = write!(
        t,
        "\n[[device]]\nname = \"d{d}\"\nmodel = \"{model}\"\nwbt_lat_usec = {wbt}\n\
         queue_depth = {depth}\nstable_writes = \"{stable}\"\n"
    );
}

/// Job `j`: `j<j>` on one of the `devices`, of a random kind (the first is
/// a writer) and the knobs of that kind.
fn job_text(t: &mut String, j: usize, devices: usize, picks: &mut Picks) {
    let device = format!(
        "d{}",
        picks.pick(&["0", "1"]).parse::<usize>().unwrap_or(0) % devices
    );
    // The first job is a foreground writer: every run writes.
    let kind = if j == 0 {
        "writer".to_string()
    } else {
        picks.pick(&["writer", "reader", "fsync-loop", "occasional-writer"])
    };
    let _ = write!(
        t,
        "\n[[job]]\nname = \"j{j}\"\nkind = \"{kind}\"\ndevice = \"{device}\"\n"
    );
    let _ = match kind.as_str() {
        "writer" => {
            let files = picks.pick(&["1", "2", "3"]);
            // Sizes and blocks that are not whole pages too: a file's
            // last page is then partly past its end (the oracle checks
            // the backing file is never longer than the file was).
            let size = picks.pick(&["4MiB", "16MiB", "48MiB", "4000001B", "1000KB"]);
            let block = picks.pick(&["4KiB", "64KiB", "1MiB", "3000B", "100KB"]);
            let sync = picks.pick(&["true", "false"]);
            let mode = picks.pick(&["buffered", "buffered", "dontcache"]);
            // Blocks in a random order leave holes for a while (the
            // oracle checks none is shown that the file never held).
            let pattern = picks.pick(&["sequential", "sequential", "random"]);
            write!(
                t,
                "files = {files}\nfile_size = \"{size}\"\nblock_size = \"{block}\"\n\
                 sync = {sync}\nmode = \"{mode}\"\npattern = \"{pattern}\"\n"
            )
        }
        "reader" => {
            let size = picks.pick(&["4MiB", "16MiB"]);
            let pattern = picks.pick(&["random", "sequential"]);
            write!(
                t,
                "file_size = \"{size}\"\nblock_size = \"4KiB\"\npattern = \"{pattern}\"\n\
                 background = true\n"
            )
        }
        _ => {
            let interval = picks.pick(&["5ms", "20ms", "100ms"]);
            let count = picks.pick(&["20", "100"]);
            write!(
                t,
                "block_size = \"4KiB\"\ninterval = \"{interval}\"\ncount = {count}\n"
            )
        }
    };
}

/// Runs `seed`'s scenario with `profile`'s faults. A panic anywhere is a
/// violation (`no_panic`); so is a scenario the generator got wrong.
pub fn run_seed(seed: u64, profile: FaultProfile) -> SeedRun {
    match run_seed_report(seed, profile) {
        Ok((_, outcome)) => SeedRun { outcome },
        Err(what) => violation("no_panic", what),
    }
}

/// As [`run_seed`], with the run's whole report (what `wb sim --json`
/// prints): the same seed gives the same report, byte for byte apart from
/// `wall_time_s`. Err: what panicked, or why the scenario was refused.
pub fn run_seed_report(
    seed: u64,
    profile: FaultProfile,
) -> Result<(RunReport, FaultOutcome), String> {
    run_seed_with(seed, profile, false)
}

/// As [`run_seed_report`]; `one_event_per_read` as in [`SimOptions`] (the
/// same outcome, slower: for tests that show it is the same).
pub fn run_seed_with(
    seed: u64,
    profile: FaultProfile,
    one_event_per_read: bool,
) -> Result<(RunReport, FaultOutcome), String> {
    run_text_with(&scenario_text(seed), profile, one_event_per_read)
}

/// As [`run_seed_with`], for a scenario's text (a seed's, changed by a
/// test: `scenario_text`).
pub fn run_text_with(
    text: &str,
    profile: FaultProfile,
    one_event_per_read: bool,
) -> Result<(RunReport, FaultOutcome), String> {
    let path = std::path::Path::new("vopr");
    let scenario = wb_scenario::parse(path, text, &crate::device::validate)
        .map_err(|e| format!("the generated scenario is refused: {e}"))?;
    let run = std::panic::catch_unwind(|| {
        let options = SimOptions {
            check_invariants: false,
            progress: None,
            faults: Some(profile),
            trace: None,
            one_event_per_read,
        };
        runner::run_with_faults(&scenario, options)
    });
    match run {
        Ok(Ok((report, mut outcome))) => {
            *outcome.checks.entry("no_panic").or_insert(0) += 1;
            Ok((report, outcome))
        }
        Ok(Err(e)) => Err(format!("the simulator refused the scenario: {e}")),
        Err(panic) => Err(panic_message(&*panic)),
    }
}

fn violation(check: &'static str, what: String) -> SeedRun {
    SeedRun {
        outcome: FaultOutcome {
            violation: Some((check, what)),
            ..FaultOutcome::default()
        },
    }
}
