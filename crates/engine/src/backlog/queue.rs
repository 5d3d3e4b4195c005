//! One device's backlog as a queue: items, their estimated costs, the
//! level and its watermarks, the parked files and the step in flight
//! (the costs and watermarks: estimate.rs; the engine's side, which drops
//! pages, retires files and wakes tasks: mod.rs). Pure: it knows files
//! only by id.
//!
//! A file with more to cut after its first step is parked: the worker
//! takes parked files' steps (one at a time, in turn) only while the
//! backlog is under its low watermark or has nothing else, so the files
//! behind a large one keep flowing, no step takes long, and a waiting
//! producer never waits for a parked file.

use crate::action::{IoErrorKind, ReleaseStep};
use crate::config::BacklogThrottle;
use crate::ids::FileId;
use crate::page_cache::CachedFile;
use crate::time::Instant;
use std::collections::VecDeque;

use super::estimate::{watermarks_ns, Estimates, ItemKind};

/// XFS_INODEGC_MAX_BACKLOG: the count bound of `flush-all`.
pub const FLUSH_ALL_MAX_ITEMS: usize = 256;

/// A file to release, or to cut.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Item {
    pub file: FileId,
    pub kind: ItemKind,
    /// Bytes of the backing file still to free.
    pub bytes: u64,
    /// Estimated cost of its next step; the level counts it until the
    /// step is done.
    cost_ns: u64,
    /// Its place in the order of items queued (its steps' ids).
    pub seq: u64,
    /// Its `Start` step was reported: its pages are dropped now, or once
    /// its I/O in flight is done.
    pub started: bool,
    /// Its cached pages are dropped.
    pub dropped: bool,
    /// A task waits for this cut (a write or truncation that extends the
    /// file): it goes before the other parked files.
    waited: bool,
}

/// The step of the item being worked on, while the runtime carries it out.
#[derive(Clone, Copy, Debug)]
struct StepInFlight {
    id: u64,
    /// The item is the head of `parked` (else of `queue`).
    parked: bool,
    step: ReleaseStep,
    /// Bytes the step frees.
    bytes: u64,
    started: Instant,
}

/// What a backlog has done, for stats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BacklogStats {
    /// Items queued now (the one being worked on included).
    pub items: u64,
    /// Their estimated cost, ns.
    pub level_ns: u64,
    pub max_items: u64,
    pub max_level_ns: u64,
    /// Most large files parked at once (past their first step).
    pub max_parked: u64,
    pub high_ns: u64,
    pub low_ns: u64,
    pub items_done: u64,
    pub steps_done: u64,
    /// Large truncations whose backing file was cut (items of their own).
    pub cuts_done: u64,
    /// Times a producer found the backlog full and set the throttle bit
    /// (watermarks) or waited for a flush (flush-all).
    pub throttles: u64,
    /// Release steps the runtime reported failed (the file is gone from
    /// the cache all the same; its blocks may stay allocated).
    pub errors: u64,
    pub est_file_ns: u64,
    pub est_mib_ns: u64,
}

/// One device's backlog.
#[derive(Debug)]
pub(crate) struct Backlog {
    queue: VecDeque<Item>,
    level_ns: u64,
    /// The throttle bit: producers sleep until the level is under low.
    throttled: bool,
    /// The level when a knob last changed (the bound holds from there).
    grace_ns: u64,
    /// Large files past their first step, with what is left of them.
    parked: VecDeque<Item>,
    step: Option<StepInFlight>,
    next_seq: u64,
    /// The highest sequence number of a file wholly released; under
    /// flush-all files are released in queue order, so all before it are.
    done_seq: u64,
    est: Estimates,
    stats: BacklogStats,
}

impl Default for Backlog {
    fn default() -> Backlog {
        Backlog {
            queue: VecDeque::new(),
            level_ns: 0,
            throttled: false,
            grace_ns: 0,
            parked: VecDeque::new(),
            step: None,
            next_seq: 1,
            done_seq: 0,
            est: Estimates::default(),
            stats: BacklogStats::default(),
        }
    }
}

