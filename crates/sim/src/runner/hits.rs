//! A sequential reader's cache hits, served as one event.
//!
//! A reader of 4 KiB blocks hitting the cache costs one event per block:
//! the engine's read, the job's bookkeeping, the search for the next
//! event. Most of a run's events are such hits, and a hit does not depend
//! on the time (`Engine::read_hits`). So when a job's next operation is a
//! read its workload will repeat at the next offsets (`Workload::repeats`),
//! the runner serves, in one call, the reads that would start before
//! anything else happens:
//!
//! - read `i` starts at `now + i × c`, `c` the read's own time
//!   (`op_cpu_ns`), as the job would run it after read `i − 1` ended;
//! - none while the engine has actions not carried out yet (they are
//!   carried out after the job's read and may bring an event before the
//!   next one: a woken job, a request's completion);
//! - only reads starting strictly before the horizon: the next completion,
//!   engine timer or other job's event (at an equal time those go first),
//!   the next engine sample of the timeline, a fault due (power cut, crash,
//!   knob change), the job's runtime, the run's end;
//! - under faults, only up to the next event at which the invariants are
//!   checked (every `CHAOS_CHECK_EVERY` events, so the checks see the same
//!   states), and not at all when every event is checked or a trace is
//!   recorded (it samples at every event).
//!
//! The engine stops before the first read it would not serve at once (a
//! miss, a page being read, a readahead to start); the job records each
//! read served as it would have, and the run counts each as an event.
//! Reports are the same as with one event per read.

use super::{op_cpu_ns, Sim};
use crate::workload::Op;
use wb_engine::VirtualRuntime;
use wb_engine::{Instant, PAGE_SIZE};

impl Sim {
    /// Serves `op`, job `job`'s next operation due now, with the reads that
    /// follow it, when it is a read of cached pages; false (nothing done)
    /// otherwise.
    pub(super) fn serve_hits(&mut self, job: usize, op: Op) -> bool {
        let Op::Read { file, offset, len } = op else {
            return false;
        };
        let Some(extra) = self.hit_events_left else {
            return false;
        };
        if self.engine.has_actions() {
            // Actions not carried out yet (a completion's wake-up, a
            // request to submit) take effect after this read, before the
            // next: they may schedule a job or a completion before it.
            return false;
        }
        let repeats = self.jobs[job].workload.repeats().min(extra);
        if repeats == 0 {
            // One read: the ordinary path costs no more.
            return false;
        }
        let now = self.now;
        let op_ns = op_cpu_ns(&op);
        let horizon = self.hits_horizon(job);
        // Read i ≥ 1 starts at now + i × op_ns, before the horizon.
        let by_time = horizon.as_ns().saturating_sub(now.as_ns() + 1) / op_ns;
        let count = 1 + repeats.min(by_time);
        let j = &self.jobs[job];
        // An error (a bad handle) is the ordinary path's to report: it
        // takes the read again and returns it.
        let served = self
            .engine
            .read_hits(j.task, j.handles[file], offset, len, count)
            .unwrap_or(0);
        if served == 0 {
            return false;
        }
        if let Some(map) = self.page_map.as_ref() {
            // As each read's completion would (page_map, rule 2).
            let (first, pages) = (offset / PAGE_SIZE, len / PAGE_SIZE);
            map.read_done(&self.engine, j.files[file], first, first + served * pages);
        }
        let j = &mut self.jobs[job];
        j.run.record_repeats(op, now, op_ns, served);
        j.workload.skip(served - 1);
        self.hit_events_left = Some(extra - (served - 1));
        self.hit_events += served - 1;
        self.schedule(job, now + served * op_ns);
        true
    }

    /// The first time at which something other than job `job`'s reads
    /// happens or is looked at.
    fn hits_horizon(&self, job: usize) -> Instant {
        let others = self
            .jobs
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != job)
            .filter_map(|(_, j)| j.next.map(|(t, _)| t))
            .min();
        let mut horizon = Instant(self.scenario.duration_ns + 1);
        let mut earlier = |at: Option<Instant>| {
            if let Some(at) = at {
                horizon = horizon.min(at);
            }
        };
        earlier(self.next_event(others).map(|e| e.at));
        earlier(Some(Instant(self.timeline.next_ns())));
        earlier(self.jobs[job].run.stop_at());
        if let Some(chaos) = self.chaos.as_ref() {
            earlier(chaos.power_cut_at);
            earlier(chaos.crash_at);
            earlier(chaos.next_knob_at);
        }
        horizon
    }
}
