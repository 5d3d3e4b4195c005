//! The executor: it carries out what the engine's calls left for after
//! the lock, one step at a time, in the order the engine emitted them (as
//! `wb_engine::drive` does for the simulator).
//!
//! `Core::drain` turns the engine's actions into `Deferred` steps, in
//! order. `carry_out` walks them with the lock released. Consecutive ops
//! go to the backend together. Some steps end with a report to the engine
//! (a flush, a length set, a refused request, a device's free space): that
//! engine call leaves steps of its own. They are carried out next, before
//! the rest of the list: what a report caused (the wake of the fsync whose
//! flush it was) never waits behind later slow steps (another file's
//! flush). Within each engine call's steps the order is the engine's.

use super::core::{CopyIn, Core};
use super::shared::Shared;
use super::times::{Modified, Stamp};
use crate::io::IoOp;
use std::collections::VecDeque;
use std::fs::File as StdFile;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::Thread;
use wb_engine::{DeviceId, Instant, IoId, ReleaseStep, TaskId};

/// One thing the engine asked for, to be done once the lock is released.
pub(crate) enum Deferred {
    /// The engine's next timeout is earlier than the timer thread's
    /// wake: signal it (`Core::timer_wake_at`).
    KickTimer,
    /// Set a backing file's mtime back after write-backs moved it
    /// (times.rs).
    Stamp(Stamp),
    /// Hand an op to the backend. `commit`: a write of a commit
    /// (`IoRequest::commit`).
    Submit { op: IoOp, commit: bool },
    /// A request this runtime cannot carry out (a direct write: its data
    /// is not in the frames): report it failed.
    Refuse(IoId),
    /// The engine woke the task (its flag is set under the lock): unpark
    /// the thread sleeping for it.
    Wake(TaskId, Thread),
    /// A release step of an unlinked file's backing file
    /// (`Action::Release`).
    Release(Release),
    /// Ask a device's free space (`Action::StatFs`): statvfs of a
    /// directory on it.
    StatFs(DeviceId, PathBuf),
    /// Set a backing file's length (`Action::SetLength`).
    SetLength(LengthSet),
    /// Make a backing file durable (`Action::MakeDurable`).
    Flush(Flush),
}

/// What engine calls left for after the lock.
#[derive(Default)]
pub(crate) struct Out {
    /// The steps, in the order they are to be carried out
    /// (`Core::drain` says which).
    pub steps: Vec<Deferred>,
    /// The writer's CopyIn actions, when its write defers the copy. They
    /// are not steps: the writer makes them itself, before anything in
    /// `steps`, and tells the engine (`Engine::write_end`) before its
    /// operation goes on (`Shared::run_op`).
    pub copies: Vec<CopyIn>,
}

impl Out {
    pub fn push(&mut self, step: Deferred) {
        self.steps.push(step);
    }

    /// Adds what a later engine call left, to be carried out after this.
    pub fn append(&mut self, later: Out) {
        self.steps.extend(later.steps);
        self.copies.extend(later.copies);
    }

    /// The ops to submit, each with whether it is a commit's.
    fn submits(&self) -> impl Iterator<Item = (&IoOp, bool)> {
        self.steps.iter().filter_map(|s| match s {
            Deferred::Submit { op, commit } => Some((op, *commit)),
            _ => None,
        })
    }

    /// Whether the only op to submit is a read.
    pub fn only_op_is_read(&self) -> bool {
        let mut ops = self.submits();
        matches!((ops.next(), ops.next()), (Some((op, _)), None) if !op.write)
    }

    /// Whether there are ops to submit and every one is a commit's.
    pub fn only_commit_ops(&self) -> bool {
        self.submits().next().is_some() && self.submits().all(|(_, commit)| commit)
    }

    /// Takes the ops to submit out of the steps, in order.
    pub fn take_ops(&mut self) -> Vec<IoOp> {
        let (submits, rest) = std::mem::take(&mut self.steps)
            .into_iter()
            .partition(|s| matches!(s, Deferred::Submit { .. }));
        self.steps = rest;
        submits
            .into_iter()
            .filter_map(|s| match s {
                Deferred::Submit { op, .. } => Some(op),
                _ => None,
            })
            .collect()
    }

    /// Puts ops back as the first steps (`commit`: they are a commit's).
    pub fn put_back_ops(&mut self, ops: Vec<IoOp>, commit: bool) {
        let submits = ops.into_iter().map(|op| Deferred::Submit { op, commit });
        self.steps.splice(0..0, submits);
    }

