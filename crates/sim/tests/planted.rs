//! The oracle catches the engine's planted bugs within the default seed
//! range (1..1000 of `wb vopr`). Each bug is a feature of wb-engine, so
//! this file has a test only when one is on; scripts/test.sh runs it once
//! per bug:
//!
//! ```sh
//! cargo test --profile release-test -p wb-sim --features planted-clean-on-error --test planted
//! cargo test --profile release-test -p wb-sim --features planted-skip-flush --test planted
//! cargo test --profile release-test -p wb-sim --features planted-early-ack --test planted
//! cargo test --profile release-test -p wb-sim --features planted-whole-pages --test planted
//! ```
#![cfg(any(
    feature = "planted-clean-on-error",
    feature = "planted-skip-flush",
    feature = "planted-early-ack",
    feature = "planted-whole-pages"
))]

use wb_sim::faults::FaultProfile;
use wb_sim::vopr::run_seed;

#[test]
fn the_planted_bug_is_caught_within_the_default_seeds() {
    let caught = (1..1000).find_map(|seed| {
        let run = run_seed(seed, FaultProfile::All);
        run.outcome.violation.map(|v| (seed, v))
    });
    let Some((seed, (check, what))) = caught else {
        panic!("no violation in seeds 1..1000: the oracle missed the planted bug");
    };
    println!("caught with seed {seed} by {check}: {what}");
    println!("replay: wb vopr --seeds {seed} --faults all");
    // A bug that loses acknowledged data is caught as such: at the crash
    // (the device lacks it) or at the power cut (the media does).
    if cfg!(any(
        feature = "planted-clean-on-error",
        feature = "planted-skip-flush"
    )) {
        assert!(
            check == "restart" || check == "durability",
            "{check}: {what}"
        );
    }
    // A backing file left in a state the file never passed through is
    // caught at the crash, as such.
    if cfg!(feature = "planted-whole-pages") {
        assert!(
            check == "restart" && what.contains("longer than it ever was"),
            "{check}: {what}"
        );
    }
}
