//! The simulator's event loop: the engine, device models and jobs on one
//! virtual clock. Events are ordered by (time, sequence number), so one
//! seed gives one run. When jobs stop and what they record is
//! [`crate::job`], shared with `wb run`.

mod hits;

use crate::device::{self, DevRequest, DeviceModel};
use crate::faults::{FaultPlan, FaultProfile, Oracle};
use crate::job::{self, JobRun};
use crate::layout::Layout;
use crate::oracle::DataModel;
use crate::report::{DeviceFacts, EngineReport, RunReport};
use crate::rng::Rng;
use crate::workload::{Next, Op, Workload};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use wb_engine::{
    Action, DeviceId, DomainId, Engine, EngineError, FileId, HandleId, Instant, IoDir, IoErrorKind,
    IoId, PageMap, ReleaseStep, Step, TaskId, VirtualRuntime, WriteFlags, PAGE_SIZE,
};
use wb_scenario::Scenario;

/// CPU cost of one system call, in the simulated world.
pub const OP_OVERHEAD_NS: u64 = 1_000;
/// CPU cost of copying data (about 10 GB/s).
pub const COPY_NS_PER_KIB: u64 = 100;

#[derive(Debug)]
pub enum SimError {
    /// A device model rejected its parameters.
    Device { device: String, message: String },
    /// The files of the scenario do not fit on a device.
    DeviceFull { device: String },
    /// A job's writeback domain was refused (too many domains).
    Domain { job: String, message: String },
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Device { device, message } => write!(f, "device '{device}': {message}"),
            SimError::DeviceFull { device } => {
                write!(
                    f,
                    "device '{device}': the scenario's files do not fit on it; raise its capacity"
                )
            }
            SimError::Domain { job, message } => write!(f, "job '{job}': {message}"),
        }
    }
}

impl std::error::Error for SimError {}

/// Options that do not change results (except `faults`).
#[derive(Default)]
pub struct SimOptions<'a> {
    /// Check the engine's invariants after every event, and the page map
    /// against it every 64th and at the end (slow; for tests).
    pub check_invariants: bool,
    /// Called now and then with the fraction of the run done (0..=1, by time).
    pub progress: Option<&'a mut dyn FnMut(f64)>,
    /// Inject faults drawn from the seed and check the oracle (faults.rs).
    pub faults: Option<FaultProfile>,
    /// Record stalls, device queues and page counts here (trace.rs).
    pub trace: Option<&'a mut wb_trace::Trace>,
    /// Run every read as an event of its own instead of serving a
    /// sequential reader's cache hits at once (runner/hits.rs): the same
    /// results, slower; for tests that show they are the same. Checking
    /// invariants after every event or recording a trace does this too.
    pub one_event_per_read: bool,
}

/// What the faults and the oracle of a run came to.
#[derive(Debug, Default)]
pub struct FaultOutcome {
    /// Faults injected, by kind.
    pub injected: BTreeMap<&'static str, u64>,
    /// Checks made, by kind.
    pub checks: BTreeMap<&'static str, u64>,
    /// The first violation: (check, what happened).
    pub violation: Option<(&'static str, String)>,
}

/// The faults of a run in progress, and its oracle.
struct Chaos {
    plan: FaultPlan,
    oracle: Oracle,
    /// The versions of every page, for the durability oracle.
    data: DataModel,
    /// When the power goes (the run ends there; at its end if it ends first).
    power_cut_at: Option<Instant>,
    /// When the process crashes (the engine restarts at once).
    crash_at: Option<Instant>,
    /// Requests to fail when they complete: id -> (error, a write, file).
    failing: HashMap<u64, (IoErrorKind, bool, FileId)>,
    /// Requests held back by a latency spike: id -> extra ns.
    delays: HashMap<u64, u64>,
    /// Completions held back, by (time due, id).
    held: BTreeMap<(Instant, u64), ()>,
    next_knob_at: Option<Instant>,
}

struct Job {
    /// Stop rules, the operation in progress and the figures.
    run: JobRun,
    task: TaskId,
    handles: Vec<HandleId>,
    /// The engine file of each handle (an unlink closes the handle first).
    files: Vec<FileId>,
    workload: Box<dyn Workload>,
    /// How the job's writes go through the cache.
    write_flags: WriteFlags,
    /// The job writes around the cache (O_DIRECT).
    direct: bool,
    /// The job's one pending event: (time, order scheduled).
    next: Option<(Instant, u64)>,
}

struct Sim {
    engine: Engine,
    devices: Vec<Box<dyn DeviceModel>>,
    models: Vec<String>,
    /// Start of each engine file's extent on its device.
    file_base: Vec<u64>,
    /// Each engine file's device and the bytes of it still allocated (a
    /// release frees them in steps).
    file_dev: Vec<usize>,
    file_bytes: Vec<u64>,
    /// Per device: the release step in progress, (done at, id).
    releases: Vec<Option<(Instant, u64)>>,
    /// How many of `releases` are set (most runs release nothing).
    releases_pending: usize,
    jobs: Vec<Job>,
    /// The job and job-file index of each engine file.
    file_owner: Vec<(usize, usize)>,
    chaos: Option<Chaos>,
    /// What `SimOptions::trace` asked to record.
    trace: Option<crate::trace::SimTrace>,
    /// The page map the real runtime's fast paths read, kept by the same
    /// keeper (`wb_engine::page_map`) and checked with the invariants.
    page_map: Option<PageMap>,
    /// Reused for the ids a device completes at once (`complete_due`).
    done_ids: Vec<u64>,
    /// The cache and devices over time, for the report's plots.
    timeline: crate::timeline::EngineTimeline,
    /// The scenario, to restart the engine after a crash.
    scenario: Scenario,
    /// Engines started so far, less one (a crash starts another).
    generation: u64,