    /// Drops the wake of `task` (its thread is awake).
    pub fn skip_wake(&mut self, task: TaskId) {
        self.steps
            .retain(|s| !matches!(s, Deferred::Wake(t, _) if *t == task));
    }
}

/// A flush the engine asked for (`Action::MakeDurable`): set the backing
/// file's length to `len` if given, then fdatasync (fsync with
/// `metadata`). Reported with `Engine::durable_done`.
pub(crate) struct Flush {
    pub id: u64,
    pub backing: Arc<StdFile>,
    pub len: Option<u64>,
    pub metadata: bool,
    /// The file's recorded mtime, set back after a length change (times.rs).
    pub modified: Modified,
}

/// A length change the engine asked for (`Action::SetLength`), reported
/// with `Engine::length_set`.
pub(crate) struct LengthSet {
    pub id: u64,
    pub backing: Arc<StdFile>,
    pub len: u64,
    /// The file's recorded mtime, set back after the change (times.rs).
    pub modified: Modified,
}

/// A release step of an unlinked file (`Action::Release`): the backing
/// file (taken out of the table for a removal, so that the last close,
/// which frees the blocks, happens here) and the step. Reported with
/// `Engine::release_done`.
pub(crate) struct Release {
    pub id: u64,
    pub backing: Option<Arc<StdFile>>,
    /// The file's recorded mtime, set back after a cut (times.rs).
    pub modified: Modified,
    /// For a removal: the file's name to remove first, if it still has
    /// one (`Cache::remove_later`).
    pub name: Option<PathBuf>,
    pub step: ReleaseStep,
}

/// How the executor carries out steps: `Shared` for real, a recorder in
/// the tests.
pub(crate) trait Carry {
    /// Hands consecutive ops to the backend, in order.
    fn submit(&self, ops: Vec<IoOp>);
    /// Carries out any other step; returns what the engine calls it made
    /// left.
    fn carry_out_step(&self, step: Deferred) -> Out;
}

/// Carries out `out`'s steps in order; the steps a report left come right
/// after that report.
/// Its copies must have been made (`Out::copies`).
pub(crate) fn carry_out(carry: &impl Carry, out: Out) {
    debug_assert!(out.copies.is_empty(), "copies are the writer's");
    let mut queue = VecDeque::from(out.steps);
    while let Some(step) = queue.pop_front() {
        let Deferred::Submit { op, .. } = step else {
            let more = carry.carry_out_step(step);
            debug_assert!(more.copies.is_empty(), "copies are the writer's");
            for step in more.steps.into_iter().rev() {
                queue.push_front(step);
            }
            continue;
        };
        let mut ops = vec![op];
        while let Some(Deferred::Submit { .. }) = queue.front() {
            if let Some(Deferred::Submit { op, .. }) = queue.pop_front() {
                ops.push(op);
            }
        }
        carry.submit(ops);
    }
}

impl Carry for Shared {
    fn submit(&self, ops: Vec<IoOp>) {
        let backend = self.backend.read().unwrap_or_else(|p| p.into_inner());
        // Without a backend (the cache is closing) they are dropped.
        if let Some(backend) = backend.as_ref() {
            for op in ops {
                backend.submit(op);
            }
        }
    }

    fn carry_out_step(&self, step: Deferred) -> Out {
        match step {
            Deferred::KickTimer => self.timer_cv.notify_one(),
            Deferred::Stamp(stamp) => stamp.apply(),
            Deferred::Wake(_, thread) => thread.unpark(),
            Deferred::Submit { op, .. } => self.submit(vec![op]),
            Deferred::Refuse(id) => {
                return self.tell(|core, now| {
                    core.engine
                        .io_complete(now, id, Err(wb_engine::IoErrorKind::Io))
                })
            }
            Deferred::StatFs(device, dir) => return self.report_free_space(device, &dir),
            Deferred::Release(release) => return self.hand_over(release),
            Deferred::SetLength(set) => return self.set_length(set),
            Deferred::Flush(flush) => return self.flush(flush),
        }
        Out::default()
    }
}

impl Shared {
    /// Carries out what engine calls left, the lock released (see the
    /// module's doc).
    pub fn carry_out(&self, out: Out) {
        carry_out(self, out);
    }

    /// Tells the engine something: `f` runs under the lock, given the
    /// clock's now. Returns what the engine's calls left, with the lock
    /// released.
    pub fn tell(&self, f: impl FnOnce(&mut Core, Instant)) -> Out {
        let mut core = self.lock();
        let now = self.clock.now();
        f(&mut core, now);
        core.drain(None)
    }

