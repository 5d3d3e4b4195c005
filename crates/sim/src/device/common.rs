//! Pieces shared by the device models: transfer times and busy-time
//! accounting.

use wb_engine::time::NS_PER_SEC;
use wb_engine::Instant;

pub const MIB: f64 = 1024.0 * 1024.0;
pub const KIB: u64 = 1024;
pub const GIB: u64 = 1024 * 1024 * 1024;
pub const TIB: u64 = 1024 * GIB;
/// Upper bound on any device capacity we accept (256 TiB).
pub const MAX_CAPACITY: u64 = 256 * TIB;
/// Lower bound on any device capacity we accept (1 MiB).
pub const MIN_CAPACITY: u64 = 1024 * KIB;
/// The request size `idle_read_latency_ns` is about.
pub const PROBE_READ_BYTES: u64 = 4 * KIB;
/// Range of accepted rates in MiB/s.
pub const MIN_MIB_S: f64 = 0.01;
pub const MAX_MIB_S: f64 = 1_000_000.0;

/// What the filesystem on a device spends releasing an unlinked file
/// (freeing its inode and blocks; the engine's backlog asks for it in
/// steps): `inactivate_file_us` a file, `inactivate_mib_us` a MiB freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inactivation {
    pub file_ns: u64,
    pub mib_ns: u64,
}

impl Inactivation {
    /// Defaults: 50 us a file (Chinner 2021: ~20,000 inactivations/s) and
    /// 100 us a MiB.
    pub fn parse(p: &mut super::params::Params<'_>) -> Result<Inactivation, String> {
        const US: u64 = 1_000;
        Ok(Inactivation {
            file_ns: p.duration_ns("inactivate_file_us", US, 50 * US, 0, 10_000_000 * US)?,
            mib_ns: p.duration_ns("inactivate_mib_us", US, 100 * US, 0, 1_000_000 * US)?,
        })
    }

    /// Time of a release step freeing `bytes`, plus the file's own cost
    /// when the step removes it.
    pub fn step_ns(&self, bytes: u64, removes: bool) -> u64 {
        let mib = bytes as f64 / MIB;
        (mib * self.mib_ns as f64).round() as u64 + if removes { self.file_ns } else { 0 }
    }
}

/// Time to move `bytes` at `bytes_s` bytes per second, rounded to the ns.
pub fn transfer_ns(bytes: u64, bytes_s: f64) -> u64 {
    (bytes as f64 * NS_PER_SEC as f64 / bytes_s).round() as u64
}

/// Accumulates the time at least one command is in service. Models call
/// `update` after every state change with whether anything is in service.
#[derive(Clone, Debug, Default)]
pub struct BusyClock {
    accumulated_ns: u64,
    busy_since: Option<Instant>,
}

impl BusyClock {
    pub fn update(&mut self, now: Instant, in_service: bool) {
        match (self.busy_since, in_service) {
            (None, true) => self.busy_since = Some(now),
            (Some(since), false) => {
                self.accumulated_ns += now.since_ns(since);
                self.busy_since = None;
            }
            _ => {}
        }
    }

    /// Busy time up to `now`, assuming the state has been advanced to `now`.
    pub fn total_ns(&self, now: Instant) -> u64 {
        self.accumulated_ns + self.busy_since.map_or(0, |since| now.since_ns(since))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_clock_counts_only_busy_intervals() {
        let mut clock = BusyClock::default();
        clock.update(Instant(10), true);
        clock.update(Instant(15), true);
        clock.update(Instant(30), false);
        clock.update(Instant(40), false);
        assert_eq!(clock.total_ns(Instant(50)), 20);
        clock.update(Instant(50), true);
        assert_eq!(clock.total_ns(Instant(55)), 25);
    }

    #[test]
    fn transfer_rounds_to_ns() {
        assert_eq!(transfer_ns(4096, 150.0 * MIB), 26_042);
        assert_eq!(transfer_ns(0, 1.0), 0);
    }
}