    /// How many more events than one the loop's current iteration may
    /// stand for (reads served at once, hits.rs); None: each read is an
    /// event of its own.
    hit_events_left: Option<u64>,
    /// The events beyond one the current iteration stood for.
    hit_events: u64,

    seq: u64,
    now: Instant,
    foreground_left: usize,
}

/// Runs a scenario to completion (or its duration) and reports.
pub fn run(scenario: &Scenario, options: SimOptions<'_>) -> Result<RunReport, SimError> {
    run_with_faults(scenario, options).map(|(report, _)| report)
}

/// As [`run`], with what the faults and the oracle came to (empty when
/// `options.faults` is None).
pub fn run_with_faults(
    scenario: &Scenario,
    options: SimOptions<'_>,
) -> Result<(RunReport, FaultOutcome), SimError> {
    let wall = std::time::Instant::now();
    let mut sim = Sim::build(scenario)?;
    // Kept only where it is checked: per page of every read, write and
    // eviction it costs a shard's lock and a hash (layton-2026-noisy:
    // +66% instructions).
    if options.check_invariants || options.faults.is_some() {
        sim.page_map = Some(PageMap::new(sim.engine.frame_pages()));
    }
    let end = Instant(scenario.duration_ns);
    if let Some(profile) = options.faults {
        sim.add_chaos(profile, Rng::new(scenario.seed).fork(FAULT_STREAM), end);
    }
    let mut options = options;
    if let Some(trace) = options.trace.as_deref_mut() {
        let jobs: Vec<String> = scenario.jobs.iter().map(|j| j.name.clone()).collect();
        let devices: Vec<String> = scenario.devices.iter().map(|d| d.name.clone()).collect();
        let recorder = std::mem::replace(trace, wb_trace::Trace::new(1));
        sim.trace = Some(crate::trace::SimTrace::new(recorder, &jobs, &devices));
    }
    sim.event_loop(end, &mut options);
    if let (Some(out), Some(recorded)) = (options.trace.as_deref_mut(), sim.trace.take()) {
        *out = recorded.trace;
    }
    let report = sim.report(scenario, wall.elapsed().as_secs_f64());
    let outcome = sim
        .chaos
        .take()
        .map_or_else(FaultOutcome::default, |c| FaultOutcome {
            injected: c.plan.injected,
            checks: c.oracle.checks,
            violation: c.oracle.violation,
        });
    Ok((report, outcome))
}

/// Request ids given to the devices carry the engine's generation from
/// this bit up.
const GENERATION_SHIFT: u32 = 48;

/// Under faults, the engine's invariants are checked every this many
/// events (`SimOptions::check_invariants` checks every one).
const CHAOS_CHECK_EVERY: u64 = 64;

/// The random stream of the faults (devices and jobs use others).
const FAULT_STREAM: u64 = 0xfa17;

fn op_cpu_ns(op: &Op) -> u64 {
    match *op {
        Op::Write { len, .. } | Op::Read { len, .. } => {
            OP_OVERHEAD_NS + len.div_ceil(1024) * COPY_NS_PER_KIB
        }
        Op::Fsync { .. } | Op::Sync => OP_OVERHEAD_NS,
        Op::Unlink { cost_ns, .. } => cost_ns,
    }
}

impl Sim {
    fn build(scenario: &Scenario) -> Result<Sim, SimError> {
        let now = Instant::ZERO;
        let rng = Rng::new(scenario.seed);
        let mut engine = Engine::new(scenario.cache.clone(), now);
        let devices = build_devices(scenario, &mut engine, &rng)?;
        let models = scenario.devices.iter().map(|d| d.model.clone()).collect();
        let releases = vec![None; devices.len()];
        let mut sim = Sim {
            engine,
            devices,
            models,
            file_base: Vec::new(),
            file_dev: Vec::new(),
            file_bytes: Vec::new(),
            releases,
            releases_pending: 0,
            jobs: Vec::new(),
            file_owner: Vec::new(),
            chaos: None,
            trace: None,
            page_map: None,
            done_ids: Vec::new(),
            timeline: Default::default(),
            scenario: scenario.clone(),
            generation: 0,
            hit_events_left: None,
            hit_events: 0,
            seq: 0,
            now,
            foreground_left: job::foreground_jobs(scenario),
        };
        let mut layouts = vec![Layout::default(); sim.devices.len()];
        for j in 0..scenario.jobs.len() {
            sim.add_job(scenario, j, &mut layouts, &rng)?;
        }
        for j in 0..sim.jobs.len() {
            sim.schedule(j, sim.jobs[j].run.start_at());
        }
        Ok(sim)
    }