    /// As `tell`, then carries out what the engine's calls left.
    pub fn report(&self, f: impl FnOnce(&mut Core, Instant)) {
        let out = self.tell(f);
        self.carry_out(out);
    }

    /// Tells the engine the device's free space (statvfs of `dir`, a
    /// directory on it), or that it is unknown.
    fn report_free_space(&self, device: DeviceId, dir: &std::path::Path) -> Out {
        let free = super::statfs::free_bytes(dir);
        self.tell(|core, now| {
            // The device is the engine's own (registered with its directory).
            let _ = match free {
                Ok(bytes) => core.engine.set_free_space(now, device, bytes),
                Err(_) => core.engine.space_unknown(device),
            };
        })
    }

    /// Hands a release step to the release thread (`release_loop`), or
    /// carries it out here once that is gone.
    fn hand_over(&self, release: Release) -> Out {
        let tx = self.release_tx.lock().unwrap_or_else(|p| p.into_inner());
        let release = match tx.as_ref() {
            Some(tx) => match tx.send(release) {
                Ok(()) => return Out::default(),
                Err(std::sync::mpsc::SendError(release)) => release,
            },
            None => release,
        };
        drop(tx);
        // The release thread is gone (the cache is closing): here.
        self.release(release)
    }

    /// Carries out a release step and reports it to the engine.
    pub(super) fn release(&self, release: Release) -> Out {
        // A cut of a truncated file moves its mtime: set it back after.
        let stamp = match (&release.step, &release.backing) {
            (ReleaseStep::Truncate { .. }, Some(backing)) => Some(Stamp {
                backing: Arc::clone(backing),
                modified: Arc::clone(&release.modified),
            }),
            _ => None,
        };
        let result = self
            .release_unreported(release.backing, release.name, release.step)
            .map_err(|e| crate::error::io_error_kind(&e));
        if let Some(stamp) = stamp {
            stamp.apply();
        }
        self.tell(|core, now| core.engine.release_done(now, release.id, result))
    }

    /// Carries out a release step of an unlinked file: cut its backing
    /// file, or let it go: remove the name it still has, if any, then
    /// close it (the last close frees what is left).
    fn release_unreported(
        &self,
        backing: Option<Arc<StdFile>>,
        name: Option<PathBuf>,
        step: ReleaseStep,
    ) -> std::io::Result<()> {
        match (step, backing) {
            // Only ever shorter: a sync may have cut the file to its
            // length already (a cut of a truncated file).
            (ReleaseStep::Truncate { len }, Some(file)) => {
                super::length_lock::cut_if_longer(&self.lengths, &file, len)
            }
            (_, backing) => {
                let removed = match name {
                    // Already gone (removed by someone else): nothing lost.
                    Some(name) => match std::fs::remove_file(&name) {
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                        other => other,
                    },
                    None => Ok(()),
                };
                drop(backing);
                removed
            }
        }
    }

    /// Sets a backing file's length (a truncation), sets its mtime back,
    /// and reports it to the engine.
    fn set_length(&self, set: LengthSet) -> Out {
        let result = {
            let _guard = self.lengths.lock(&set.backing);
            set.backing.set_len(set.len)
        };
        let result = result.map_err(|e| crate::error::io_error_kind(&e));
        Stamp {
            backing: Arc::clone(&set.backing),
            modified: Arc::clone(&set.modified),
        }
        .apply();
        self.tell(|core, now| core.engine.length_set(now, set.id, result))
    }

    /// Performs a flush and reports it to the engine.
    fn flush(&self, flush: Flush) -> Out {
        let result = self
            .flush_unreported(&flush)
            .map_err(|e| crate::error::io_error_kind(&e));
        self.tell(|core, now| core.engine.durable_done(now, flush.id, result))
    }