impl Backlog {
    /// Appends an item for a file with `bytes` left. A cut has no
    /// `Start` step: the truncation dropped its pages.
    pub(super) fn push(&mut self, file: FileId, kind: ItemKind, bytes: u64) {
        let cost_ns = self.est.cost_ns(kind, bytes);
        let seq = self.next_seq;
        self.next_seq += 1;
        let cut = kind != ItemKind::Remove;
        self.queue.push_back(Item {
            file,
            kind,
            bytes,
            cost_ns,
            seq,
            started: cut,
            dropped: cut,
            waited: false,
        });
        self.level_ns += cost_ns;
        self.stats.max_items = self.stats.max_items.max(self.queue.len() as u64);
        self.stats.max_level_ns = self.stats.max_level_ns.max(self.level_ns);
    }
    /// Whether releases are queued or in progress.
    pub fn busy(&self) -> bool {
        !self.queue.is_empty() || !self.parked.is_empty()
    }

    /// Which item the worker takes next: parked files go while the
    /// backlog is under `low` or has nothing else, or when a task waits
    /// for the first (a cut, moved there by `wait_for_cut`).
    fn take_parked(&self, low: u64) -> bool {
        let Some(first) = self.parked.front() else {
            return false;
        };
        self.queue.is_empty() || self.level_ns < low || first.waited
    }

    /// The queued or parked cut of `file`, if any.
    fn cut_of(&mut self, file: FileId) -> Option<&mut Item> {
        self.queue
            .iter_mut()
            .chain(self.parked.iter_mut())
            .find(|i| i.file == file && i.kind != ItemKind::Remove)
    }

    pub fn stats(&self, wait_ms: u32) -> BacklogStats {
        let (high, low) = watermarks_ns(wait_ms);
        BacklogStats {
            items: self.queue.len() as u64,
            level_ns: self.level_ns,
            high_ns: high,
            low_ns: low,
            est_file_ns: self.est.file_ns,
            est_mib_ns: self.est.mib_ns,
            ..self.stats
        }
    }

    /// Whether a step is being carried out.
    pub(super) fn stepping(&self) -> bool {
        self.step.is_some()
    }

    /// The item the worker takes next, and whether it is parked.
    pub(super) fn head(&self, low: u64) -> Option<(Item, bool)> {
        let parked = self.take_parked(low);
        let head = if parked {
            self.parked.front()
        } else {
            self.queue.front()
        };
        head.map(|&item| (item, parked))
    }

    /// A step of the head item goes to the runtime as `id`.
    pub(super) fn begin_step(
        &mut self,
        id: u64,
        parked: bool,
        step: ReleaseStep,
        bytes: u64,
        now: Instant,
    ) {
        if !parked {
            let head = self.queue.front_mut().expect("the head item");
            head.dropped = head.started;
        }
        self.step = Some(StepInFlight {
            id,
            parked,
            step,
            bytes,
            started: now,
        });
    }

    /// Takes `file`'s queued cut out; the bytes it had left to free (0 if
    /// it had none), or None while a step of it is in flight.
    pub(super) fn take_cut(&mut self, file: FileId) -> Option<u64> {
        let in_flight = self.step.is_some_and(|s| {
            let head = if s.parked {
                self.parked.front()
            } else {
                self.queue.front()
            };
            head.is_some_and(|i| i.file == file)
        });
        if in_flight {
            return None;
        }
        let bytes = if let Some(at) = self
            .queue
            .iter()
            .position(|i| i.file == file && i.kind != ItemKind::Remove)
        {
            let item = self.queue.remove(at).expect("the position found");
            self.level_ns -= item.cost_ns;
            item.bytes
        } else if let Some(at) = self.parked.iter().position(|i| i.file == file) {
            self.parked.remove(at).expect("the position found").bytes
        } else {
            0
        };
        Some(bytes)
    }