    /// Adds job `j` of the scenario: its writeback domain, its files and
    /// its engine task (`rng` gives its workload's stream).
    fn add_job(
        &mut self,
        scenario: &Scenario,
        j: usize,
        layouts: &mut [Layout],
        rng: &Rng,
    ) -> Result<(), SimError> {
        let spec = &scenario.jobs[j];
        let domain = self
            .engine
            .domain(&spec.domain)
            .map_err(|e| SimError::Domain {
                job: spec.name.clone(),
                message: e.to_string(),
            })?;
        let workload = crate::workload::for_job(&spec.kind, rng.fork(1000 + j as u64));
        let (files, handles) =
            self.add_job_files(scenario, j, domain, &*workload, &mut layouts[spec.device])?;
        let task = self.engine.add_task();
        self.jobs.push(Job {
            run: JobRun::for_job(scenario, j),
            task,
            handles,
            files,
            workload,
            write_flags: crate::job::write_flags(spec.mode),
            direct: spec.mode == wb_scenario::WriteMode::Direct,
            next: None,
        });
        Ok(())
    }

    /// Adds job `j`'s files to the engine, each placed on the job's device
    /// (`layout`) and opened; the files and their handles.
    fn add_job_files(
        &mut self,
        scenario: &Scenario,
        j: usize,
        domain: DomainId,
        workload: &dyn Workload,
        layout: &mut Layout,
    ) -> Result<(Vec<FileId>, Vec<HandleId>), SimError> {
        let spec = &scenario.jobs[j];
        let mut handles = Vec::new();
        let mut files = Vec::new();
        for (size, extent) in workload.files() {
            let capacity = self.devices[spec.device].capacity();
            let base = layout
                .allocate(extent, capacity)
                .ok_or_else(|| SimError::DeviceFull {
                    device: scenario.devices[spec.device].name.clone(),
                })?;
            // The scenario's device and the domain just made exist.
            let file = self
                .engine
                .add_file(self.now, DeviceId(spec.device as u32), domain, size)
                .expect("the job's device and domain exist");
            assert_eq!(file.index(), self.file_base.len());
            self.file_base.push(base);
            self.file_dev.push(spec.device);
            self.file_bytes.push(size);
            self.file_owner.push((j, files.len()));
            files.push(file);
            handles.push(self.engine.open(file).expect("a file just added opens"));
        }
        Ok((files, handles))
    }

    fn schedule(&mut self, job: usize, at: Instant) {
        let j = &mut self.jobs[job];
        self.seq += 1;
        // A new event replaces the job's pending one (a wake-up before a
        // sleep's end).
        j.next = Some((at.max(self.now), self.seq));
    }

    fn event_loop(&mut self, end: Instant, options: &mut SimOptions<'_>) {
        let mut iterations: u64 = 0;
        loop {
            self.drain_actions(self.now);
            if self.foreground_left == 0 {
                break;
            }
            let jobs_next = self.next_job_event().map(|(t, ..)| t);
            let Some(next) = self.next_event(jobs_next) else {
                break;
            };
            if next.at > end {
                self.now = end;
                break;
            }
            if self.power_cut_due(next.at) {
                break;
            }
            if self.crash_due(next.at) {
                self.crash();
                continue;
            }
            self.now = self.now.max(next.at);
            if let Some(trace) = self.trace.as_mut() {
                trace.sample(self.now.as_ns(), &self.engine);
            }
            if self.timeline.due(self.now.as_ns()) {
                let engine = &self.engine;
                (self.timeline).record(self.now.as_ns(), |g| engine.gauges_into(g));
            }
            self.run_due(self.now, &next);
            self.hit_events_left =
                if options.one_event_per_read || options.check_invariants || self.trace.is_some() {
                    None
                } else if self.chaos.is_some() {
                    // Up to the next event whose state is checked.
                    Some(match iterations % CHAOS_CHECK_EVERY {
                        0 => 0,
                        r => CHAOS_CHECK_EVERY - r,
                    })
                } else {
                    Some(u64::MAX)
                };
            self.hit_events = 0;
            self.run_jobs_due();
            self.maybe_change_knob();
            // The last event this iteration stood for.
            let last = iterations + self.hit_events;
            // Under faults the invariants are checked every
            // CHAOS_CHECK_EVERY events (and at the end): a full check is
            // linear in the cached pages. So is the page map's, which is
            // checked at that cadence also when the engine's invariants
            // are checked every event (a divergence stays until the map
            // changes the page: the next check finds it).
            let sampled = last.is_multiple_of(CHAOS_CHECK_EVERY);
            let due = options.check_invariants || (self.chaos.is_some() && sampled);
            if due {
                // The page map follows the actions carried out: the
                // completions and timers of this instant may have left
                // some (the loop's next turn would carry them out first,
                // at this same instant, before anything else).
                self.drain_actions(self.now);
                if !self.check_invariants(sampled) {
                    break;
                }
            }
            let before = iterations;
            iterations = last + 1;
            if iterations / 8192 != before / 8192 {
                if let Some(progress) = options.progress.as_mut() {
                    progress(self.now.as_ns() as f64 / end.as_ns().max(1) as f64);
                }
            }
        }
        self.drain_actions(self.now);
        if self.chaos.is_some() {
            self.check_invariants(true);
            self.power_cut();
        } else if options.check_invariants {
            self.check_invariants(true);
        }
    }

