//! A tiny runtime for driving the engine in tests: a device that completes
//! every request after a fixed latency per page (optionally failing
//! writes), virtual time, and a loop that runs one task's operation to its
//! end, jumping time to the next event. Nothing sleeps.

#![allow(dead_code)]

use std::collections::BTreeMap;
use wb_engine::{
    Action, Engine, EngineError, FileId, Instant, IoDir, IoErrorKind, IoId, PageIndex, Stall, Step,
    TaskId,
};

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
    /// The device serves one request at a time.
    pub device_free_at: Instant,
    /// Pages that left the cache, as the engine reported them, in order.
    pub unmapped: Vec<(FileId, PageIndex, PageIndex)>,
    /// Every action in the order the engine emitted it.
    pub actions: Vec<Action>,
    /// Flushes (MakeDurable) carried out.
    pub flushes: u64,
    /// When set, flushes fail with this error.
    pub fail_flushes: Option<IoErrorKind>,
    /// When set, flushes are not carried out but their ids kept here.
    pub held_flushes: Option<Vec<u64>>,
}

impl Harness {
    pub fn new(engine: Engine, ns_per_page: u64) -> Harness {
        Harness {
            engine,
            now: Instant(0),
            inflight: BTreeMap::new(),
            ns_per_page,
            fail_writes: None,
            stalls: Vec::new(),
            written_pages: 0,
            device_free_at: Instant(0),
            unmapped: Vec::new(),
            actions: Vec::new(),
            flushes: 0,
            fail_flushes: None,
            held_flushes: None,
        }
    }

    /// Carries out the engine's actions; returns the tasks woken.
    pub fn drain(&mut self) -> Vec<TaskId> {
        let mut woken = Vec::new();
        while let Some(action) = self.engine.poll_action() {
            self.actions.push(action.clone());
            match action {
                Action::Submit(req) => {
                    let start = self.device_free_at.max(self.now);
                    let done = start + self.ns_per_page * req.pages as u64;
                    self.device_free_at = done;
                    if req.dir == IoDir::Write {
                        self.written_pages += req.pages as u64;
                    }
                    self.inflight.insert((done, req.id), req.dir);
                }
                Action::Wake(task) => woken.push(task),
                Action::Unmapped { file, first, end } => self.unmapped.push((file, first, end)),
                Action::MakeDurable { id, .. } if self.held_flushes.is_some() => {
                    self.held_flushes.as_mut().expect("checked").push(id);
                }
                Action::MakeDurable { id, .. } => {
                    self.flushes += 1;
                    self.engine
                        .durable_done(id, self.fail_flushes.map_or(Ok(()), Err));
                }
                Action::ZeroFrames { .. } | Action::CopyIn { .. } | Action::Evict { .. } => {}
            }
        }
        woken
    }

    /// Advances time to `until` or the next event before it, processing it.
    fn advance(&mut self, until: Instant) {
        let mut next = until;
        if let Some(&(t, _)) = self.inflight.keys().next() {
            next = next.min(t);
        }
        if let Some(t) = self.engine.poll_timeout() {
            next = next.min(t);
        }
        self.now = self.now.max(next);
        while let Some((&(t, id), &dir)) = self.inflight.iter().next() {
            if t > self.now {
                break;
            }
            self.inflight.remove(&(t, id));
            let result = match (dir, self.fail_writes) {
                (IoDir::Write, Some(e)) => Err(e),
                _ => Ok(()),
            };
            self.engine.io_complete(self.now, id, result);
        }
        if self.engine.poll_timeout().is_some_and(|t| t <= self.now) {
            self.engine.handle_timeout(self.now);
        }
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
