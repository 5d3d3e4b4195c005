//! The rows of the report: the configurations asked for that this
//! machine can run, and the `--sweep` points after the one they sweep.

use super::args::InterferenceArgs;
use super::configs::{row_name, BenchConfig};
use super::kernel_configs::{self, Machine};
use super::sweep::SweepPoint;
use crate::bench::harness::Notes;
use crate::bench::{kernel_write, progress};
use std::path::Path;

/// A row of the report: a configuration, or the swept one (engine, or
/// mount with --fuse) with one value of the --sweep knob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub config: BenchConfig,
    pub point: Option<SweepPoint>,
}

impl Row {
    pub fn name(&self) -> String {
        row_name(self.config, self.point.as_ref())
    }
}

/// The block scheduler `config` switches to.
fn scheduler(config: BenchConfig) -> Option<&'static str> {
    kernel_configs::tweaks(config).scheduler
}

/// The rows to run, in order: the configurations asked for (all but
/// mount by default; floor, mount-floor, kernel, kernel-bfq and mount with --fuse) that this
/// machine can run, the others left out with a note; the --sweep points
/// right after the configuration they sweep (engine, or mount with
/// --fuse), which run even if --configs leaves that one out.
pub fn choose_rows(
    args: &InterferenceArgs,
    dir: &Path,
    machine: &Machine,
    notes: &mut Notes,
) -> Vec<Row> {
    let (candidates, swept) = if args.fuse {
        (BenchConfig::FUSE.to_vec(), BenchConfig::Mount)
    } else {
        let all = BenchConfig::ALL
            .into_iter()
            .filter(|c| !matches!(c, BenchConfig::Mount | BenchConfig::MountFloor));
        (all.collect::<Vec<_>>(), BenchConfig::Engine)
    };
    let asked = |c: &BenchConfig| args.configs.is_empty() || args.configs.contains(c);
    let mut rows = Vec::new();
    for config in candidates {
        if asked(&config) {
            match unavailable(config, dir, machine) {
                Some(why) => notes.push(format!("{}: left out: {why}", config.name())),
                None => rows.push(Row {
                    config,
                    point: None,
                }),
            }
        }
        if config == swept {
            let points = args.sweep.iter().flat_map(|s| s.points());
            rows.extend(points.map(|p| Row {
                config,
                point: Some(p),
            }));
        }
    }
    show_scheduler(machine, &rows);
    rows
}

/// Why `config` cannot run on this machine, if it cannot.
fn unavailable(config: BenchConfig, dir: &Path, machine: &Machine) -> Option<String> {
    if config == BenchConfig::KernelDontcache {
        kernel_write::check_dontcache(dir).err()
    } else {
        machine.unavailable(config)
    }
}

/// Says which block scheduler the device has, if a row switches it.
fn show_scheduler(machine: &Machine, rows: &[Row]) {
    let Some(q) = machine.queue() else {
        return;
    };
    if rows.iter().any(|r| scheduler(r.config).is_some()) {
        progress!(
            "block scheduler of {} ({}): {}",
            q.device,
            q.dir.display(),
            q.schedulers()
                .ok()
                .and_then(|(now, _)| now)
                .unwrap_or_else(|| "?".into())
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::args::parse_args;
    use super::*;

    #[test]
    fn the_schedulers_of_the_scheduler_configurations() {
        assert_eq!(scheduler(BenchConfig::KernelBfq), Some("bfq"));
        assert_eq!(scheduler(BenchConfig::KernelBfqIdle), Some("bfq"));
        assert_eq!(scheduler(BenchConfig::Kernel), None);
    }

    #[test]
    fn sweep_rows_follow_their_configuration_even_when_it_is_not_asked_for() {
        let dir = std::env::temp_dir();
        let machine = Machine::probe(&dir, 200 << 20);
        let names = |list: &[&str]| -> Vec<String> {
            let a = parse_args(list).expect("valid");
            let mut notes = Notes::new();
            choose_rows(&a, &dir, &machine, &mut notes)
                .iter()
                .map(Row::name)
                .collect()
        };
        let sweep = ["--sweep", "wbt_lat_usec=4000,1000"];
        fn list<'a>(configs: &'a str, sweep: &[&'a str]) -> Vec<&'a str> {
            [&["--configs", configs][..], sweep].concat()
        }
        assert_eq!(
            names(&list("floor,kernel,engine,engine-dontcache", &sweep)),
            [
                "floor",
                "kernel",
                "engine",
                "engine[wbt_lat_usec=4000]",
                "engine[wbt_lat_usec=1000]",
                "engine-dontcache"
            ]
        );
        assert_eq!(
            names(&list("floor,kernel", &sweep)),
            [
                "floor",
                "kernel",
                "engine[wbt_lat_usec=4000]",
                "engine[wbt_lat_usec=1000]"
            ]
        );
        let fuse = [&["--fuse"][..], &list("floor,kernel,mount", &sweep)[..]].concat();
        assert_eq!(
            names(&fuse),
            [
                "floor",
                "kernel",
                "mount",
                "mount[wbt_lat_usec=4000]",
                "mount[wbt_lat_usec=1000]"
            ]
        );
        // The mount's reader alone only with --fuse, in its place there.
        let fuse = [&["--fuse"][..], &list("mount,mount-floor,floor", &[])[..]].concat();
        assert_eq!(names(&fuse), ["floor", "mount-floor", "mount"]);
        assert_eq!(names(&list("mount-floor,floor", &[])), ["floor"]);
        assert_eq!(names(&["--configs", "floor,engine"]), ["floor", "engine"]);
    }
}