    /// The earliest pending job event as (time, order scheduled, job).
    /// Jobs are few: a scan costs less than keeping an ordered set.
    fn next_job_event(&self) -> Option<(Instant, u64, usize)> {
        let mut first: Option<(Instant, u64, usize)> = None;
        for (i, j) in self.jobs.iter().enumerate() {
            if let Some((t, seq)) = j.next {
                if first.is_none_or(|(ft, fseq, _)| (t, seq) < (ft, fseq)) {
                    first = Some((t, seq, i));
                }
            }
        }
        first
    }

    /// The jobs whose next event is due (after completions and timers,
    /// drive.rs step 4).
    fn run_jobs_due(&mut self) {
        let now = self.now;
        while let Some((t, _, job)) = self.next_job_event() {
            if t > now {
                break;
            }
            self.jobs[job].next = None;
            self.run_job(job);
            self.drain_actions(now);
        }
    }
}

impl VirtualRuntime for Sim {
    fn engine(&mut self) -> &mut Engine {
        &mut self.engine
    }

    fn engine_ref(&self) -> &Engine {
        &self.engine
    }

    fn next_completion(&self) -> Option<Instant> {
        let held = self
            .chaos
            .as_ref()
            .and_then(|c| c.held.keys().next().map(|&(at, _)| at));
        let io = self
            .devices
            .iter()
            .filter_map(|d| d.next_completion())
            .chain(held)
            .min();
        if self.releases_pending == 0 {
            return io;
        }
        let releases = self.releases.iter().flatten().map(|&(at, _)| at);
        releases.chain(io).min()
    }

    fn complete_due(&mut self, now: Instant) {
        for d in 0..self.devices.len() {
            if self.devices[d].next_completion().is_some_and(|t| t <= now) {
                let mut done = std::mem::take(&mut self.done_ids);
                self.devices[d].complete_into(now, &mut done);
                for &id in &done {
                    self.device_done(now, id);
                }
                done.clear();
                self.done_ids = done;
            }
            if let Some((_, id)) = self.releases[d].filter(|&(at, _)| at <= now) {
                self.releases[d] = None;
                self.releases_pending -= 1;
                self.engine.release_done(now, id, Ok(()));
            }
        }
        self.complete_held(now);
    }

    fn carry_out(&mut self, now: Instant, action: Action) {
        if let Some(map) = self.page_map.as_ref() {
            map.on_action(&self.engine, &action);
        }
        match action {
            Action::Submit(req) => {
                let base = self.file_base[req.file.index()];
                // Tagged with the engine's generation: after a restart the
                // old engine's requests still complete, to the device only.
                let cid = self.generation << GENERATION_SHIFT | req.id.0;
                let dev_req = DevRequest {
                    id: cid,
                    write: req.dir == IoDir::Write,
                    offset: base + req.first_page * PAGE_SIZE,
                    len: req.pages as u64 * PAGE_SIZE,
                };
                if !req.direct {
                    self.plan_request_fault(cid, &req);
                    if let Some(c) = self.chaos.as_mut().filter(|_| req.dir == IoDir::Write) {
                        let (first, pages) = (req.first_page as usize, req.pages as usize);
                        c.data
                            .submitted(cid, req.file.index(), first, pages, req.bytes);
                    }
                }
                if let Some(trace) = self.trace.as_mut() {
                    trace.submitted(now.as_ns(), cid, &req);
                }
                self.devices[req.device.index()].submit(now, dev_req);
            }
            Action::Wake(task) => self.schedule(task.index(), now),
            Action::Release { id, file, step } => self.release(now, id, file, step),
            // The device models report no free space, so the engine never
            // asks: their capacity is not limited by reservations.
            Action::StatFs { .. } => {}
            // The device models have no volatile cache yet: a flush
            // is done at once.
            Action::MakeDurable { id, file, len, .. } => {
                if let Some(data) = self.chaos.as_mut().map(|c| &mut c.data) {
                    data.flushed(file.index(), len);
                }
                self.engine.durable_done(now, id, Ok(()))
            }
            // The simulated jobs do not truncate; a length is set at once.
            Action::SetLength { id, file, len } => {
                if let Some(data) = self.chaos.as_mut().map(|c| &mut c.data) {
                    data.length_set(file.index(), len);
                }
                self.engine.length_set(now, id, Ok(()))
            }
            // The durability oracle follows the versions of the bytes.
            Action::CopyIn {
                task,
                file,
                pos,
                len,
                frame,
            } => {
                if let Some(data) = self.chaos.as_mut().map(|c| &mut c.data) {
                    data.copy_in(task.index(), file.index(), pos, len);
                }
                // No bytes to copy: the pages are mapped at once.
                if let Some(map) = self.page_map.as_ref() {
                    map.copied_in(file, pos, len, frame);
                }
            }
            // The simulator moves no data; the page map's keeper has seen
            // these.
            Action::ZeroFrames { .. }
            | Action::CopyFrames { .. }
            | Action::Unmapped { .. }
            | Action::Evict { .. } => {}
        }
    }
}

impl Sim {
    /// Starts a release step of an unlinked file: the device's filesystem
    /// takes its inactivation cost for the bytes freed (the engine has one
    /// step in flight per device).
    fn release(&mut self, now: Instant, id: u64, file: FileId, step: ReleaseStep) {
        let f = file.index();
        let remaining = self.file_bytes[f];
        let (freed, removes) = match step {
            ReleaseStep::Start => (0, false),
            ReleaseStep::Truncate { len } => (remaining.saturating_sub(len), false),
            ReleaseStep::Remove => (remaining, true),
        };
        self.file_bytes[f] = remaining - freed;
        let d = self.file_dev[f];
        let cost = self.devices[d].inactivation().step_ns(freed, removes);
        assert!(self.releases[d].is_none(), "one release step per device");
        self.releases[d] = Some((now + cost, id));
        self.releases_pending += 1;
    }

