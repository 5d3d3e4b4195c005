//! The simulator's event loop: the engine, device models and jobs on one
//! virtual clock. Events are ordered by (time, sequence number), so one
//! seed gives one run. When jobs stop and what they record is
//! [`crate::job`], shared with `wb run`.

use crate::device::{self, DevRequest, DeviceModel};
use crate::job::{self, JobRun};
use crate::layout::Layout;
use crate::report::{DeviceFacts, EngineReport, RunReport};
use crate::rng::Rng;
use crate::workload::{Next, Op, Workload};
use std::fmt;
use wb_engine::{
    Action, DeviceId, Engine, EngineError, FileId, HandleId, Instant, IoDir, IoId, ReleaseStep,
    Step, TaskId, VirtualRuntime, WriteFlags, PAGE_SIZE,
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

/// Options that do not change results.
#[derive(Default)]
pub struct SimOptions<'a> {
    /// Check the engine's invariants after every event (slow; for tests).
    pub check_invariants: bool,
    /// Called now and then with the fraction of the run done (0..=1, by time).
    pub progress: Option<&'a mut dyn FnMut(f64)>,
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

    seq: u64,
    now: Instant,
    foreground_left: usize,
}

/// Runs a scenario to completion (or its duration) and reports.
pub fn run(scenario: &Scenario, options: SimOptions<'_>) -> Result<RunReport, SimError> {
    let wall = std::time::Instant::now();
    let mut sim = Sim::build(scenario)?;
    let end = Instant(scenario.duration_ns);
    sim.event_loop(end, options);
    Ok(sim.report(scenario, wall.elapsed().as_secs_f64()))
}

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
        let mut devices = Vec::new();
        let mut models = Vec::new();
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
            let dev = engine.add_device(
                &spec.name,
                spec.config.clone(),
                model.idle_read_latency_ns(),
            );
            engine
                .set_stable_writes_required(dev, model.stable_writes_required())
                .expect("the device was just added");
            devices.push(model);
            models.push(spec.model.clone());
        }
        let mut layouts = vec![Layout::default(); devices.len()];
        let mut file_base = Vec::new();
        let (mut file_dev, mut file_bytes) = (Vec::new(), Vec::new());
        let mut jobs = Vec::new();
        for (j, spec) in scenario.jobs.iter().enumerate() {
            let domain = engine.domain(&spec.domain).map_err(|e| SimError::Domain {
                job: spec.name.clone(),
                message: e.to_string(),
            })?;
            let workload = crate::workload::for_job(&spec.kind, rng.fork(1000 + j as u64));
            let mut handles = Vec::new();
            let mut files = Vec::new();
            for (size, extent) in workload.files() {
                let dev = &devices[spec.device];
                let base = layouts[spec.device]
                    .allocate(extent, dev.capacity())
                    .ok_or_else(|| SimError::DeviceFull {
                        device: scenario.devices[spec.device].name.clone(),
                    })?;
                // The scenario's device and the domain just made exist.
                let file = engine
                    .add_file(now, DeviceId(spec.device as u32), domain, size)
                    .expect("the job's device and domain exist");
                assert_eq!(file.index(), file_base.len());
                file_base.push(base);
                file_dev.push(spec.device);
                file_bytes.push(size);
                files.push(file);
                handles.push(engine.open(file).expect("a file just added opens"));
            }
            let task = engine.add_task();
            jobs.push(Job {
                run: JobRun::for_job(scenario, j),
                task,
                handles,
                files,
                workload,
                write_flags: crate::job::write_flags(spec.mode),
                direct: spec.mode == wb_scenario::WriteMode::Direct,
                next: None,
            });
        }
        let foreground_left = job::foreground_jobs(scenario);
        let releases = vec![None; devices.len()];
        let mut sim = Sim {
            engine,
            devices,
            models,
            file_base,
            file_dev,
            file_bytes,
            releases,
            releases_pending: 0,
            jobs,
            seq: 0,
            now,
            foreground_left,
        };
        for j in 0..sim.jobs.len() {
            sim.schedule(j, sim.jobs[j].run.start_at());
        }
        Ok(sim)
    }

    fn schedule(&mut self, job: usize, at: Instant) {
        let j = &mut self.jobs[job];
        self.seq += 1;
        // A new event replaces the job's pending one (a wake-up before a
        // sleep's end).
        j.next = Some((at.max(self.now), self.seq));
    }

    fn event_loop(&mut self, end: Instant, mut options: SimOptions<'_>) {
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
            self.now = self.now.max(next.at);
            self.run_due(self.now, &next);
            self.run_jobs_due();
            if options.check_invariants {
                self.engine.check_invariants();
            }
            iterations += 1;
            if iterations.is_multiple_of(8192) {
                if let Some(progress) = options.progress.as_mut() {
                    progress(self.now.as_ns() as f64 / end.as_ns().max(1) as f64);
                }
            }
        }
        self.drain_actions(self.now);
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
        let io = self
            .devices
            .iter()
            .filter_map(|d| d.next_completion())
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
                for id in self.devices[d].complete(now) {
                    self.engine.io_complete(now, IoId(id), Ok(()));
                }
            }
            if let Some((_, id)) = self.releases[d].filter(|&(at, _)| at <= now) {
                self.releases[d] = None;
                self.releases_pending -= 1;
                self.engine.release_done(now, id, Ok(()));
            }
        }
    }

    fn carry_out(&mut self, now: Instant, action: Action) {
        match action {
            Action::Submit(req) => {
                let base = self.file_base[req.file.index()];
                let dev_req = DevRequest {
                    id: req.id.0,
                    write: req.dir == IoDir::Write,
                    offset: base + req.first_page * PAGE_SIZE,
                    len: req.pages as u64 * PAGE_SIZE,
                };
                self.devices[req.device.index()].submit(now, dev_req);
            }
            Action::Wake(task) => self.schedule(task.index(), now),
            Action::Release { id, file, step } => self.release(now, id, file, step),
            // The device models have no volatile cache yet: a flush
            // is done at once.
            Action::MakeDurable { id, .. } => self.engine.durable_done(id, Ok(())),
            // The simulator moves no data and keeps no page index.
            Action::ZeroFrames { .. }
            | Action::CopyFrames { .. }
            | Action::CopyIn { .. }
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
                    self.jobs[job].run.begin_op(op, now);
                    self.engine_op(job, op)
                }
            }
        };
        match result {
            Ok(Step::Sleep(stall)) => self.schedule(job, stall.until),
            Ok(Step::Done) => self.op_done(job, true),
            Err(_) => self.op_done(job, false),
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
        let jobs = self.jobs.iter().map(|j| j.run.report(end)).collect();
        let facts: Vec<DeviceFacts> = self
            .devices
            .iter()
            .zip(&self.models)
            .map(|(d, m)| DeviceFacts {
                model: m.clone(),
                utilization: Some(d.busy_ns(end) as f64 / end.as_ns().max(1) as f64),
            })
            .collect();
        RunReport {
            scenario: scenario.name.clone(),
            seed: scenario.seed,
            sim_time_s: end.as_secs_f64(),
            wall_time_s,
            jobs,
            engine: EngineReport::new(&self.engine.stats(), &facts),
            io_backend: None,
        }
    }
}