    /// Lowers the target of `file`'s queued cut to `len` bytes.
    pub(super) fn lower_cut(&mut self, file: FileId, len: u64) {
        let item = self.cut_of(file).expect("a pending cut is queued");
        let ItemKind::Cut { to } = item.kind else {
            unreachable!("cut_of finds cuts");
        };
        // What is left above the old target is still to free, and the
        // old target down to the new one.
        item.bytes += to.saturating_sub(len);
        item.kind = ItemKind::Cut { to: to.min(len) };
    }

    /// A task waits for `file`'s cut: it goes before the other parked
    /// files (or will, once its first step is done).
    pub(super) fn hurry_cut(&mut self, file: FileId) {
        if let Some(at) = self.parked.iter().position(|i| i.file == file) {
            // Behind the head while a step of the head is in flight: the
            // step's report pops the head.
            let front = usize::from(self.step.is_some_and(|s| s.parked));
            let mut item = self.parked.remove(at).expect("the position found");
            item.waited = true;
            self.parked.insert(at.min(front), item);
        } else if let Some(item) = self.cut_of(file) {
            // Still queued: parked in front when its first step is done.
            item.waited = true;
        }
    }

    /// Whether a producer must wait before queueing. `flush_until` is the
    /// producer's flush under flush-all (set here when it starts one).
    pub(super) fn throttles(
        &mut self,
        mode: BacklogThrottle,
        wait_ms: u32,
        flush_until: &mut Option<u64>,
    ) -> bool {
        match mode {
            BacklogThrottle::Watermarks => {
                let (high, _) = watermarks_ns(wait_ms);
                if !self.throttled && self.level_ns < high {
                    return false;
                }
                if !self.throttled {
                    // Set the bit; the worker is busy already (it works
                    // whenever items are queued): the kick is implicit.
                    self.throttled = true;
                    self.stats.throttles += 1;
                }
            }
            BacklogThrottle::FlushAll => {
                if let Some(until) = *flush_until {
                    if self.done_seq >= until {
                        return false;
                    }
                } else if self.queue.len() <= FLUSH_ALL_MAX_ITEMS {
                    return false;
                } else {
                    // flush_work: everything queued so far.
                    *flush_until = Some(self.next_seq - 1);
                    self.stats.throttles += 1;
                }
            }
        }
        true
    }

    /// The runtime carried out step `id`: what it ended, or None for an
    /// unknown id. The item moves on: popped, back at the front for its
    /// next step (flush-all), or parked.
    pub(super) fn step_done(
        &mut self,
        id: u64,
        result: Result<(), IoErrorKind>,
        now: Instant,
        mode: BacklogThrottle,
    ) -> Option<StepEnd> {
        let step = self.step.filter(|s| s.id == id)?;
        self.step = None;
        if step.step == ReleaseStep::Start {
            // Parked items were started long ago: this is the queue's head.
            self.queue
                .front_mut()
                .expect("a step belongs to the head item")
                .started = true;
            return Some(StepEnd::Started);
        }
        self.stats.steps_done += 1;
        if result.is_err() {
            self.stats.errors += 1;
        }
        self.est
            .learn(step.step, step.bytes, now.since_ns(step.started));
        let mut item = if step.parked {
            self.parked
                .pop_front()
                .expect("a step belongs to the head item")
        } else {
            let item = self
                .queue
                .pop_front()
                .expect("a step belongs to the head item");
            self.level_ns -= item.cost_ns;
            item
        };
        item.bytes = item.bytes.saturating_sub(step.bytes);
        if result.is_err() {
            // A failed cut goes on to the removal; a failed removal ends
            // the item: the file is gone from the cache either way.
            item.bytes = 0;
        }
        if step.step == ReleaseStep::Remove {
            self.stats.items_done += 1;
            // Items finish in queue order under flush-all, the one mode
            // that reads this: a flush waits for whole files, as XFS's.
            self.done_seq = self.done_seq.max(item.seq);
            return Some(StepEnd::Removed(item.file));
        }
        if item.kind != ItemKind::Remove && item.bytes == 0 {
            self.stats.cuts_done += 1;
            self.done_seq = self.done_seq.max(item.seq);
            return Some(StepEnd::CutDone(item.file));
        }
        if mode == BacklogThrottle::FlushAll && !step.parked {
            // XFS releases an inode whole: the next step at once.
            item.cost_ns = self.est.cost_ns(item.kind, item.bytes);
            self.level_ns += item.cost_ns;
            self.queue.push_front(item);
        } else {
            // Parked: its next steps when the backlog has room, in turn.
            item.cost_ns = 0;
            debug_assert!(item.started && item.dropped);
            if item.waited {
                self.parked.push_front(item);
            } else {
                self.parked.push_back(item);
            }
            self.stats.max_parked = self.stats.max_parked.max(self.parked.len() as u64);
        }
        Some(StepEnd::More)
    }

