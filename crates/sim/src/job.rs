//! A job's life and figures, the same for the simulator and the real
//! runner: when a job starts and stops (its `runtime`, or, for a background
//! job, once every foreground job has finished), how each operation's
//! latency is recorded by kind (writes and reads as the job's I/O, fsync
//! and sync apart, failures counted), and the [`JobReport`] made at the end.
//!
//! Both `wb sim` (`crate::runner`, on virtual time) and `wb run` (a thread
//! per job, on real time) keep one [`JobRun`] per scenario job; neither has
//! rules of its own. Time is passed in as a [`wb_engine::Instant`]; nothing
//! here reads a clock, sleeps or shares state between threads: the caller
//! counts the foreground jobs still running and passes that count in.

use crate::report::{JobReport, KindTally, Latency};
use crate::timeline::LatencyTimeline;
use crate::workload::Op;
use wb_engine::{Instant, WriteFlags};
use wb_scenario::{JobSpec, Scenario, WriteMode};

/// The engine's flags for a job's writes through the cache (direct
/// writes go around it: `Engine::write_direct`).
pub fn write_flags(mode: WriteMode) -> WriteFlags {
    match mode {
        WriteMode::Buffered | WriteMode::Direct => WriteFlags::default(),
        WriteMode::Dontcache => WriteFlags::DONTCACHE,
    }
}

/// How many of the scenario's jobs are foreground jobs: the run lasts until
/// all of them finish, and background jobs stop then.
pub fn foreground_jobs(scenario: &Scenario) -> usize {
    scenario.jobs.iter().filter(|j| !j.background).count()
}

/// One job of a run: its stop rules, the operation in progress and what it
/// has done so far.
#[derive(Clone, Debug)]
pub struct JobRun {
    name: String,
    kind: &'static str,
    device: String,
    background: bool,
    start_ns: u64,
    runtime_ns: Option<u64>,
    started: Option<Instant>,
    finished: Option<Instant>,
    /// The operation in progress and when it started.
    op: Option<(Op, Instant)>,
    /// Latency of writes and reads.
    lat: Latency,
    /// Latency of fsync and sync calls.
    sync_lat: Latency,
    /// Latency of writes and reads over the run (for plots).
    lat_over_time: LatencyTimeline,
    /// Writes, reads, flushes (fsync, sync) and unlinks apart, as dbench
    /// reports.
    kinds: [KindTally; 4],
    /// Writes and reads done, and their bytes.
    ops: u64,
    bytes: u64,
    /// Operations of any kind that failed.
    errors: u64,
}

impl JobRun {
    /// A job of `spec`, on the device named `device`, not started yet.
    pub fn new(spec: &JobSpec, device: &str) -> JobRun {
        JobRun {
            name: spec.name.clone(),
            kind: spec.kind.name(),
            device: device.to_string(),
            background: spec.background,
            start_ns: spec.start_ns,
            runtime_ns: spec.runtime_ns,
            started: None,
            finished: None,
            op: None,
            lat: Latency::default(),
            sync_lat: Latency::default(),
            lat_over_time: LatencyTimeline::default(),
            kinds: [KindTally::default(); 4],
            ops: 0,
            bytes: 0,
            errors: 0,
        }
    }

    /// Job `job` of `scenario`.
    pub fn for_job(scenario: &Scenario, job: usize) -> JobRun {
        let spec = &scenario.jobs[job];
        JobRun::new(spec, &scenario.devices[spec.device].name)
    }

    /// When the job is due to start, from the start of the run.
    pub fn start_at(&self) -> Instant {
        Instant(self.start_ns)
    }

    /// The job starts at `now`; its runtime counts from the first call.
    pub fn start(&mut self, now: Instant) {
        self.started.get_or_insert(now);
    }

    /// Whether the job must stop at `now` instead of asking its workload
    /// for more: its runtime has passed since it started, or it is a
    /// background job and `foreground_left` (foreground jobs not finished
    /// yet) is 0.
    pub fn should_stop(&self, now: Instant, foreground_left: usize) -> bool {
        let over_runtime = match (self.runtime_ns, self.started) {
            (Some(rt), Some(s)) => now.since_ns(s) >= rt,
            _ => false,
        };
        over_runtime || (self.background && foreground_left == 0)
    }

