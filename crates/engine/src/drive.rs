//! The driving loop of a runtime with virtual time: the simulator and the
//! engine's tests share it, so both see events in one order.
//!
//! One turn:
//! 1. carry out every action the engine has queued, in the order it
//!    queued them (submit, wake, flush, ...);
//! 2. jump time to the earliest of: an I/O completion, an engine timer,
//!    the caller's own next event (a job's next operation), a limit;
//! 3. at that instant, complete the I/Os that are due, then fire the
//!    engine's timers (so a timer sees the completions of its instant);
//! 4. the caller runs its own events due at that instant.
//!
//! The real runtime (crates/writeback) follows steps 1 and 3 with a
//! clock and threads instead of jumps: its drain is the same ordered pass
//! over `poll_action`.

use crate::time::earliest;
use crate::{Action, Engine, Instant};

/// A runtime that moves time itself: it owns the engine, the devices
/// (models that complete requests at computed instants) and the tasks.
pub trait VirtualRuntime {
    fn engine(&mut self) -> &mut Engine;

    /// The engine, read-only (for the next timer).
    fn engine_ref(&self) -> &Engine;

    /// Carries out one action of the engine's at `now`.
    fn carry_out(&mut self, now: Instant, action: Action);

    /// When the next request in flight completes, if any is in flight.
    fn next_completion(&self) -> Option<Instant>;

    /// Completes, through `Engine::io_complete`, every request due by `now`.
    fn complete_due(&mut self, now: Instant);

    /// Step 1: carries out every queued action, in order.
    fn drain_actions(&mut self, now: Instant) {
        while let Some(action) = self.engine().poll_action() {
            self.carry_out(now, action);
        }
    }

    /// Step 2: the earliest of a completion, an engine timer and `other`.
    fn next_event(&self, other: Option<Instant>) -> Option<NextEvent> {
        let completion = self.next_completion();
        let timer = self.engine_ref().poll_timeout();
        let at = earliest(earliest(completion, timer), other)?;
        Some(NextEvent {
            at,
            completion,
            timer,
        })
    }

    /// Step 3: completions due at `now`, then the engine's timers. `next`
    /// is what `next_event` found, with nothing done since.
    fn run_due(&mut self, now: Instant, next: &NextEvent) {
        let mut timer = next.timer;
        if next.completion.is_some_and(|t| t <= now) {
            self.complete_due(now);
            // Completions may arm a timer.
            timer = self.engine_ref().poll_timeout();
        }
        if timer.is_some_and(|t| t <= now) {
            self.engine().handle_timeout(now);
        }
    }
}

/// The next instant something happens, and what is due then: runtimes call
/// this once per turn, so each source is asked once.
#[derive(Clone, Copy, Debug)]
pub struct NextEvent {
    pub at: Instant,
    completion: Option<Instant>,
    timer: Option<Instant>,
}