    fn finish_job(&mut self, job: usize) {
        if self.jobs[job].run.finish(self.now) {
            self.foreground_left -= 1;
        }
    }

    fn engine_op(&mut self, job: usize, op: Op) -> Result<Step, EngineError> {
        let now = self.now;
        if let Some(chaos) = self.chaos.as_mut() {
            let (files, engine) = (&self.jobs[job].files, &self.engine);
            let size = |f: usize| engine.file_size(FileId(f as u32)).unwrap_or(0);
            let data = &mut chaos.data;
            match op {
                Op::Write { .. } => data.write_begins(job),
                Op::Fsync { file } => data.sync_begins(job, Some(files[file].index()), size),
                Op::Sync => data.sync_begins(job, None, size),
                Op::Read { .. } | Op::Unlink { .. } => {}
            }
        }
        let j = &self.jobs[job];
        let task = j.task;
        match op {
            Op::Write { file, offset, len } if j.direct => {
                self.engine
                    .write_direct(now, task, j.handles[file], offset, len)
            }
            Op::Write { file, offset, len } => {
                self.engine
                    .write_with(now, task, j.handles[file], offset, len, j.write_flags)
            }
            Op::Read { file, offset, len } => {
                self.engine.read(now, task, j.handles[file], offset, len)
            }
            Op::Fsync { file } => self.engine.fsync(now, task, j.handles[file]),
            Op::Sync => self.engine.sync(now, task),
            Op::Unlink { file, .. } => {
                let (handle, file) = (j.handles[file], j.files[file]);
                // The job's handle is its last one.
                let closed = self.engine.close(handle);
                debug_assert!(closed.is_ok(), "{closed:?}");
                self.engine.unlink(now, task, file)
            }
        }
    }

    /// Runs a job until it has to wait.
    fn run_job(&mut self, job: usize) {
        let now = self.now;
        if self.jobs[job].run.is_finished() {
            return;
        }
        self.jobs[job].run.start(now);
        let result = if self.jobs[job].run.current_op().is_some() {
            if let Some(chaos) = self.chaos.as_mut() {
                chaos.oracle.woke(job, now.as_ns());
            }
            if let Some(trace) = self.trace.as_mut() {
                trace.woke(job, now.as_ns());
            }
            self.engine.resume(now, self.jobs[job].task)
        } else {
            if self.jobs[job].run.should_stop(now, self.foreground_left) {
                self.finish_job(job);
                return;
            }
            match self.jobs[job].workload.next(now) {
                Next::Finished => {
                    self.finish_job(job);
                    return;
                }
                Next::Until(t) => {
                    self.schedule(job, t);
                    return;
                }
                Next::Op(op) => {
                    if self.serve_hits(job, op) {
                        return;
                    }
                    self.jobs[job].run.begin_op(op, now);
                    self.engine_op(job, op)
                }
            }
        };
        let ok = match result {
            Ok(Step::Sleep(stall)) => {
                if let Some(chaos) = self.chaos.as_mut() {
                    chaos.oracle.slept(job, now.as_ns(), &stall);
                }
                if let Some(trace) = self.trace.as_mut() {
                    trace.slept(job, now.as_ns(), &stall);
                }
                self.schedule(job, stall.until);
                return;
            }
            Ok(Step::Done) => {
                self.read_done(job);
                true
            }
            Err(_) => false,
        };
        if let Some(chaos) = self.chaos.as_mut() {
            match self.jobs[job].run.current_op() {
                Some(Op::Fsync { file }) => {
                    chaos.oracle.fsync_returned(job, file, ok, now.as_ns());
                    chaos.data.sync_returned(job, ok);
                }
                Some(Op::Sync) => chaos.data.sync_returned(job, ok),
                _ => {}
            }
        }
        self.op_done(job, ok);
    }