    /// When the job's runtime runs out (`should_stop` from then on), if it
    /// has one and has started.
    pub fn stop_at(&self) -> Option<Instant> {
        Some(self.started? + self.runtime_ns?)
    }

    /// The job finishes at `now` (later calls change nothing). True the
    /// first time for a foreground job: the caller then lowers its count of
    /// foreground jobs left.
    pub fn finish(&mut self, now: Instant) -> bool {
        if self.finished.is_some() {
            return false;
        }
        self.finished = Some(now);
        !self.background
    }

    pub fn is_finished(&self) -> bool {
        self.finished.is_some()
    }

    /// `op` starts at `now`.
    pub fn begin_op(&mut self, op: Op, now: Instant) {
        self.op = Some((op, now));
    }

    /// The operation in progress, if any.
    pub fn current_op(&self) -> Option<Op> {
        self.op.map(|(op, _)| op)
    }

    /// The operation in progress ends at `now`, `ok` or failed, and is
    /// recorded with the time since it began. None (and nothing recorded)
    /// if no operation was in progress.
    pub fn end_op(&mut self, now: Instant, ok: bool) -> Option<Op> {
        let (op, began) = self.op.take()?;
        let latency_ns = now.since_ns(began);
        self.record(&op, latency_ns, ok);
        if !matches!(op, Op::Fsync { .. } | Op::Sync) {
            self.lat_over_time.record(now.as_ns(), latency_ns);
        }
        Some(op)
    }

    /// `n` operations like `op`, the first starting at `start`, each
    /// starting as the one before ends and taking `op_ns`, all successful:
    /// recorded as `n` pairs of `begin_op` and `end_op` would record them
    /// (a runner that served them at once).
    pub fn record_repeats(&mut self, op: Op, start: Instant, op_ns: u64, n: u64) {
        debug_assert!(self.op.is_none(), "an operation is in progress");
        self.record_n(&op, op_ns, true, n);
        if !matches!(op, Op::Fsync { .. } | Op::Sync) {
            self.lat_over_time
                .record_every(start.as_ns() + op_ns, op_ns, n, op_ns);
        }
    }

    /// Records one operation that took `latency_ns`: a write or read counts
    /// as one op of its length in bytes with its latency in the I/O
    /// latencies; an fsync or sync goes into the sync latencies; either
    /// counts an error if it failed.
    pub fn record(&mut self, op: &Op, latency_ns: u64, ok: bool) {
        self.record_n(op, latency_ns, ok, 1);
    }

    /// `n` operations like `op`, each as `record` records one.
    fn record_n(&mut self, op: &Op, latency_ns: u64, ok: bool, n: u64) {
        if !ok {
            self.errors += n;
        }
        match *op {
            Op::Write { len, .. } | Op::Read { len, .. } => {
                self.lat.record_n(latency_ns, n);
                self.ops += n;
                self.bytes += len * n;
            }
            Op::Unlink { .. } => {
                self.lat.record_n(latency_ns, n);
                self.ops += n;
            }
            Op::Fsync { .. } | Op::Sync => self.sync_lat.record_n(latency_ns, n),
        }
        let kind = match op {
            Op::Write { .. } => 0,
            Op::Read { .. } => 1,
            Op::Fsync { .. } | Op::Sync => 2,
            Op::Unlink { .. } => 3,
        };
        self.kinds[kind].record_n(latency_ns, n);
    }

