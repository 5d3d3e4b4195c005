//! Tests every model must pass, driven through `build` and the trait.

use super::*;
use std::collections::VecDeque;

fn no_params() -> BTreeMap<String, String> {
    BTreeMap::new()
}

fn one_param(key: &str, value: &str) -> BTreeMap<String, String> {
    [(key.to_string(), value.to_string())].into_iter().collect()
}

fn device(model: &str, seed: u64, queue_depth: u32) -> Box<dyn DeviceModel> {
    match build(model, &no_params(), Rng::new(seed), queue_depth) {
        Ok(dev) => dev,
        Err(e) => panic!("{e}"),
    }
}

/// A mixed random workload: (submit time, request), times increasing.
fn workload(capacity: u64, seed: u64) -> Vec<(Instant, DevRequest)> {
    let mut rng = Rng::new(seed);
    let mut now = 0;
    let mut sequential = 0;
    (0..400)
        .map(|id| {
            now += rng.below(2_000_000);
            let len = 4096 * (1 + rng.below(128));
            let offset = match rng.below(2) {
                0 => rng.below((capacity - len) / 4096) * 4096,
                _ => sequential,
            };
            sequential = (offset + len) % (capacity - 1024 * 1024);
            let req = DevRequest {
                id,
                write: rng.below(3) == 0,
                offset,
                len,
            };
            (Instant(now), req)
        })
        .collect()
}

/// Runs a workload to the end; returns (id, completion time) in order.
/// Checks that every `next_completion` yields at least one completion.
fn run(dev: &mut dyn DeviceModel, work: &[(Instant, DevRequest)]) -> Vec<(u64, Instant)> {
    let mut pending: VecDeque<_> = work.iter().copied().collect();
    let mut out = Vec::new();
    loop {
        let completion_first = match (dev.next_completion(), pending.front()) {
            (None, None) => return out,
            (Some(at), Some(&(sub, _))) => at <= sub,
            (completion, _) => completion.is_some(),
        };
        if completion_first {
            let at = dev.next_completion().unwrap_or_default();
            let done = dev.complete(at);
            assert!(
                !done.is_empty(),
                "{}: nothing completed at {at}",
                dev.kind()
            );
            out.extend(done.into_iter().map(|id| (id, at)));
        } else if let Some((at, req)) = pending.pop_front() {
            dev.submit(at, req);
        }
    }
}

#[test]
fn validate_accepts_defaults_and_rejects_unknown_models() {
    for model in MODELS {
        assert_eq!(validate(model, &no_params()), Ok(()), "{model}");
        assert_eq!(device(model, 1, 32).kind(), *model);
    }
    let err = validate("floppy", &no_params()).err().unwrap_or_default();
    assert!(err.contains("floppy") && err.contains("usb-stick"), "{err}");
    assert!(build("hdd", &no_params(), Rng::new(0), 0).is_err());
}

#[test]
fn bad_parameters_name_the_key() {
    for model in MODELS {
        let err = validate(model, &one_param("bogus", "1"))
            .err()
            .unwrap_or_default();
        assert!(
            err.contains("unknown parameter 'bogus'") && err.contains("capacity"),
            "{err}"
        );
        let err = validate(model, &one_param("capacity", "lots"))
            .err()
            .unwrap_or_default();
        assert!(
            err.contains("'capacity'") && err.contains("'lots'") && err.contains("allowed"),
            "{err}"
        );
        let err = validate(model, &one_param("capacity", "1KiB"))
            .err()
            .unwrap_or_default();
        assert!(
            err.contains("out of range") && err.contains("1.0MiB"),
            "{err}"
        );
        assert_eq!(
            validate(model, &one_param("capacity", "2TiB")),
            Ok(()),
            "{model}"
        );
    }
    let err = validate("nvme", &one_param("read_us", "-5"))
        .err()
        .unwrap_or_default();
    assert!(err.contains("'read_us'") && err.contains("'-5'"), "{err}");
    let err = validate("usb-stick", &one_param("spike_prob", "1.5"))
        .err()
        .unwrap_or_default();
    assert!(
        err.contains("'spike_prob'") && err.contains("0 to 1"),
        "{err}"
    );
    let err = validate("sata-ssd", &one_param("channels", "0"))
        .err()
        .unwrap_or_default();
    assert!(
        err.contains("'channels'") && err.contains("1 to 1024"),
        "{err}"
    );
}

#[test]
fn same_seed_same_completions() {
    for model in MODELS {
        let capacity = device(model, 0, 32).capacity();
        let work = workload(capacity, 9);
        let first = run(device(model, 42, 32).as_mut(), &work);
        let again = run(device(model, 42, 32).as_mut(), &work);
        let other = run(device(model, 43, 32).as_mut(), &work);
        assert_eq!(first.len(), work.len(), "{model}");
        assert_eq!(first, again, "{model}");
        assert_ne!(first, other, "{model}: the seed should matter");
        let mut ids: Vec<u64> = first.iter().map(|&(id, _)| id).collect();
        ids.sort_unstable();
        assert_eq!(ids, (0..work.len() as u64).collect::<Vec<_>>(), "{model}");
    }
}

#[test]
fn busy_time_is_bounded_and_monotone() {
    for model in MODELS {
        let mut dev = device(model, 7, 32);
        let work = workload(dev.capacity(), 3);
        let done = run(dev.as_mut(), &work);
        let end = done.last().map_or(Instant::ZERO, |&(_, at)| at);
        let first_submit = work[0].0;
        let busy_ns = dev.busy_ns(end + 1_000_000_000);
        assert!(
            busy_ns <= end.since_ns(first_submit) + 1_000_000_000,
            "{model}"
        );
        assert!(busy_ns > 0, "{model}");
        let mut last = 0;
        for step in 0..=10 {
            let busy = dev.busy_ns(end + step * 1_000_000);
            assert!(busy >= last, "{model}");
            last = busy;
        }
    }
}

/// Latencies of isolated random 4 KiB reads, 100 ms apart.
fn isolated_read_latencies(model: &str, count: u64) -> Vec<u64> {
    let mut dev = device(model, 21, 32);
    let mut rng = Rng::new(8);
    let blocks = dev.capacity() / 4096;
    let mut latencies: Vec<u64> = (0..count)
        .map(|id| {
            let at = Instant(id * 100_000_000);
            let req = DevRequest {
                id,
                write: false,
                offset: rng.below(blocks) * 4096,
                len: 4096,
            };
            let done = run(dev.as_mut(), &[(at, req)]);
            done[0].1.since_ns(at)
        })
        .collect();
    latencies.sort_unstable();
    latencies
}

#[test]
fn idle_read_latency_matches_simulation() {
    for model in MODELS {
        let model_ns = device(model, 0, 32).idle_read_latency_ns() as f64;
        let latencies = isolated_read_latencies(model, 201);
        let mean_ns = latencies.iter().sum::<u64>() as f64 / latencies.len() as f64;
        let median_ns = latencies[100] as f64;
        if *model == "hdd" {
            assert!(
                (mean_ns / model_ns - 1.0).abs() < 0.3,
                "hdd: mean {mean_ns} vs {model_ns}"
            );
            assert!(
                (median_ns / model_ns - 1.0).abs() < 0.3,
                "hdd: median {median_ns} vs {model_ns}"
            );
        } else {
            // Exact median of the jitter distribution: 201 samples land
            // within a couple of percent of it.
            assert!(
                (median_ns / model_ns - 1.0).abs() < 0.02,
                "{model}: median {median_ns} vs {model_ns}"
            );
        }
    }
}