    /// Job `job`'s operation is done: a read's pages enter the page map
    /// (page_map, rule 2), as the real runtime's reader maps them.
    fn read_done(&mut self, job: usize) {
        let Some(map) = self.page_map.as_ref() else {
            return;
        };
        let j = &self.jobs[job];
        if let Some(Op::Read { file, offset, len }) = j.run.current_op() {
            let (first, end) = (offset / PAGE_SIZE, (offset + len).div_ceil(PAGE_SIZE));
            map.read_done(&self.engine, j.files[file], first, end);
        }
    }

    /// The operation ends once its CPU cost is paid; its latency includes
    /// that cost.
    fn op_done(&mut self, job: usize, ok: bool) {
        let run = &mut self.jobs[job].run;
        let op = run.current_op().expect("an op was in progress");
        let done = self.now + op_cpu_ns(&op);
        run.end_op(done, ok);
        self.schedule(job, done);
    }

    fn report(&self, scenario: &Scenario, wall_time_s: f64) -> RunReport {
        let end = self.now;
        let jobs = self
            .jobs
            .iter()
            .map(|j| {
                let mut report = j.run.report(end);
                let pages: u64 = j
                    .files
                    .iter()
                    .filter_map(|&f| self.engine.file_cached_pages(f))
                    .map(|(cached, _)| cached)
                    .sum();
                report.cached_end_mib =
                    Some(pages as f64 * wb_engine::PAGE_SIZE as f64 / (1 << 20) as f64);
                report
            })
            .collect();
        let facts: Vec<DeviceFacts> = self
            .devices
            .iter()
            .zip(&self.models)
            .map(|(d, m)| DeviceFacts {
                model: m.clone(),
                utilization: Some(d.busy_ns(end) as f64 / end.as_ns().max(1) as f64),
            })
            .collect();
        let stats = self.engine.stats();
        RunReport {
            scenario: scenario.name.clone(),
            seed: scenario.seed,
            sim_time_s: end.as_secs_f64(),
            wall_time_s,
            jobs,
            engine: EngineReport::new(&stats, &facts),
            io_backend: None,
            timeline: self
                .timeline
                .clone()
                .finish(end.as_ns(), &self.engine.gauges()),
        }
    }
}

impl Sim {
    fn add_chaos(&mut self, profile: FaultProfile, rng: Rng, end: Instant) {
        let files: Vec<usize> = self.jobs.iter().map(|j| j.files.len()).collect();
        let mut plan = FaultPlan::new(profile, rng);
        let next_knob_at = plan.next_knob_in_ns().map(|ns| self.now + ns);
        let power_cut_at = plan.power_cut_in_ns(end.as_ns()).map(Instant);
        let crash_at = plan.crash_in_ns(end.as_ns()).map(Instant);
        let data = DataModel::new(&self.file_dev, &self.file_bytes, self.jobs.len());
        self.chaos = Some(Chaos {
            plan,
            data,
            power_cut_at,
            crash_at,
            oracle: Oracle::new(&files),
            failing: HashMap::new(),
            delays: HashMap::new(),
            held: BTreeMap::new(),
            next_knob_at,
        });
    }

    /// Draws the fate of a request the engine submits.
    fn plan_request_fault(&mut self, cid: u64, req: &wb_engine::IoRequest) {
        let Some(chaos) = self.chaos.as_mut() else {
            return;
        };
        let write = req.dir == IoDir::Write;
        let fault = chaos.plan.request(write);
        if let Some(error) = fault.error {
            chaos.failing.insert(cid, (error, write, req.file));
        }
        if fault.delay_ns > 0 {
            chaos.delays.insert(cid, fault.delay_ns);
        }
    }

    /// A device finished request `id`: held back by a spike, or reported.
    fn device_done(&mut self, now: Instant, id: u64) {
        if let Some(chaos) = self.chaos.as_mut() {
            if let Some(delay) = chaos.delays.remove(&id) {
                chaos.held.insert((now + delay, id), ());
                return;
            }
        }
        self.report_io(now, id);
    }

    /// Completions held back by spikes that are due.
    fn complete_held(&mut self, now: Instant) {
        loop {
            let Some(chaos) = self.chaos.as_mut() else {
                return;
            };
            let Some(&(at, id)) = chaos.held.keys().next() else {
                return;
            };
            if at > now {
                return;
            }
            chaos.held.remove(&(at, id));
            self.report_io(now, id);
        }
    }

