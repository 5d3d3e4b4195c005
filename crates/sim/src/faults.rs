//! Faults on top of the pristine device models, and the oracle that
//! checks what the engine makes of them (TigerBeetle's VOPR, FoundationDB's
//! simulation): everything drawn from the run's one seed, so a seed
//! replays a run exactly. With no profile the simulator draws nothing and
//! runs as before.
//!
//! Faults, per request the engine submits (direct requests excepted: their
//! errors go to their writer, not to the file's error sequence):
//! - `write_eio`, `read_eio`: the request fails with EIO;
//! - `enospc`: a write fails with ENOSPC;
//! - `latency_spike`: the request completes 1 to 3 s late.
//!
//! And `knob_change`: every ~200 ms of simulated time a knob changes while
//! I/O is in flight (wbt_lat_usec on, off and values, queue_depth,
//! nr_requests, stable_writes, dirty limits, the cache's memory, lru).
//!
//! Checks, made on every run:
//! - `invariants`: the engine's invariants after every event (memory
//!   within its budget, dirty within its limit and slack, counters agree
//!   with pages, backlog bounds, locks);
//! - `page_map`: at the same events, the page map the real runtime's fast
//!   paths read, kept by the engine crate's keeper from the run's actions,
//!   against the engine (`wb_engine::page_map`, check.rs): every mapped
//!   page cached, valid and at the engine's frame; every overwritable
//!   frame a mapped dirty page's; every dirty page mapped;
//! - `fsync_reports`: an fsync of a handle returns an error exactly when a
//!   write-back of its file failed since the handle last heard of one (the
//!   error reaches every handle once; failed pages are never silently
//!   clean, or a later fsync would succeed without reporting);
//! - `durability`: after a power cut (with `all`, one a run, at a time
//!   drawn in its last three quarters, or at its end), every version of a
//!   page that an Ok fsync or sync acknowledged is on the media, or a newer
//!   one (oracle.rs: device write caches, flushes, torn writes);
//! - `stall_bounds`: no sleep the engine imposes is longer than its
//!   reason's bound (`StallReason::max_sleep_ns`: a throttle pause at most
//!   200 ms, a wait for an event re-checked after 100 ms), and the task is
//!   woken by its end. (An operation's whole wait has no bound under
//!   faults: a sync waits for a write delayed 3 s by a latency spike.)
//! - `no_panic`: the engine returns errors, never panics.
//!
//! - `restart`: at a process crash (with `all`, one a run, in its first
//!   half), every acknowledged version is still on the device (its
//!   volatile cache or media) and every file as long as a sync found it;
//!   the engine then restarts over what survived, and the run goes on.

use crate::rng::Rng;
use std::collections::BTreeMap;
use std::fmt;
use wb_engine::IoErrorKind;

/// Which faults a run injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultProfile {
    /// Errors and latency spikes of the devices.
    Io,
    /// Those and knob changes under load.
    All,
}

