//! Property tests over random seeds and random small scenarios, with the
//! engine's invariants checked after every simulated event: memory within
//! the budget, dirty pages within the hard limit plus the documented
//! slack, counters consistent. Plus: after a final sync everything dirtied
//! was written, and no throttle pause exceeds its bound.

use proptest::prelude::*;
use std::collections::BTreeMap;
use wb_engine::{Config, DeviceConfig, MAX_PAUSE_NS};
use wb_scenario::{DeviceSpec, JobKind, JobSpec, Scenario, WriteMode};
use wb_sim::runner::{run, SimOptions};

const MIB: u64 = 1 << 20;
const MODELS: [&str; 4] = ["hdd", "sata-ssd", "nvme", "usb-stick"];

#[derive(Clone, Debug)]
struct Shape {
    seed: u64,
    memory_mib: u64,
    global_2007: bool,
    models: Vec<usize>,
    wbt_off: Vec<bool>,
    writers: Vec<(usize, u32, u64, u64)>,
    reader: Option<usize>,
    occasional: Option<usize>,
    fsync_loop: Option<usize>,
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        any::<u64>(),
        16u64..64,
        any::<bool>(),
        prop::collection::vec(0usize..4, 1..3),
        prop::collection::vec(any::<bool>(), 2),
        prop::collection::vec((0usize..2, 1u32..3, 1u64..12, 0usize..3), 1..3),
        prop::option::of(0usize..2),
        prop::option::of(0usize..2),
        prop::option::of(0usize..2),
    )
        .prop_map(
            |(
                seed,
                memory_mib,
                global_2007,
                models,
                wbt_off,
                writers,
                reader,
                occasional,
                fsync_loop,
            )| {
                let n = models.len();
                let block = [4096u64, 65536, MIB];
                Shape {
                    seed,
                    memory_mib,
                    global_2007,
                    wbt_off,
                    writers: writers
                        .into_iter()
                        .map(|(d, f, s, b)| (d % n, f, s * MIB, block[b]))
                        .collect(),
                    reader: reader.map(|d| d % n),
                    occasional: occasional.map(|d| d % n),
                    fsync_loop: fsync_loop.map(|d| d % n),
                    models,
                }
            },
        )
}

fn job(name: String, device: usize, background: bool, kind: JobKind) -> JobSpec {
    job_in_mode(name, device, background, kind, WriteMode::Buffered)
}

fn job_in_mode(
    name: String,
    device: usize,
    background: bool,
    kind: JobKind,
    mode: WriteMode,
) -> JobSpec {
    JobSpec {
        name,
        device,
        domain: if device == 0 {
            "root".into()
        } else {
            "tenant".into()
        },
        start_ns: 0,
        runtime_ns: None,
        background,
        mode,
        kind,
    }
}

fn scenario(s: &Shape) -> Scenario {
    let mut cache = Config::default();
    cache
        .set("memory", &format!("{}MiB", s.memory_mib))
        .unwrap();
    if s.global_2007 {
        cache.set("dirty_throttle", "global-2007").unwrap();
    }
    if s.seed % 4 == 1 {
        cache.set("dontcache_flush", "inline").unwrap();
    }
    if s.seed % 8 == 3 {
        cache.set("dontcache_counter", "global-split").unwrap();
    }
    let devices = s
        .models
        .iter()
        .enumerate()
        .map(|(i, &m)| {
            let mut config = DeviceConfig::default();
            if s.wbt_off[i] {
                config.set("wbt_lat_usec", "0").unwrap();
            }
            if MODELS[m] == "usb-stick" {
                config.set("queue_depth", "1").unwrap();
            }
            DeviceSpec {
                name: format!("d{i}"),
                model: MODELS[m].to_string(),
                config,
                params: BTreeMap::new(),
            }
        })
        .collect();
    let mut jobs = Vec::new();
    for (i, &(d, files, size, block)) in s.writers.iter().enumerate() {
        let kind = JobKind::Writer {
            files,
            file_size: size,
            block_size: block,
            random: i % 4 == 3,
            sync: true,
            fsync_each: i % 2 == 1,
        };
        // Every third writer writes uncached, every fifth around the cache.
        let mode = if i % 5 == 4 {
            WriteMode::Direct
        } else if i % 3 == 2 {
            WriteMode::Dontcache
        } else {
            WriteMode::Buffered
        };
        jobs.push(job_in_mode(format!("w{i}"), d, false, kind, mode));
    }
    if let Some(d) = s.reader {
        let kind = JobKind::Reader {
            file_size: 64 * MIB,
            block_size: 4096,
            random: s.seed.is_multiple_of(2),
            rate_iops: None,
        };
        jobs.push(job("r".into(), d, true, kind));
    }
    if let Some(d) = s.occasional {
        // Its 20 writes of 4 KiB are never synced.
        let kind = JobKind::OccasionalWriter {
            block_size: 4096,
            interval_ns: 100_000_000,
            count: 20,
        };
        jobs.push(job("o".into(), d, false, kind));
    }
    if let Some(d) = s.fsync_loop {
        let kind = JobKind::FsyncLoop {
            block_size: 8192,
            interval_ns: 10_000_000,
            count: 50,
        };
        jobs.push(job("f".into(), d, false, kind));
    }
    Scenario {
        name: "random".into(),
        description: String::new(),
        seed: s.seed,
        duration_ns: 600_000_000_000,
        cache,
        devices,
        jobs,
    }
}

