//! `--set KNOB=VALUE`, `--set DEVICE.KNOB=VALUE` and `--set JOB.mode=MODE`
//! overrides.

use crate::error::SetError;
use crate::model::{min_ratio_excess, DeviceSpec, JobKind, Scenario, WriteMode};
use wb_engine::{Config, DeviceConfig};

/// Applies one `--set` override to `scenario`:
/// - `KNOB=VALUE` sets a cache knob, or, if KNOB is a device knob, sets it
///   on every device;
/// - `DEVICE.KNOB=VALUE` sets a device knob on one device;
/// - `JOB.mode=MODE` sets how one job writes (buffered or dontcache).
///
/// On error nothing changes: every change is made on a copy first.
pub fn apply_set(scenario: &mut Scenario, spec: &str) -> Result<(), SetError> {
    let fail = |message: String| SetError::new(spec, message);
    let (target, value) = spec
        .split_once('=')
        .ok_or_else(|| fail("expected KNOB=VALUE or DEVICE.KNOB=VALUE (missing '=')".into()))?;
    let target = target.trim();
    // Device names cannot contain '.', and knob names do not, so the
    // first '.' separates them.
    match target.split_once('.') {
        Some((job, "mode")) if !scenario.devices.iter().any(|d| d.name == job) => {
            set_job_mode(scenario, job, value)
        }
        Some((device, knob)) => set_on_device(&mut scenario.devices, device, knob, value),
        None if Config::KNOBS.contains(&target) => set_cache(&mut scenario.cache, target, value),
        None if DeviceConfig::KNOBS.contains(&target) => {
            set_on_all(&mut scenario.devices, target, value)
        }
        None => Err(format!(
            "unknown knob '{target}' (cache knobs: {}; device knobs, for every device or as DEVICE.KNOB: {})",
            Config::KNOBS.join(", "),
            DeviceConfig::KNOBS.join(", ")
        )),
    }
    .map_err(fail)
}

fn set_job_mode(scenario: &mut Scenario, job: &str, value: &str) -> Result<(), String> {
    let known_jobs = || {
        let names: Vec<&str> = scenario.jobs.iter().map(|j| j.name.as_str()).collect();
        names.join(", ")
    };
    let Some(index) = scenario.jobs.iter().position(|j| j.name == job) else {
        return Err(format!(
            "no device or job named '{job}' (jobs: {})",
            known_jobs()
        ));
    };
    if matches!(scenario.jobs[index].kind, JobKind::Reader { .. }) {
        return Err(format!("job '{job}' reads: 'mode' applies to writing jobs"));
    }
    let mode = WriteMode::ALL
        .into_iter()
        .find(|m| m.name() == value.trim())
        .ok_or_else(|| {
            let known: Vec<&str> = WriteMode::ALL.iter().map(|m| m.name()).collect();
            format!(
                "unknown mode '{}' (known: {})",
                value.trim(),
                known.join(", ")
            )
        })?;
    scenario.jobs[index].mode = mode;
    Ok(())
}

fn set_cache(cache: &mut Config, knob: &str, value: &str) -> Result<(), String> {
    let mut next = cache.clone();
    next.set(knob, value).map_err(|e| e.to_string())?;
    *cache = next;
    Ok(())
}

fn set_on_device(
    devices: &mut [DeviceSpec],
    device: &str,
    knob: &str,
    value: &str,
) -> Result<(), String> {
    let index = devices
        .iter()
        .position(|d| d.name == device)
        .ok_or_else(|| {
            let known: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
            format!("unknown device '{device}' (devices: {})", known.join(", "))
        })?;
    if Config::KNOBS.contains(&knob) {
        return Err(format!(
            "'{knob}' is a cache knob, not a device knob; write {knob}=VALUE"
        ));
    }
    let mut next = devices.to_vec();
    next[index]
        .config
        .set(knob, value)
        .map_err(|e| e.to_string())?;
    commit(devices, next)
}

fn set_on_all(devices: &mut [DeviceSpec], knob: &str, value: &str) -> Result<(), String> {
    let mut next = devices.to_vec();
    for device in &mut next {
        device
            .config
            .set(knob, value)
            .map_err(|e| format!("device '{}': {e}", device.name))?;
    }
    commit(devices, next)
}

/// Replaces `devices` with `next` unless the guaranteed shares no longer fit,
/// the same check the file gets.
fn commit(devices: &mut [DeviceSpec], next: Vec<DeviceSpec>) -> Result<(), String> {
    if let Some(message) = min_ratio_excess(next.iter().map(|d| (d.name.as_str(), &d.config))) {
        return Err(message);
    }
    devices.clone_from_slice(&next);
    Ok(())
}