    /// Tells the engine how request `cid` (generation and id) ended; a
    /// failed write-back is owed to every handle of its file (the
    /// oracle's books). A request of an engine that crashed reaches the
    /// device only.
    fn report_io(&mut self, now: Instant, cid: u64) {
        if let Some(trace) = self.trace.as_mut() {
            trace.completed(now.as_ns(), cid);
        }
        let failed = self.chaos.as_mut().and_then(|c| {
            let failed = c.failing.remove(&cid);
            c.data.completed(cid, failed.is_none());
            failed
        });
        if cid >> GENERATION_SHIFT != self.generation {
            return;
        }
        let id = IoId(cid & ((1 << GENERATION_SHIFT) - 1));
        let Some((error, write, file)) = failed else {
            self.engine.io_complete(now, id, Ok(()));
            return;
        };
        if write {
            let (job, idx) = self.file_owner[file.index()];
            if let Some(chaos) = self.chaos.as_mut() {
                chaos.oracle.unreported[job][idx] = true;
            }
        }
        self.engine.io_complete(now, id, Err(error));
    }

    /// A knob change, when one is due.
    fn maybe_change_knob(&mut self) {
        let now = self.now;
        let devices = self.devices.len();
        let Some(chaos) = self.chaos.as_mut() else {
            return;
        };
        if chaos.next_knob_at.is_none_or(|at| at > now) {
            return;
        }
        let memory_bytes = self.engine.frame_pages() * wb_engine::PAGE_SIZE;
        let (device, knob, value) = chaos.plan.knob_change(devices, memory_bytes);
        chaos.next_knob_at = chaos.plan.next_knob_in_ns().map(|ns| now + ns);
        // Values the engine refuses change nothing; all here are valid.
        let _ = match device {
            Some(d) => self
                .engine
                .set_device_knob(DeviceId(d as u32), knob, &value),
            None => self.engine.set_knob(knob, &value),
        };
        self.drain_actions(now);
    }

    /// Checks the engine's invariants, then (if `with_map`) the page map
    /// against the engine; false (a violation noted) if one does not hold.
    fn check_invariants(&mut self, with_map: bool) -> bool {
        let engine = &self.engine;
        let held = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            engine.check_invariants();
        }));
        if !self.checked("invariants", held) {
            return false;
        }
        let (engine, Some(map), true) = (&self.engine, self.page_map.as_ref(), with_map) else {
            return true;
        };
        let held = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            map.check(engine);
        }));
        self.checked("page_map", held)
    }

    /// Counts a check that ran (`held`: its outcome) and notes its
    /// violation; false if it did not hold. Without faults a violation
    /// panics on.
    fn checked(&mut self, check: &'static str, held: std::thread::Result<()>) -> bool {
        let Some(chaos) = self.chaos.as_mut() else {
            if let Err(panic) = held {
                std::panic::resume_unwind(panic);
            }
            return true;
        };
        chaos.oracle.count(check);
        match held {
            Ok(()) => true,
            Err(panic) => {
                let what = panic_message(&*panic);
                chaos
                    .oracle
                    .violate(check, format!("at {} ns: {what}", self.now.as_ns()));
                false
            }
        }
    }
}

/// The scenario's device models, each added to the engine as it is
/// built (`rng` gives each its stream).
fn build_devices(
    scenario: &Scenario,
    engine: &mut Engine,
    rng: &Rng,
) -> Result<Vec<Box<dyn DeviceModel>>, SimError> {
    let mut devices = Vec::new();
    for (i, spec) in scenario.devices.iter().enumerate() {
        let model = device::build(
            &spec.model,
            &spec.params,
            rng.fork(1 + i as u64),
            spec.config.queue_depth,
        )
        .map_err(|message| SimError::Device {
            device: spec.name.clone(),
            message,
        })?;
        add_engine_device(engine, spec, &*model);
        devices.push(model);
    }
    Ok(devices)
}

/// Adds the scenario's device `spec`, modelled by `model`, to `engine`.
fn add_engine_device(engine: &mut Engine, spec: &wb_scenario::DeviceSpec, model: &dyn DeviceModel) {
    let dev = engine.add_device(
        &spec.name,
        spec.config.clone(),
        model.idle_read_latency_ns(),
    );
    engine
        .set_stable_writes_required(dev, model.stable_writes_required())
        .expect("the device was just added");
}

/// The message of a caught panic.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".into()
    }
}

impl Sim {
    /// Whether the power cut comes before the next event at `next`.
    fn power_cut_due(&mut self, next: Instant) -> bool {
        let at = self.chaos.as_ref().and_then(|c| c.power_cut_at);
        self.due_before(at, next)
    }

    /// Whether a fault at `at` comes before the next event at `next`
    /// (then the clock moves to it).
    fn due_before(&mut self, at: Option<Instant>, next: Instant) -> bool {
        match at {
            Some(at) if at <= next => {
                self.now = self.now.max(at);
                true
            }
            _ => false,
        }
    }