    /// After a step (`item_done`: the last of its item): whether waiting
    /// producers go on. With watermarks, once the level is under low;
    /// with flush-all, when an item is done (a flush ends only then: one
    /// wait, not one a step). A sync waits for the queue to empty: true
    /// then too.
    pub(super) fn release_producers(
        &mut self,
        mode: BacklogThrottle,
        wait_ms: u32,
        item_done: bool,
    ) -> bool {
        let (high, low) = watermarks_ns(wait_ms);
        let release = match mode {
            BacklogThrottle::Watermarks => self.throttled && self.level_ns < low,
            BacklogThrottle::FlushAll => item_done,
        };
        if self.level_ns < high {
            // The bound holds again as it is.
            self.grace_ns = 0;
        }
        if release {
            self.throttled = false;
        }
        release || self.queue.is_empty()
    }

    /// A backlog knob changed: the bit is cleared and the bound holds
    /// from the level now.
    pub(super) fn recheck(&mut self) {
        self.throttled = false;
        self.grace_ns = self.level_ns;
    }

    /// Checks each item against its file (`files`, by id): a removal's
    /// file is unlinked and closed, a cut's is flagged and at least as
    /// long; returns the number of cuts.
    pub(crate) fn check_items(&self, files: &[CachedFile]) -> usize {
        let mut cuts = 0;
        for item in self.items() {
            let f = &files[item.file.index()];
            assert!(!f.evicted);
            match item.kind {
                ItemKind::Remove => assert!(f.unlinked && f.open_handles == 0),
                ItemKind::Cut { to } => {
                    assert!(f.cut_pending && to <= f.size);
                    cuts += 1;
                }
            }
        }
        cuts
    }

    /// Every item, queued or parked.
    pub(crate) fn items(&self) -> impl Iterator<Item = &Item> {
        self.queue.iter().chain(&self.parked)
    }

    /// Checks the level's accounting and bound (`producers`: tasks that
    /// may each add one item past high); `device` names it in messages.
    pub(crate) fn check(&self, device: usize, mode: BacklogThrottle, wait_ms: u32, producers: u64) {
        let (high, _) = watermarks_ns(wait_ms);
        let sum: u64 = self.queue.iter().map(|i| i.cost_ns).sum();
        assert_eq!(sum, self.level_ns, "device {device}: backlog level");
        let largest = self.queue.iter().map(|i| i.cost_ns).max().unwrap_or(0);
        if mode == BacklogThrottle::Watermarks {
            assert!(
                self.level_ns <= self.grace_ns.max(high) + producers * largest,
                "device {device}: backlog {} ns over high {high} plus one step a producer",
                self.level_ns
            );
        } else if self.grace_ns == 0 {
            assert!(
                self.queue.len() as u64 <= FLUSH_ALL_MAX_ITEMS as u64 + producers,
                "device {device}: {} items over the flush-all bound",
                self.queue.len()
            );
        }
    }
}

/// What a finished step ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum StepEnd {
    /// A file's `Start`: its pages may be dropped now.
    Started,
    /// A file's removal: its id may be retired.
    Removed(FileId),
    /// A cut reached its target: the file may grow again.
    CutDone(FileId),
    /// The item has more steps.
    More,
}

#[cfg(test)]
mod tests {
    use super::super::estimate::next_step;
    use super::*;

    const T0: Instant = Instant::ZERO;
    const WM: BacklogThrottle = BacklogThrottle::Watermarks;

