//! The simulator under faults: seeds replay exactly, every fault kind is
//! injected, the oracle finds nothing wrong with the engine, and finds
//! what it is there to find.

use wb_sim::faults::{FaultProfile, Oracle, FAULT_KINDS};
use wb_sim::vopr::{run_seed, run_seed_with, run_text_with, scenario_text};

#[test]
fn a_hundred_seeds_inject_every_fault_and_pass_every_check() {
    let mut injected = std::collections::BTreeMap::new();
    for seed in 1..101 {
        let run = run_seed(seed, FaultProfile::All);
        assert_eq!(run.outcome.violation, None, "seed {seed}");
        for (k, n) in run.outcome.injected {
            *injected.entry(k).or_insert(0u64) += n;
        }
        assert!(run.outcome.checks["invariants"] > 0, "seed {seed}");
        assert_eq!(run.outcome.checks["no_panic"], 1, "seed {seed}");
    }
    for kind in FAULT_KINDS {
        assert!(injected[kind] > 0, "no {kind} in 100 seeds: {injected:?}");
    }
}

#[test]
fn a_seed_replays_the_same_run() {
    for seed in [7, 4242] {
        let a = run_seed(seed, FaultProfile::All).outcome;
        let b = run_seed(seed, FaultProfile::All).outcome;
        assert_eq!(
            (a.injected, a.checks),
            (b.injected, b.checks),
            "seed {seed}"
        );
    }
    // The io profile changes no knob.
    let io = run_seed(7, FaultProfile::Io).outcome;
    assert_eq!(io.injected["knob_change"], 0);
}

/// Serving sequential readers' cache hits at once (runner/hits.rs) gives
/// the same run under faults as one event per read: the same report, the
/// same faults, the same checks (the invariants every 64 events see the
/// same states). Seeds 2864 and 2879 once counted one more check: a
/// reader's hits were served past a job that a completion at the same
/// instant had woken, before the wake-up was carried out.
#[test]
fn hits_served_at_once_change_no_run_under_faults() {
    for seed in [2864, 2879].into_iter().chain(1..41) {
        let at_once = run_seed_with(seed, FaultProfile::All, false);
        let one_by_one = run_seed_with(seed, FaultProfile::All, true);
        let (Ok((mut a, x)), Ok((mut b, y))) = (at_once, one_by_one) else {
            panic!("seed {seed} failed to run");
        };
        (a.wall_time_s, b.wall_time_s) = (0.0, 0.0);
        assert_eq!(a, b, "seed {seed}: the reports differ");
        assert_eq!(
            (x.injected, x.checks),
            (y.injected, y.checks),
            "seed {seed}"
        );
    }
}

/// The engine's ordering of extending writes, as the real runtimes set it
/// (`extending_writes = one-per-file`: a write-back that makes its file
/// longer is handed over only when the one before has completed), under
/// every fault: seeds 1..101 with each device so, no violation (the
/// invariants check the held writes; restart and durability what the
/// disk holds after a crash and a power cut). It changes runs: some
/// seeds' reports differ from those with writes side by side.
#[test]
fn extending_writes_one_per_file_hold_under_faults() {
    let mut changed = 0;
    for seed in 1..101 {
        let text = scenario_text(seed);
        let ordered = text.replace(
            "stable_writes = ",
            "extending_writes = \"one-per-file\"\nstable_writes = ",
        );
        assert!(ordered.contains("one-per-file"), "seed {seed}: no device");
        let run = |text: &str| match run_text_with(text, FaultProfile::All, false) {
            Ok(run) => run,
            Err(e) => panic!("seed {seed}: {e}"),
        };
        let (mut a, x) = run(&ordered);
        assert_eq!(x.violation, None, "seed {seed}");
        assert!(x.checks["invariants"] > 0, "seed {seed}");
        let (mut b, _) = run(&text);
        (a.wall_time_s, b.wall_time_s) = (0.0, 0.0);
        changed += usize::from(a != b);
    }
    assert!(changed > 0, "one-per-file changed no run of 100");
}

#[test]
fn the_oracle_flags_a_lost_or_a_repeated_error_report() {
    let mut o = Oracle::new(&[2]);
    o.unreported[0][1] = true;
    o.fsync_returned(0, 0, true, 1);
    assert_eq!(o.violation, None, "nothing owed, Ok");
    o.fsync_returned(0, 1, false, 2);
    assert_eq!(o.violation, None, "owed, reported");
    o.fsync_returned(0, 1, false, 3);
    assert_eq!(
        o.violation.as_ref().map(|v| v.0),
        Some("fsync_reports"),
        "reported twice"
    );
    let mut o = Oracle::new(&[1]);
    o.unreported[0][0] = true;
    o.fsync_returned(0, 0, true, 4);
    let what = o.violation.expect("an unreported failure").1;
    assert!(
        what.contains("returned Ok with a failed write-back unreported"),
        "{what}"
    );
    assert_eq!(o.checks["fsync_reports"], 1);
}