    /// Sets the backing file's length if the engine says so (a length set
    /// over data not yet written then, or a cut the backlog has not made
    /// yet), then flushes it.
    fn flush_unreported(&self, flush: &Flush) -> std::io::Result<()> {
        if let Some(len) = flush.len {
            let _guard = self.lengths.lock(&flush.backing);
            if flush.backing.metadata()?.len() != len {
                flush.backing.set_len(len)?;
                Stamp {
                    backing: Arc::clone(&flush.backing),
                    modified: Arc::clone(&flush.modified),
                }
                .apply();
            }
        }
        if flush.metadata {
            flush.backing.sync_all()
        } else {
            flush.backing.sync_data()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{AlignedBuf, IoBuf};
    use std::cell::RefCell;

    /// Writes down what it is asked to carry out; a flush's report leaves
    /// `after_flush`.
    #[derive(Default)]
    struct Recorder {
        log: RefCell<Vec<String>>,
        after_flush: RefCell<Vec<Deferred>>,
    }

    impl Carry for Recorder {
        fn submit(&self, ops: Vec<IoOp>) {
            let ids: Vec<u64> = ops.iter().map(|op| op.id).collect();
            self.log.borrow_mut().push(format!("submit {ids:?}"));
        }

        fn carry_out_step(&self, step: Deferred) -> Out {
            let (what, more) = match step {
                Deferred::KickTimer => ("kick".to_string(), Vec::new()),
                Deferred::Refuse(id) => (format!("refuse {}", id.0), Vec::new()),
                Deferred::Wake(task, _) => (format!("wake {}", task.0), Vec::new()),
                Deferred::SetLength(set) => (format!("set length {}", set.id), Vec::new()),
                Deferred::Flush(flush) => (format!("flush {}", flush.id), self.after_flush.take()),
                _ => ("other".to_string(), Vec::new()),
            };
            self.log.borrow_mut().push(what);
            Out {
                steps: more,
                copies: Vec::new(),
            }
        }
    }

    fn file() -> Arc<StdFile> {
        Arc::new(StdFile::open("/dev/null").expect("/dev/null opens"))
    }

    fn submit(id: u64) -> Deferred {
        let op = IoOp {
            id,
            file: file(),
            write: true,
            offset: 0,
            buf: IoBuf::Owned(AlignedBuf::new(4096)),
            len: 4096,
            blocks: false,
        };
        Deferred::Submit { op, commit: false }
    }

    fn set_length(id: u64) -> Deferred {
        Deferred::SetLength(LengthSet {
            id,
            backing: file(),
            len: 0,
            modified: Modified::default(),
        })
    }

    fn flush(id: u64) -> Deferred {
        Deferred::Flush(Flush {
            id,
            backing: file(),
            len: None,
            metadata: false,
            modified: Modified::default(),
        })
    }

    fn run(recorder: &Recorder, steps: Vec<Deferred>) -> Vec<String> {
        let out = Out {
            steps,
            copies: Vec::new(),
        };
        carry_out(recorder, out);
        recorder.log.take()
    }

    #[test]
    fn steps_are_carried_out_in_the_order_emitted() {
        let recorder = Recorder::default();
        let log = run(
            &recorder,
            vec![
                set_length(1),
                flush(2),
                Deferred::Refuse(IoId(3)),
                submit(4),
                flush(5),
            ],
        );
        // The old executor went by kind: the submit first, the flushes last.
        let expected = [
            "set length 1",
            "flush 2",
            "refuse 3",
            "submit [4]",
            "flush 5",
        ];
        assert_eq!(log, expected);
    }

    #[test]
    fn consecutive_submits_go_to_the_backend_together() {
        let recorder = Recorder::default();
        let steps = vec![
            submit(1),
            submit(2),
            submit(3),
            Deferred::KickTimer,
            submit(4),
        ];
        let log = run(&recorder, steps);
        assert_eq!(log, ["submit [1, 2, 3]", "kick", "submit [4]"]);
    }

    #[test]
    fn what_a_report_leaves_comes_right_after_it() {
        let recorder = Recorder::default();
        recorder.after_flush.replace(vec![
            Deferred::Wake(TaskId(7), std::thread::current()),
            submit(8),
            submit(9),
        ]);
        let log = run(&recorder, vec![flush(1), submit(2), set_length(3)]);
        // The wake of the flush's fsync does not wait for the later steps;
        // the report's submits join the next ones.
        let expected = ["flush 1", "wake 7", "submit [8, 9, 2]", "set length 3"];
        assert_eq!(log, expected);
    }

    #[test]
    fn ops_taken_out_and_put_back_keep_the_other_steps_in_order() {
        let mut out = Out {
            steps: vec![
                Deferred::KickTimer,
                submit(1),
                Deferred::Refuse(IoId(2)),
                submit(3),
            ],
            copies: Vec::new(),
        };
        assert!(!out.only_op_is_read());
        assert!(!out.only_commit_ops());
        let ops = out.take_ops();
        assert_eq!(ops.iter().map(|op| op.id).collect::<Vec<_>>(), [1, 3]);
        assert_eq!(out.steps.len(), 2);
        out.put_back_ops(ops.into_iter().skip(1).collect(), true);
        assert!(out.only_commit_ops());
        let log = run(&Recorder::default(), out.steps);
        assert_eq!(log, ["submit [3]", "kick", "refuse 2"]);
    }
}