    /// Carries out the head's next step at once; what it ended.
    fn step(b: &mut Backlog, low: u64, id: u64) -> (FileId, StepEnd) {
        let (item, parked) = b.head(low).expect("an item");
        let (step, bytes) = if item.started {
            next_step(item.kind, item.bytes)
        } else {
            (ReleaseStep::Start, 0)
        };
        b.begin_step(id, parked, step, bytes, T0);
        assert!(b.stepping());
        let end = b.step_done(id, Ok(()), T0, WM).expect("its step");
        (item.file, end)
    }

    #[test]
    fn a_large_file_is_parked_after_its_first_cut_and_goes_when_under_low() {
        let mut b = Backlog::default();
        b.push(FileId(1), ItemKind::Remove, 40 << 20);
        b.begin_step(7, false, ReleaseStep::Start, 0, T0);
        assert_eq!(b.step_done(8, Ok(()), T0, WM), None, "an unknown id");
        assert_eq!(b.step_done(7, Ok(()), T0, WM), Some(StepEnd::Started));
        assert_eq!(step(&mut b, 0, 9), (FileId(1), StepEnd::More));
        let stats = b.stats(100);
        assert_eq!((stats.items, stats.level_ns, stats.max_parked), (0, 0, 1));
        // A small file queued goes first while the level is at or over
        // low; the parked one when it is under.
        b.push(FileId(2), ItemKind::Remove, 4096);
        let first = |b: &Backlog, low| b.head(low).map(|(i, parked)| (i.file, parked));
        assert_eq!(first(&b, 1), Some((FileId(2), false)));
        assert_eq!(first(&b, u64::MAX), Some((FileId(1), true)));
        // Its last 24 MiB: one more cut, then the removal.
        assert_eq!(step(&mut b, u64::MAX, 10), (FileId(1), StepEnd::More));
        assert_eq!(
            step(&mut b, u64::MAX, 11),
            (FileId(1), StepEnd::Removed(FileId(1)))
        );
        assert_eq!(b.stats(100).items_done, 1);
    }

    #[test]
    fn producers_wait_from_high_until_the_level_is_under_low() {
        let (mut b, wait_ms) = (Backlog::default(), 1);
        let (high, low) = watermarks_ns(wait_ms);
        let mut n = 0;
        while b.stats(wait_ms).level_ns < high {
            b.push(FileId(n), ItemKind::Remove, 4096);
            n += 1;
        }
        let mut until = None;
        assert!(b.throttles(WM, wait_ms, &mut until));
        assert_eq!((b.stats(wait_ms).throttles, until), (1, None));
        let mut id = 0;
        while b.stats(wait_ms).level_ns >= low {
            assert!(b.throttles(WM, wait_ms, &mut until), "the bit holds them");
            assert!(!b.release_producers(WM, wait_ms, true));
            for _ in 0..2 {
                id += 1;
                step(&mut b, low, id);
            }
        }
        assert!(b.release_producers(WM, wait_ms, true));
        assert!(!b.throttles(WM, wait_ms, &mut until));
        assert_eq!(b.stats(wait_ms).throttles, 1);
    }

    #[test]
    fn a_cut_is_lowered_taken_back_and_not_while_in_flight() {
        let mut b = Backlog::default();
        b.push(FileId(3), ItemKind::Cut { to: 8 << 20 }, 32 << 20);
        b.lower_cut(FileId(3), 1 << 20);
        let (item, _) = b.head(0).expect("the cut");
        assert_eq!(
            (item.kind, item.bytes),
            (ItemKind::Cut { to: 1 << 20 }, 39 << 20)
        );
        b.begin_step(
            1,
            false,
            ReleaseStep::Truncate { len: 24 << 20 },
            16 << 20,
            T0,
        );
        assert_eq!(b.take_cut(FileId(3)), None, "a step of it is in flight");
        assert_eq!(b.step_done(1, Ok(()), T0, WM), Some(StepEnd::More));
        assert_eq!(b.take_cut(FileId(3)), Some(23 << 20));
        assert!(!b.busy());
        assert_eq!(b.take_cut(FileId(3)), Some(0), "none left");
    }
}