impl FaultProfile {
    pub fn parse(text: &str) -> Result<FaultProfile, String> {
        match text {
            "io" => Ok(FaultProfile::Io),
            "all" => Ok(FaultProfile::All),
            other => Err(format!(
                "unknown fault profile '{other}' (expected io or all)"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            FaultProfile::Io => "io",
            FaultProfile::All => "all",
        }
    }
}

impl fmt::Display for FaultProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Fault kinds, as counted.
pub const FAULT_KINDS: [&str; 7] = [
    "write_eio",
    "read_eio",
    "enospc",
    "latency_spike",
    "knob_change",
    "crash",
    "power_cut",
];
/// Check kinds, as counted (`durability`: pages checked after power cuts;
/// `restart`: pages and lengths checked at crashes; `stall_bounds`: sleeps
/// checked).
pub const CHECK_KINDS: [&str; 7] = [
    "invariants",
    "page_map",
    "fsync_reports",
    "stall_bounds",
    "restart",
    "durability",
    "no_panic",
];

/// Chance per request of each device fault.
const P_WRITE_EIO: f64 = 0.004;
const P_READ_EIO: f64 = 0.004;
const P_ENOSPC: f64 = 0.002;
const P_SPIKE: f64 = 0.001;
/// A latency spike's length: 1 s plus up to this much.
const SPIKE_EXTRA_NS: u64 = 2_000_000_000;
/// Mean simulated time between knob changes.
const KNOB_MEAN_NS: f64 = 200_000_000.0;

/// What happens to one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestFault {
    pub error: Option<IoErrorKind>,
    pub delay_ns: u64,
}

/// A knob change: (device index or None for the cache, knob, value).
pub type KnobChange = (Option<usize>, &'static str, String);

/// The faults of one run, drawn from its seed.
pub struct FaultPlan {
    profile: FaultProfile,
    rng: Rng,
    pub injected: BTreeMap<&'static str, u64>,
}

impl FaultPlan {
    pub fn new(profile: FaultProfile, rng: Rng) -> FaultPlan {
        let injected = FAULT_KINDS.iter().map(|&k| (k, 0)).collect();
        FaultPlan {
            profile,
            rng,
            injected,
        }
    }

    fn count(&mut self, kind: &'static str) {
        *self.injected.entry(kind).or_insert(0) += 1;
    }

    /// The fate of a request (a write if `write`).
    pub fn request(&mut self, write: bool) -> RequestFault {
        let roll = self.rng.next_f64();
        let error = if write && roll < P_WRITE_EIO {
            self.count("write_eio");
            Some(IoErrorKind::Io)
        } else if write && roll < P_WRITE_EIO + P_ENOSPC {
            self.count("enospc");
            Some(IoErrorKind::NoSpace)
        } else if !write && roll < P_READ_EIO {
            self.count("read_eio");
            Some(IoErrorKind::Io)
        } else {
            None
        };
        let delay_ns = if self.rng.next_f64() < P_SPIKE {
            self.count("latency_spike");
            1_000_000_000 + self.rng.below(SPIKE_EXTRA_NS)
        } else {
            0
        };
        RequestFault { error, delay_ns }
    }

    /// Time until the next knob change, or None if the profile has none.
    pub fn next_knob_in_ns(&mut self) -> Option<u64> {
        (self.profile == FaultProfile::All).then(|| self.rng.exponential(KNOB_MEAN_NS) as u64 + 1)
    }

    /// When the power goes, for a run of `end_ns`: with `all`, at a time
    /// drawn in its last three quarters, or None (`io`: no power cut).
    pub fn power_cut_in_ns(&mut self, end_ns: u64) -> Option<u64> {
        (self.profile == FaultProfile::All)
            .then(|| end_ns / 4 + self.rng.below(end_ns - end_ns / 4))
    }

    /// When the process crashes, for a run of `end_ns`: with `all`, at a
    /// time drawn in its first half, or None (`io`: no crash).
    pub fn crash_in_ns(&mut self, end_ns: u64) -> Option<u64> {
        (self.profile == FaultProfile::All).then(|| 1 + self.rng.below(end_ns / 2))
    }

    pub fn count_crash(&mut self) {
        self.count("crash");
    }

    pub fn count_power_cut(&mut self) {
        self.count("power_cut");
    }

    /// The plan's random stream (for tearing writes at a power cut).
    pub fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    /// A knob change for a run on `devices` devices whose cache started
    /// with `memory_bytes` (the `memory` knob goes down to a quarter of
    /// that and back up).
    pub fn knob_change(&mut self, devices: usize, memory_bytes: u64) -> KnobChange {
        self.count("knob_change");
        let device = Some(self.rng.below(devices.max(1) as u64) as usize);
        let pick = |rng: &mut Rng, values: &[&str]| {
            values[rng.below(values.len() as u64) as usize].to_string()
        };
        match self.rng.below(10) {
            0 => (
                device,
                "wbt_lat_usec",
                pick(&mut self.rng, &["0", "-1", "2000", "75000", "500"]),
            ),
            1 => (
                device,
                "queue_depth",
                pick(&mut self.rng, &["1", "4", "32", "64"]),
            ),
            2 => (
                device,
                "nr_requests",
                pick(&mut self.rng, &["4", "32", "128"]),
            ),
            3 => (
                device,
                "stable_writes",
                pick(&mut self.rng, &["none", "wait", "snapshot", "auto"]),
            ),
            4 => (None, "dirty_ratio", pick(&mut self.rng, &["5", "20", "40"])),
            5 => (
                None,
                "dirty_background_ratio",
                pick(&mut self.rng, &["1", "5", "10"]),
            ),
            6 => {
                let share = [4, 2, 1][self.rng.below(3) as usize];
                let bytes = (memory_bytes / share).max(wb_engine::MIN_MEMORY_BYTES);
                (None, "memory", bytes.min(memory_bytes).to_string())
            }
            7 => (
                None,
                "lru",
                pick(&mut self.rng, &["active-inactive", "clock"]),
            ),
            // Write slices hold reads the engine issues: on, off and
            // changed with reads held.
            8 => (
                device,
                "wbt_slice_ms",
                pick(&mut self.rng, &["0", "20", "250"]),
            ),
            _ => (
                None,
                "dirty_expire_centisecs",
                pick(&mut self.rng, &["10", "300", "3000"]),
            ),
        }
    }
}

/// The oracle's view of one run.
#[derive(Debug, Default)]
pub struct Oracle {
    /// Per job, per file of the job: a write-back of the file failed since
    /// the job's handle last heard of one.
    pub unreported: Vec<Vec<bool>>,
    pub checks: BTreeMap<&'static str, u64>,
    /// The first violation: (check, what happened).
    pub violation: Option<(&'static str, String)>,
    /// Per job, the sleep it is in: (since, until, reason).
    sleeping: Vec<Option<(u64, u64, wb_engine::StallReason)>>,
}

impl Oracle {
    pub fn new(files_per_job: &[usize]) -> Oracle {
        Oracle {
            unreported: files_per_job.iter().map(|&n| vec![false; n]).collect(),
            checks: CHECK_KINDS.iter().map(|&k| (k, 0)).collect(),
            violation: None,
            sleeping: vec![None; files_per_job.len()],
        }
    }

    /// Job `job` was put to sleep at `now_ns` by `stall`.
    pub fn slept(&mut self, job: usize, now_ns: u64, stall: &wb_engine::Stall) {
        let until = stall.until.as_ns();
        let bound = stall.reason.max_sleep_ns();
        if until.saturating_sub(now_ns) > bound {
            self.violate(
                "stall_bounds",
                format!(
                    "at {now_ns} ns job {job} was put to sleep ({}) until {until} ns, past its bound of {bound} ns",
                    stall.reason.name()
                ),
            );
        }
        self.sleeping[job] = Some((now_ns, until, stall.reason));
    }

    /// Job `job` runs again at `now_ns`: by the end of the sleep it was in.
    pub fn woke(&mut self, job: usize, now_ns: u64) {
        let Some((since, until, reason)) = self.sleeping[job].take() else {
            return;
        };
        self.count("stall_bounds");
        if now_ns > until {
            self.violate(
                "stall_bounds",
                format!(
                    "job {job} slept ({}) from {since} ns to {now_ns} ns, past the sleep's end at {until} ns",
                    reason.name()
                ),
            );
        }
    }

    /// A restart: the old process's sleeps ended with it.
    pub fn forget_sleeps(&mut self) {
        self.sleeping.fill(None);
    }

    pub fn count(&mut self, check: &'static str) {
        *self.checks.entry(check).or_insert(0) += 1;
    }

    pub fn violate(&mut self, check: &'static str, what: String) {
        if self.violation.is_none() {
            self.violation = Some((check, what));
        }
    }

    /// An fsync of job `job`'s file `file` returned (`ok` or an error).
    pub fn fsync_returned(&mut self, job: usize, file: usize, ok: bool, now_ns: u64) {
        self.count("fsync_reports");
        let owed = std::mem::take(&mut self.unreported[job][file]);
        if ok && owed {
            self.violate(
                "fsync_reports",
                format!("at {now_ns} ns job {job}'s fsync of its file {file} returned Ok with a failed write-back unreported"),
            );
        } else if !ok && !owed {
            self.violate(
                "fsync_reports",
                format!("at {now_ns} ns job {job}'s fsync of its file {file} reported an error twice, or one that did not happen"),
            );
        }
    }
}
