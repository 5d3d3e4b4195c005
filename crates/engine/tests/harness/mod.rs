//! A tiny runtime for driving the engine in tests: a device that completes
//! every request after a fixed latency per page (optionally failing
//! writes), virtual time, and a loop that runs one task's operation to its
//! end, jumping time to the next event. Nothing sleeps. It keeps a page
//! map as a runtime does (`wb_engine::page_map`, through its keeper).

#![allow(dead_code)]

use std::collections::BTreeMap;
use wb_engine::{
    Action, Config, DeviceConfig, DeviceId, Engine, EngineError, FileId, Instant, IoDir,
    IoErrorKind, IoId, IoRequest, PageIndex, PageMap, ReleaseStep, Stall, Step, TaskId,
    VirtualRuntime, PAGE_SIZE,
};

/// A harness (a page takes 10 µs) over an engine with a 64 MiB cache and
/// the cache `knobs`, one device "d" (idle reads of 100 µs) with the
/// `device_knobs`, and one task. A knob the engine refuses is the test's
/// own mistake: it panics with the engine's message.
pub fn setup(knobs: &[(&str, &str)], device_knobs: &[(&str, &str)]) -> (Harness, DeviceId, TaskId) {
    let mut config = Config::default();
    config
        .set("memory", "64MiB")
        .expect("64MiB is a valid budget");
    for (knob, value) in knobs {
        config.set(knob, value).unwrap_or_else(|e| panic!("{e}"));
    }
    let mut e = Engine::new(config, Instant(0));
    let mut dc = DeviceConfig::default();
    for (knob, value) in device_knobs {
        dc.set(knob, value).unwrap_or_else(|e| panic!("{e}"));
    }
    let dev = e.add_device("d", dc, 100_000);
    let task = e.add_task();
    (Harness::new(e, 10_000), dev, task)
}

pub struct Harness {
    pub engine: Engine,
    pub now: Instant,
    /// Completion time of each request in flight.
    pub inflight: BTreeMap<(Instant, IoId), IoDir>,
    pub ns_per_page: u64,
    /// When set, writes complete with this error.
    pub fail_writes: Option<IoErrorKind>,
    /// Every stall handed to a task, in order.
    pub stalls: Vec<Stall>,
    pub written_pages: u64,
    /// When each of the device's slots is next free: it serves one
    /// request per slot at a time (one slot unless a test adds more),
    /// each in `ns_per_page` per page.
    pub device_slots: Vec<Instant>,
    /// Pages that left the cache, as the engine reported them, in order.
    pub unmapped: Vec<(FileId, PageIndex, PageIndex)>,
    /// Every action in the order the engine emitted it.
    pub actions: Vec<Action>,
    /// Every request submitted: when it was handed over, when it
    /// completes, and the request.
    pub submitted: Vec<(Instant, Instant, IoRequest)>,
    /// Flushes (MakeDurable) carried out.
    pub flushes: u64,
    /// When set, flushes fail with this error.
    pub fail_flushes: Option<IoErrorKind>,
    /// When set, flushes are not carried out but their ids kept here.
    pub held_flushes: Option<Vec<u64>>,
    /// Release steps asked for and not reported yet (`finish_releases`).
    pub releases: Vec<(u64, FileId, ReleaseStep)>,
    /// The free space reported when the engine asks (`Action::StatFs`);
    /// None: never reported.
    pub free_space: Option<u64>,
    /// How often the engine asked for it.
    pub statfs_asked: u64,
    /// The page map, kept from the actions as a runtime keeps it: a
    /// `CopyIn` is copied (maps its pages) when carried out; reads map
    /// their pages through `read`.
    pub page_map: PageMap,
    /// When set, `CopyIn` actions are not carried out but kept here, as
    /// (file, pos, len, frame), as a runtime defers a copy outside its
    /// lock; `copy_held` carries them out.
    pub held_copies: Option<Vec<(FileId, u64, u64, u32)>>,
    /// Tasks woken since the last `drain`.
    woken: Vec<TaskId>,
}

impl Harness {
    pub fn new(engine: Engine, ns_per_page: u64) -> Harness {
        let page_map = PageMap::new(engine.frame_pages());
        Harness {
            engine,
            now: Instant(0),
            inflight: BTreeMap::new(),
            ns_per_page,
            fail_writes: None,
            stalls: Vec::new(),
            written_pages: 0,
            device_slots: vec![Instant(0)],
            unmapped: Vec::new(),
            actions: Vec::new(),
            submitted: Vec::new(),
            flushes: 0,
            fail_flushes: None,
            held_flushes: None,
            releases: Vec::new(),
            free_space: None,
            statfs_asked: 0,
            page_map,
            held_copies: None,
            woken: Vec::new(),
        }
    }

    /// Runs `task`'s read of `len` bytes at `offset` of `file` through
    /// `handle` to its end, then maps the pages it read, as a runtime's
    /// reader does (`PageMap::read_done`).
    pub fn read(
        &mut self,
        task: TaskId,
        file: FileId,
        handle: wb_engine::HandleId,
        offset: u64,
        len: u64,
    ) -> Result<(), EngineError> {
        self.run(task, |e, now| e.read(now, task, handle, offset, len))?;
        let (first, end) = (offset / PAGE_SIZE, (offset + len).div_ceil(PAGE_SIZE));
        self.page_map.read_done(&self.engine, file, first, end);
        Ok(())
    }