    /// The job's report when the run ends at `end`: a job not finished by
    /// then counts until `end`, one never started has run for 0 s.
    pub fn report(&self, end: Instant) -> JobReport {
        let start = self.started.unwrap_or(end);
        let elapsed_s = self.finished.unwrap_or(end).since_ns(start) as f64 / 1e9;
        let per_s = |x: f64| if elapsed_s > 0.0 { x / elapsed_s } else { 0.0 };
        JobReport {
            name: self.name.clone(),
            kind: self.kind.to_string(),
            device: self.device.clone(),
            ops: self.ops,
            bytes: self.bytes,
            elapsed_s,
            iops: per_s(self.ops as f64),
            bw_mib_s: per_s(self.bytes as f64 / (1024.0 * 1024.0)),
            lat_us: self.lat.summary(),
            syncs: self.sync_lat.count(),
            sync_lat_us: self.sync_lat.summary(),
            op_kinds: ["write", "read", "flush", "unlink"]
                .into_iter()
                .zip(&self.kinds)
                .filter(|(_, tally)| tally.count() > 0)
                .map(|(kind, tally)| tally.report(kind))
                .collect(),
            errors: self.errors,
            cut_off: self.finished.is_none() && !self.background,
            cached_end_mib: None,
            lat_slot_s: self.lat_over_time.width_s(),
            lat_over_time: self.lat_over_time.slots(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wb_engine::time::NS_PER_MS;
    use wb_scenario::JobKind;

    fn spec(background: bool, runtime_ns: Option<u64>) -> JobSpec {
        JobSpec {
            name: "j".to_string(),
            device: 0,
            domain: "root".to_string(),
            start_ns: 5 * NS_PER_MS,
            runtime_ns,
            background,
            mode: WriteMode::Buffered,
            kind: JobKind::OccasionalWriter {
                block_size: 4096,
                interval_ns: NS_PER_MS,
                count: 10,
            },
        }
    }

    // The latency histograms keep 3 significant digits: latencies below
    // 2048 ns come back exactly, larger ones may be rounded up a little.
    const WRITE: Op = Op::Write {
        file: 0,
        offset: 0,
        len: 4096,
    };

    #[test]
    fn a_job_with_a_runtime_stops_exactly_when_it_has_passed() {
        let mut j = JobRun::new(&spec(false, Some(10 * NS_PER_MS)), "disk");
        assert_eq!(j.start_at(), Instant(5 * NS_PER_MS));
        let start = Instant(7 * NS_PER_MS);
        j.start(start);
        // A second start does not move the start.
        j.start(Instant(8 * NS_PER_MS));
        assert!(!j.should_stop(start, 1));
        assert!(!j.should_stop(start + (10 * NS_PER_MS - 1), 1));
        assert!(j.should_stop(start + 10 * NS_PER_MS, 1));
        assert!(j.should_stop(start + 11 * NS_PER_MS, 1));
    }

    #[test]
    fn a_job_not_started_yet_has_no_runtime_to_pass() {
        let j = JobRun::new(&spec(false, Some(NS_PER_MS)), "disk");
        assert!(!j.should_stop(Instant(100 * NS_PER_MS), 1));
    }

    #[test]
    fn a_background_job_stops_when_no_foreground_job_is_left() {
        let mut bg = JobRun::new(&spec(true, None), "disk");
        bg.start(Instant::ZERO);
        assert!(!bg.should_stop(Instant(1_000 * NS_PER_MS), 2));
        assert!(!bg.should_stop(Instant(1_000 * NS_PER_MS), 1));
        assert!(bg.should_stop(Instant(1_000 * NS_PER_MS), 0));
        // A foreground job does not care how many others are left.
        let mut fg = JobRun::new(&spec(false, None), "disk");
        fg.start(Instant::ZERO);
        assert!(!fg.should_stop(Instant(1_000 * NS_PER_MS), 0));
    }

    #[test]
    fn finishing_lowers_the_foreground_count_once_and_only_for_foreground_jobs() {
        let mut fg = JobRun::new(&spec(false, None), "disk");
        assert!(!fg.is_finished());
        assert!(fg.finish(Instant(3)));
        assert!(fg.is_finished());
        assert!(!fg.finish(Instant(4)));
        let mut bg = JobRun::new(&spec(true, None), "disk");
        assert!(!bg.finish(Instant(3)));
        assert!(bg.is_finished());
    }

    #[test]
    fn a_write_counts_one_op_and_its_bytes() {
        let mut j = JobRun::new(&spec(false, None), "disk");
        j.record(&WRITE, 2_000, true);
        let r = j.report(Instant::ZERO);
        assert_eq!((r.ops, r.bytes, r.errors, r.syncs), (1, 4096, 0, 0));
        assert_eq!(r.lat_us.max, 2.0);
        assert_eq!(r.sync_lat_us.max, 0.0);
    }

    #[test]
    fn a_read_counts_like_a_write() {
        let mut j = JobRun::new(&spec(false, None), "disk");
        let read = Op::Read {
            file: 0,
            offset: 8192,
            len: 65536,
        };
        j.record(&read, 1_000, true);
        j.record(&WRITE, 1_000, true);
        let r = j.report(Instant::ZERO);
        assert_eq!((r.ops, r.bytes, r.syncs), (2, 65536 + 4096, 0));
    }

    #[test]
    fn a_failed_fsync_counts_an_error_and_a_sync_latency_but_no_op() {
        let mut j = JobRun::new(&spec(false, None), "disk");
        j.record(&Op::Fsync { file: 0 }, 1_500, false);
        j.record(&Op::Sync, 2_000, true);
        let r = j.report(Instant::ZERO);
        assert_eq!((r.ops, r.bytes, r.errors, r.syncs), (0, 0, 1, 2));
        assert_eq!(r.sync_lat_us.max, 2.0);
        assert_eq!(r.lat_us.max, 0.0);
    }

    #[test]
    fn an_operation_in_progress_is_recorded_with_the_time_since_it_began() {
        let mut j = JobRun::new(&spec(false, None), "disk");
        assert_eq!(j.current_op(), None);
        assert_eq!(j.end_op(Instant(10), true), None);
        j.begin_op(WRITE, Instant(1_000));
        assert_eq!(j.current_op(), Some(WRITE));
        assert_eq!(j.end_op(Instant(2_500), false), Some(WRITE));
        assert_eq!(j.current_op(), None);
        let r = j.report(Instant::ZERO);
        assert_eq!((r.ops, r.bytes, r.errors), (1, 4096, 1));
        assert_eq!(r.lat_us.max, 1.5);
    }

    #[test]
    fn the_report_covers_start_to_finish_or_to_the_end_of_the_run() {
        let mut j = JobRun::new(&spec(false, None), "disk");
        // Never started: nothing ran, no rates.
        let r = j.report(Instant(9 * NS_PER_MS));
        assert_eq!((r.elapsed_s, r.iops, r.bw_mib_s), (0.0, 0.0, 0.0));
        assert_eq!(
            (r.name.as_str(), r.kind.as_str()),
            ("j", "occasional-writer")
        );
        assert_eq!(r.device, "disk");
        j.start(Instant(1_000 * NS_PER_MS));
        for _ in 0..4 {
            j.record(&WRITE, 1_000, true);
        }
        // Still running when the run ends at 3 s: 2 s of it.
        let r = j.report(Instant(3_000 * NS_PER_MS));
        assert_eq!(r.elapsed_s, 2.0);
        assert_eq!(r.iops, 2.0);
        assert_eq!(r.bw_mib_s, 4.0 * 4096.0 / (1024.0 * 1024.0) / 2.0);
        // Finished at 1.5 s: half a second, whatever the end of the run.
        j.finish(Instant(1_500 * NS_PER_MS));
        let r = j.report(Instant(3_000 * NS_PER_MS));
        assert_eq!(r.elapsed_s, 0.5);
        assert_eq!(r.iops, 8.0);
    }

    #[test]
    fn a_foreground_job_the_duration_ended_is_reported_cut_off() {
        let scenario_end = Instant(NS_PER_MS * 20);
        let mut fg = JobRun::new(&spec(false, None), "d");
        fg.start(Instant(5 * NS_PER_MS));
        assert!(fg.report(scenario_end).cut_off, "still running at the end");
        fg.finish(Instant(10 * NS_PER_MS));
        assert!(!fg.report(scenario_end).cut_off, "finished");
        let mut bg = JobRun::new(&spec(true, None), "d");
        bg.start(Instant(5 * NS_PER_MS));
        assert!(
            !bg.report(scenario_end).cut_off,
            "background jobs stop with the run"
        );
    }
}