    /// The power goes (once): what syncs acknowledged must be on the media.
    fn power_cut(&mut self) {
        let now = self.now.as_ns();
        let Some(chaos) = self.chaos.as_mut() else {
            return;
        };
        if chaos.power_cut_at.take().is_none() {
            return;
        }
        chaos.plan.count_power_cut();
        let (lost, checked) = chaos.data.power_cut(chaos.plan.rng());
        *chaos.oracle.checks.entry("durability").or_insert(0) += checked;
        if let Some((file, page, acked, found)) = lost {
            let (job, idx) = self.file_owner[file];
            chaos.oracle.violate(
                "durability",
                format!(
                    "power cut at {now} ns: job {job}'s file {idx}, page {page}: a sync acknowledged version {acked}, the media has {found}"
                ),
            );
        }
    }
}

impl Sim {
    /// Whether the process crash comes before the next event at `next`.
    fn crash_due(&mut self, next: Instant) -> bool {
        let at = self.chaos.as_ref().and_then(|c| c.crash_at);
        self.due_before(at, next)
    }

    /// The process crashes (once): what syncs acknowledged must still be
    /// on the device, the files as long as syncs found them; then the
    /// engine restarts over what survived.
    fn crash(&mut self) {
        let now = self.now.as_ns();
        let Some(chaos) = self.chaos.as_mut() else {
            return;
        };
        chaos.crash_at = None;
        chaos.plan.count_crash();
        let failing = &chaos.failing;
        let (lost, checked) = chaos.data.crash(|id| failing.contains_key(&id));
        *chaos.oracle.checks.entry("restart").or_insert(0) += checked;
        let what = lost.map(|lost| match lost {
            crate::oracle::Lost::Page(file, page, acked, found) => {
                let (job, idx) = self.file_owner[file];
                format!("crash at {now} ns: job {job}'s file {idx}, page {page}: a sync acknowledged version {acked}, the device has {found}")
            }
            crate::oracle::Lost::Size(file, synced, kept) => {
                let (job, idx) = self.file_owner[file];
                format!("crash at {now} ns: job {job}'s file {idx} was {synced} bytes at a sync, {kept} survived")
            }
            crate::oracle::Lost::Longer(file, len, longest) => {
                let (job, idx) = self.file_owner[file];
                format!("crash at {now} ns: job {job}'s file {idx} is {len} bytes on the device, longer than it ever was ({longest})")
            }
            crate::oracle::Lost::Hole(file, page) => {
                let (job, idx) = self.file_owner[file];
                format!("crash at {now} ns: job {job}'s file {idx}, page {page}: below the backing file's length, never written back and never a hole of the file")
            }
        });
        // The errors of the old process's handles died with it, and its
        // sleeps.
        for flags in &mut chaos.oracle.unreported {
            flags.fill(false);
        }
        chaos.oracle.forget_sleeps();
        if let Some(what) = what {
            chaos.oracle.violate("restart", what);
        }
        self.restart_engine();
    }

    /// A new engine over the surviving state: the same devices, domains,
    /// files (at the lengths their last flush persisted), handles and
    /// tasks, in the same order (so the same ids); the jobs' operations in
    /// progress failed, the jobs going on with their next ones.
    fn restart_engine(&mut self) {
        let now = self.now;
        let mut engine = Engine::new(self.scenario.cache.clone(), now);
        for (i, spec) in self.scenario.devices.iter().enumerate() {
            add_engine_device(&mut engine, spec, &*self.devices[i]);
        }
        for (j, spec) in self.scenario.jobs.iter().enumerate() {
            let domain = engine
                .domain(&spec.domain)
                .expect("the domain was made at the start");
            let mut handles = Vec::new();
            for &old in &self.jobs[j].files {
                let size = self
                    .chaos
                    .as_ref()
                    .map_or(0, |c| c.data.surviving_size(old.index()));
                let file = engine
                    .add_file(now, DeviceId(spec.device as u32), domain, size)
                    .expect("the job's device and domain exist");
                assert_eq!(file, old, "files are added again in their order");
                handles.push(engine.open(file).expect("a file just added opens"));
            }
            let task = engine.add_task();
            assert_eq!(task.index(), j, "a task a job, in order");
            self.jobs[j].handles = handles;
        }
        self.engine = engine;
        self.generation += 1;
        // The new process starts with an empty map over its cache.
        if self.page_map.is_some() {
            self.page_map = Some(PageMap::new(self.engine.frame_pages()));
        }
        // As the runtime, the new engine flushes each device it meets.
        if let Some(chaos) = self.chaos.as_mut() {
            chaos.data.flush_all();
        }
        self.releases.fill(None);
        self.releases_pending = 0;
        for j in 0..self.jobs.len() {
            if self.jobs[j].run.current_op().is_some() {
                self.jobs[j].run.end_op(now, false);
            }
            if !self.jobs[j].run.is_finished() {
                self.schedule(j, now);
            }
        }
    }
}
