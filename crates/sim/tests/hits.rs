//! Serving a sequential reader's cache hits at once (runner/hits.rs)
//! changes no figure: every shipped scenario with such a reader gives the
//! same report, wall time aside, as with one event per read.

use std::path::Path;
use wb_scenario::{load, JobKind, Scenario};
use wb_sim::report::RunReport;
use wb_sim::runner::{run, SimOptions};

fn report(scenario: &Scenario, one_event_per_read: bool) -> RunReport {
    let options = SimOptions {
        one_event_per_read,
        ..SimOptions::default()
    };
    let mut r = run(scenario, options).expect("a shipped scenario runs");
    r.wall_time_s = 0.0;
    r
}

#[test]
fn shipped_scenarios_report_the_same_with_hits_served_at_once() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut compared = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .expect("scenarios/ is readable")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    entries.sort();
    for path in entries {
        let s = load(&path, &wb_sim::device::validate).expect("shipped scenario parses");
        let sequential_reader = s.jobs.iter().any(|j| {
            matches!(
                j.kind,
                JobKind::Reader {
                    random: false,
                    rate_iops: None,
                    ..
                }
            )
        });
        if !sequential_reader {
            continue;
        }
        assert_eq!(report(&s, false), report(&s, true), "{}", path.display());
        compared.push(s.name);
    }
    // The published reader-beside-writers scenarios are among them.
    for name in ["axboe-2016", "axboe-2016-nvme", "axboe-2016-ssd"] {
        assert!(
            compared.iter().any(|n| n == name),
            "{name} not compared: {compared:?}"
        );
    }
}