    /// Carries out the copy-ins held back (`held_copies`): the deferred
    /// copies of a runtime, done outside its lock; then `write_end`.
    pub fn copy_held(&mut self, task: TaskId) {
        let held = self.held_copies.as_mut().map(std::mem::take);
        for (file, pos, len, frame) in held.unwrap_or_default() {
            self.page_map.copied_in(file, pos, len, frame);
        }
        self.engine
            .write_end(self.now, task)
            .expect("the task is known");
        self.drain();
    }

    /// Reports every release step asked for as done `step_ns` after now
    /// (one at a time, as the engine asks), until none is left; returns
    /// the steps carried out.
    pub fn finish_releases(&mut self, step_ns: u64) -> Vec<(u64, FileId, ReleaseStep)> {
        let mut done = Vec::new();
        self.drain();
        while !self.releases.is_empty() {
            for (id, file, step) in std::mem::take(&mut self.releases) {
                self.now = self.now + step_ns;
                self.engine.release_done(self.now, id, Ok(()));
                done.push((id, file, step));
            }
            self.drain();
        }
        done
    }

    /// Carries out the engine's actions; returns the tasks woken.
    pub fn drain(&mut self) -> Vec<TaskId> {
        self.drain_actions(self.now);
        std::mem::take(&mut self.woken)
    }

    /// Advances time to `until` or the next event before it, processing it.
    fn advance(&mut self, until: Instant) {
        let next = self.next_event(Some(until)).expect("until is an event");
        self.now = self.now.max(next.at);
        self.run_due(self.now, &next);
    }

    /// Runs time forward until `until`, with no task active.
    pub fn idle_until(&mut self, until: Instant) {
        while self.now < until {
            self.drain();
            self.advance(until);
        }
        self.drain();
    }

    /// Runs the operation `start` for `task` to its end.
    pub fn run(
        &mut self,
        task: TaskId,
        start: impl FnOnce(&mut Engine, Instant) -> Result<Step, EngineError>,
    ) -> Result<(), EngineError> {
        let mut step = start(&mut self.engine, self.now)?;
        loop {
            match step {
                Step::Done => {
                    self.drain();
                    return Ok(());
                }
                Step::Sleep(stall) => {
                    self.stalls.push(stall);
                    loop {
                        let woken = self.drain();
                        if (stall.wakeable && woken.contains(&task)) || self.now >= stall.until {
                            break;
                        }
                        self.advance(stall.until);
                    }
                    step = self.engine.resume(self.now, task)?;
                }
            }
        }
    }
}

impl VirtualRuntime for Harness {
    fn engine(&mut self) -> &mut Engine {
        &mut self.engine
    }

    fn engine_ref(&self) -> &Engine {
        &self.engine
    }

    fn next_completion(&self) -> Option<Instant> {
        self.inflight.keys().next().map(|&(t, _)| t)
    }

    fn complete_due(&mut self, now: Instant) {
        while let Some((&(t, id), &dir)) = self.inflight.iter().next() {
            if t > now {
                break;
            }
            self.inflight.remove(&(t, id));
            let result = match (dir, self.fail_writes) {
                (IoDir::Write, Some(e)) => Err(e),
                _ => Ok(()),
            };
            self.engine.io_complete(now, id, result);
        }
    }

    fn carry_out(&mut self, now: Instant, action: Action) {
        self.page_map.on_action(&self.engine, &action);
        self.actions.push(action.clone());
        match action {
            Action::Submit(req) => {
                let slot = (0..self.device_slots.len())
                    .min_by_key(|&s| self.device_slots[s])
                    .expect("the device has a slot");
                let start = self.device_slots[slot].max(now);
                let done = start + self.ns_per_page * req.pages as u64;
                self.device_slots[slot] = done;
                if req.dir == IoDir::Write {
                    self.written_pages += req.pages as u64;
                }
                self.inflight.insert((done, req.id), req.dir);
                self.submitted.push((now, done, req));
            }
            Action::Wake(task) => self.woken.push(task),
            Action::Unmapped { file, first, end } => self.unmapped.push((file, first, end)),
            Action::MakeDurable { id, .. } if self.held_flushes.is_some() => {
                self.held_flushes.as_mut().expect("checked").push(id);
            }
            Action::MakeDurable { id, .. } => {
                self.flushes += 1;
                self.engine
                    .durable_done(self.now, id, self.fail_flushes.map_or(Ok(()), Err));
            }
            Action::Release { id, file, step } => self.releases.push((id, file, step)),
            // A backing file's length is set at once.
            Action::SetLength { id, .. } => self.engine.length_set(now, id, Ok(())),
            Action::StatFs { device } => {
                self.statfs_asked += 1;
                if let Some(bytes) = self.free_space {
                    self.engine
                        .set_free_space(now, device, bytes)
                        .expect("the device exists");
                }
            }
            Action::CopyIn {
                file,
                pos,
                len,
                frame,
                ..
            } => match self.held_copies.as_mut() {
                Some(held) => held.push((file, pos, len, frame)),
                // No bytes: copied at once.
                None => self.page_map.copied_in(file, pos, len, frame),
            },
            Action::ZeroFrames { .. } | Action::CopyFrames { .. } | Action::Evict { .. } => {}
        }
    }
}
