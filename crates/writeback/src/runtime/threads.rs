//! The runtime's own threads: the completion thread (finished I/O to the
//! engine), the timer thread (the engine's deadlines, the devices' read
//! statistics, memory given back, with feature `metrics` the metrics
//! published every second) and the release thread (unlinked files'
//! release steps, one at a time).

use super::core::Core;
use super::shared::{Shared, RELEASE_EVERY, TIMER_TICK};
use crate::io::IoDone;
use std::sync::mpsc::Receiver;
use std::time::Duration;
use wb_engine::Instant;

impl Shared {
    /// The release thread: carries out the release steps of unlinked
    /// files one by one, each reported to the engine, which asks for the
    /// next. Ends when the cache closes.
    pub fn release_loop(&self) {
        let rx = self
            .release_rx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let Some(rx) = rx else {
            return;
        };
        for release in rx {
            let more = self.release(release);
            self.carry_out(more);
        }
    }

    /// Stops handing release steps to the release thread, which ends once
    /// it has carried out those it has.
    pub fn close_releases(&self) {
        self.release_tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }

    /// The completion thread: feeds finished I/O to the engine until the
    /// backend is gone.
    pub fn completion_loop(&self, completions: Receiver<IoDone>) {
        while let Ok(done) = completions.recv() {
            self.back_read_frames(&done);
            self.report(|core, now| {
                core.complete(done, now);
                // Take whatever else finished meanwhile under the same lock.
                while let Ok(more) = completions.try_recv() {
                    core.complete(more, self.clock.now());
                }
            });
        }
    }

    /// Backs the frames a finished read is about to be copied into with
    /// memory, without the engine's lock: on a fresh cache the copy would
    /// otherwise take the first-touch faults (~2.5–5 ms per huge page
    /// here) while holding it (populate.rs). Populating never changes a
    /// frame, so a hint gone stale (the frames handed to another page
    /// meanwhile) costs nothing but the work. Skipped while the populating
    /// thread holds `populating` (it is likely backing these very frames).
    fn back_read_frames(&self, done: &IoDone) {
        // Only a read of `prefault_read_min` or more comes with a buffer
        // of its own that large (a lent write has none): other
        // completions do not take the engine's lock twice.
        let large = |b: &crate::io::AlignedBuf| self.tuning.prefaults_read(b.len() as u64);
        if done.result.is_err() || !done.buf.owned().is_some_and(large) {
            return;
        }
        let Some((first, end)) = self.lock().read_frames_hint(done.id) else {
            return;
        };
        if let Some(populating) = self.frames.try_populating() {
            // An error here only means the copy takes the faults itself.
            let _ = self.frames.populate(&populating, first, end);
        }
    }

    /// Feeds the devices' read statistics to the engine (see diskstats.rs).
    fn sample_diskstats(core: &mut Core, now: Instant) {
        let Core {
            engine, diskstats, ..
        } = core;
        for (device, stats) in diskstats.iter_mut() {
            if let Some((reads, latency_ns)) = stats.sample() {
                // The devices sampled are the engine's own: nothing to report.
                let _ = engine.note_foreign_reads(now, *device, reads, latency_ns);
            }
        }
    }

    /// The engine's statistics and the age of the oldest dirty data:
    /// what the metric families are built from (telemetry/).
    pub fn snapshot(&self, core: &Core) -> (wb_engine::Stats, Option<Duration>) {
        let age = core
            .engine
            .oldest_dirtied_at()
            .map(|since| Duration::from_nanos(self.clock.now().since_ns(since)));
        (core.engine.stats(), age)
    }

    /// The timer thread: calls the engine at its deadlines until closed.
    pub fn timer_loop(&self) {
        let mut core = self.lock();
        let mut next_sample = std::time::Instant::now();
        let mut next_release = std::time::Instant::now();
        #[cfg(feature = "metrics")]
        let mut next_publish = std::time::Instant::now();
        while !core.closed {
            #[cfg(feature = "metrics")]
            if std::time::Instant::now() >= next_publish {
                // The snapshot under the lock, the rest outside it.
                let (stats, age) = self.snapshot(&core);
                drop(core);
                crate::telemetry::facade::publish(&crate::telemetry::families(&stats, age));
                next_publish = std::time::Instant::now() + crate::telemetry::facade::PUBLISH_EVERY;
                core = self.lock();
                continue;
            }
            let now = self.clock.now();
            if std::time::Instant::now() >= next_sample {
                Self::sample_diskstats(&mut core, now);
                next_sample = std::time::Instant::now() + super::diskstats::SAMPLE_INTERVAL;
            }
            if std::time::Instant::now() >= next_release {
                core.give_back_memory();
                next_release = std::time::Instant::now() + RELEASE_EVERY;
            }
            if let Core {
                trace: Some(trace),
                engine,
                ..
            } = &mut *core
            {
                trace.sample(engine);
            }
            if core.engine.poll_timeout().is_some_and(|t| t <= now) {
                core.engine.handle_timeout(now);
                let out = core.drain(None);
                drop(core);
                self.carry_out(out);
                core = self.lock();
                continue;
            }
            // A trace samples the engine's counters every millisecond.
            let tick = match core.trace {
                Some(_) => Duration::from_nanos(wb_trace::engine::SAMPLE_EVERY_NS),
                None => TIMER_TICK,
            };
            let next = core
                .engine
                .poll_timeout()
                .map_or(tick, |t| Duration::from_nanos(t.since_ns(now)).min(tick));
            core.timer_wake_at = Some(now + u64::try_from(next.as_nanos()).unwrap_or(u64::MAX));
            let (guard, _) = self
                .timer_cv
                .wait_timeout(core, next)
                .unwrap_or_else(|p| panic!("cache state poisoned: {p}"));
            core = guard;
            core.timer_wake_at = None;
        }
    }
}