/// A run's report without its wall time.
fn report_of(scenario: &Scenario, options: SimOptions<'_>) -> wb_sim::report::RunReport {
    let mut report = run(scenario, options).expect("valid scenario");
    report.wall_time_s = 0.0;
    report
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Serving a sequential reader's cache hits at once (the runner's
    /// hits.rs) gives the report one event per read gives.
    #[test]
    fn reads_served_at_once_change_nothing(s in shape()) {
        let scenario = scenario(&s);
        let at_once = report_of(&scenario, SimOptions::default());
        let one_by_one = report_of(&scenario, SimOptions { one_event_per_read: true, ..SimOptions::default() });
        prop_assert_eq!(at_once, one_by_one);
    }

    #[test]
    fn invariants_hold_and_sync_writes_everything(s in shape()) {
        let scenario = scenario(&s);
        let options = SimOptions { check_invariants: true, ..SimOptions::default() };
        let report = run(&scenario, options).expect("valid scenario");
        // Writers and the fsync loop end with a sync after their last write;
        // the reader only reads. Only the occasional writer's 80 KiB may
        // still be dirty at the end.
        prop_assert!(report.sim_time_s < 600.0, "the run finished before its time limit");
        let unsynced_mib = if s.occasional.is_some() { 20.0 * 4096.0 / (1024.0 * 1024.0) } else { 0.0 };
        let unwritten = report.engine.dirtied_mib - report.engine.written_mib;
        prop_assert!((-1e-9..=unsynced_mib + 1e-9).contains(&unwritten),
            "dirtied {} MiB, written {} MiB", report.engine.dirtied_mib, report.engine.written_mib);
        for stall in &report.engine.stalls {
            let bound_ms = match stall.reason.as_str() {
                "dirty_throttle" if !s.global_2007 => MAX_PAUSE_NS as f64 / 1e6,
                _ => wb_engine::EVENT_WAIT_MAX_NS as f64 / 1e6,
            };
            prop_assert!(stall.max_ms <= bound_ms + 1e-6, "{} waited {} ms > {} ms", stall.reason, stall.max_ms, bound_ms);
        }
        prop_assert!(report.engine.cached_peak_mib <= s.memory_mib as f64);
        for job in &report.jobs {
            prop_assert_eq!(job.errors, 0);
        }
    }
}

#[test]
fn same_seed_same_report() {
    let shape = Shape {
        seed: 7,
        memory_mib: 32,
        global_2007: false,
        models: vec![0, 1],
        wbt_off: vec![false, false],
        writers: vec![(0, 2, 8 * MIB, MIB), (1, 1, 4 * MIB, 4096)],
        reader: Some(0),
        occasional: Some(1),
        fsync_loop: Some(0),
    };
    let a = run(&scenario(&shape), SimOptions::default()).unwrap();
    let b = run(&scenario(&shape), SimOptions::default()).unwrap();
    let strip = |mut r: wb_sim::report::RunReport| {
        r.wall_time_s = 0.0;
        serde_json::to_string(&r).unwrap()
    };
    assert_eq!(strip(a), strip(b));
}
