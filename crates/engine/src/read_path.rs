//! The read path: cached pages are copied out; a miss reads from the
//! device, with readahead for sequential readers (readahead.rs says
//! when and how much).

use crate::action::{IoDir, StallReason, Step};
use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::{FileId, HandleId, PageIndex, TaskId, PAGE_SIZE};
use crate::page_cache::{PG_DROPBEHIND, PG_LOCKED, PG_READING};
use crate::readahead::window_pages;
use crate::task::{Op, WaitKey};
use crate::time::Instant;

impl Engine {
    /// Reads `len` bytes at `offset` (short at end of file).
    pub fn read(
        &mut self,
        now: Instant,
        task: TaskId,
        handle: HandleId,
        offset: u64,
        len: u64,
    ) -> Result<Step, EngineError> {
        let file = self.handle(handle)?.file;
        crate::handle::page_range(offset, len)?;
        let max = self.cache.memory_pages / 4 * crate::ids::PAGE_SIZE;
        if len > max {
            return Err(EngineError::ReadTooLarge { len, max });
        }
        self.touch_file(file);
        self.readahead_before_read(now, task, file, offset, len);
        // Most reads hit one valid run: done at once, with no operation in
        // progress to keep (a busy or unknown task takes the full path,
        // whose `begin` reports it).
        let idle = self
            .tasks
            .get(task.index())
            .is_some_and(|t| t.op == Op::Idle);
        if idle {
            self.start_read_marks(task, file, offset);
            if self.read_from_one_run(task, file, offset, len) {
                return Ok(Step::Done);
            }
        }
        self.tasks.begin(
            task,
            Op::Read {
                handle,
                offset,
                len,
            },
        )?;
        self.continue_read(now, task)
    }

    /// Serves up to `count` reads by `task` of `len` bytes each, at
    /// `offset`, `offset + len`, `offset + 2 × len`, …, as `read` would
    /// serve them one after another with nothing else happening in between
    /// (the same pages marked, the same counters, the same readahead
    /// position), and returns how many it served. It stops before the
    /// first read that `read` would not serve at once from the cache with
    /// no other effect: a page missing, being read or locked, a read
    /// across two runs, an asynchronous readahead to start, the end of the
    /// file. Only reads of whole pages at page boundaries by an idle task
    /// are served here (0 otherwise: take `read`, which also reports bad
    /// arguments).
    ///
    /// Cache hits do not depend on the time, so a simulator may serve a
    /// sequential reader's hits up to its next other event in one call
    /// (wb-sim's runner does).
    pub fn read_hits(
        &mut self,
        task: TaskId,
        handle: HandleId,
        offset: u64,
        len: u64,
        count: u64,
    ) -> Result<u64, EngineError> {
        let file = self.handle(handle)?.file;
        let pages = len / PAGE_SIZE;
        let idle = self
            .tasks
            .get(task.index())
            .is_some_and(|t| t.op == Op::Idle);
        if count == 0
            || pages == 0
            || !len.is_multiple_of(PAGE_SIZE)
            || !offset.is_multiple_of(PAGE_SIZE)
            || len > self.cache.memory_pages / 4 * PAGE_SIZE
            || !idle
        {
            return Ok(0);
        }
        let first = offset / PAGE_SIZE;
        let served = self.hits_ahead(task, file, first, pages, count);
        if served == 0 {
            return Ok(0);
        }
        let end = first + served * pages;
        self.touch_file_times(file, served);
        // Each read marks its own pages and takes their drop-behind mark
        // off; over distinct pages, once over all of them is the same.
        let t = &mut self.tasks[task.index()];
        t.read_marked = Some((file, first));
        self.mark_read(task, file, first, end);
        self.cache.clear_dropbehind(file, first, end);
        self.read_served(task, file, end);
        Ok(served)
    }

    /// How many of the reads of `pages` pages each from page `first` of
    /// `file`, at most `count`, `read_hits` may serve: each lies in one
    /// valid run, within the file, and none would start an asynchronous
    /// readahead (readahead.rs: the first hole ahead of a sequential
    /// read's end, less than half a window away).
    fn hits_ahead(
        &self,
        task: TaskId,
        file: FileId,
        first: PageIndex,
        pages: u64,
        count: u64,
    ) -> u64 {
        let f = &self.cache.files[file.index()];
        let whole_pages = f.size / PAGE_SIZE;
        let mut served = count.min(whole_pages.saturating_sub(first) / pages);
        // Reads inside valid runs, each in one.
        let mut n = 0;
        let mut pos = first;
        while n < served {
            let Some((start, run)) = f.run_at(pos) else {
                break;
            };
            if run.flags & (PG_READING | PG_LOCKED) != 0 {
                break;
            }
            let fit = (start + run.len - pos) / pages;
            if fit == 0 {
                break;
            }
            let take = fit.min(served - n);
            n += take;
            pos += take * pages;
        }
        served = n;
        let t = &self.tasks[task.index()];
        if served == 0 || t.ra_file != Some(file) || self.cache.over_budget {
            return served;
        }
        // No read may start an asynchronous readahead. Nothing changes
        // the cache while they are served: the first hole ahead is the
        // same for all of them.
        let sequential_first = self.sequential_read(task, file, first);
        if served == 1 && !sequential_first {
            return served;
        }
        let dev = &self.devices[f.device.index()].config;
        let window = window_pages(dev.read_ahead_kb, pages);
        // Only a hole less than half a window past the last read's end
        // (`pos`) can start one.
        let near = (pos + window / 2).min(f.size.div_ceil(PAGE_SIZE));
        let Some(hole) = f.first_hole(pos, near) else {
            return served;
        };
        // Read i (ending at first + (i + 1) × pages) starts one when it is
        // sequential (all but maybe the first) and hole − end < window / 2,
        // that is end > hole − window / 2: from read
        // ⌊(hole − window / 2 − first) / pages⌋ on.
        let from = hole.saturating_sub(window / 2).saturating_sub(first) / pages;
        let from = if sequential_first { from } else { from.max(1) };
        from.min(served)
    }

    /// Serves a read whose pages (up to the end of the file) lie in one
    /// valid run, or that starts at or past the end: marks the run
    /// referenced and takes an ordinary read's drop-behind mark off, as
    /// Linux does, and moves the task's readahead position. False: pages
    /// are missing or being read, take the full path.
    fn read_from_one_run(&mut self, task: TaskId, file: FileId, offset: u64, len: u64) -> bool {
        let f = &self.cache.files[file.index()];
        let end = (offset + len).min(f.size);
        if offset >= end {
            return true;
        }
        let (first, last) = (offset / PAGE_SIZE, end.div_ceil(PAGE_SIZE));
        let Some((start, run)) = f.run_at(first) else {
            return false;
        };
        if start + run.len < last || run.flags & (PG_READING | PG_LOCKED) != 0 {
            return false;
        }
        self.mark_read(task, file, first, last);
        if run.flags & PG_DROPBEHIND != 0 {
            self.cache.clear_dropbehind(file, first, last);
        }
        self.read_served(task, file, last);
        true
    }

    /// A read of `first..last` is served: the task's readahead position
    /// moves.
    fn read_served(&mut self, task: TaskId, file: FileId, last: PageIndex) {
        self.tasks[task.index()].last_read = Some((file, last));
    }

    /// Accounts a cached read that a runtime served from its page map
    /// (page_map/), without calling `read`: marks the
    /// pages `first..end` that are still cached referenced, as `read`
    /// would have, and moves the task's readahead position. Runtimes may
    /// batch these notes (as Linux batches folio references per CPU), so a
    /// note can arrive after its pages have gone; those are skipped.
    pub fn note_cached_read(
        &mut self,
        task: TaskId,
        file: FileId,
        first: PageIndex,
        end: PageIndex,
    ) -> Result<(), EngineError> {
        if self.cache.files.get(file.index()).is_none() {
            return Err(EngineError::BadFile(file));
        }
        let t = self.tasks.task_mut(task)?;
        if first >= end {
            return Ok(());
        }
        t.last_read = Some((file, end));
        self.cache.mark_accessed(file, first, end);
        Ok(())
    }

    /// A read by `task` of `file` from byte `offset` begins: it will mark
    /// its pages accessed, except a first page the task's previous read of
    /// the file ended in (filemap_read marks a folio once for a reader
    /// going through it in small steps).
    fn start_read_marks(&mut self, task: TaskId, file: FileId, offset: u64) {
        let first = offset / PAGE_SIZE;
        let t = &mut self.tasks[task.index()];
        let same_page = t.last_read == Some((file, first + 1)) && !offset.is_multiple_of(PAGE_SIZE);
        t.read_marked = Some((file, first + same_page as u64));
    }

    /// The read in progress consumed valid pages `first..end`: marks those
    /// it has not marked yet.
    fn mark_read(&mut self, task: TaskId, file: FileId, first: PageIndex, end: PageIndex) {
        let t = &mut self.tasks[task.index()];
        let from = match t.read_marked {
            Some((f, p)) if f == file => p.max(first),
            _ => first,
        };
        if from >= end {
            return;
        }
        t.read_marked = Some((file, end));
        self.cache.mark_accessed(file, from, end);
    }

    /// Marks the pages now in `frames` referenced, as reads of them would
    /// have (for runtimes that serve cached reads from an index of their
    /// own; see frame_notes.rs). Frames beyond the budget are ignored.
    pub fn note_referenced_frames(&mut self, frames: &[u32]) {
        self.cache.frame_notes.note(frames);
    }

    pub(crate) fn continue_read(
        &mut self,
        now: Instant,
        task: TaskId,
    ) -> Result<Step, EngineError> {
        let Op::Read {
            handle,
            offset,
            len,
            ..
        } = self.tasks[task.index()].op.clone()
        else {
            unreachable!("continue_read on a task that is not reading");
        };
        let file = self.handle(handle)?.file;
        if self.read_from_one_run(task, file, offset, len) {
            return self.tasks.finish(task, Ok(Step::Done));
        }
        let end = (offset + len).min(self.cache.files[file.index()].size);
        let (first, last) = (offset / PAGE_SIZE, end.div_ceil(PAGE_SIZE));
        let f = &self.cache.files[file.index()];
        if f.run_at(first).is_none() {
            // A miss at the first page (a sequential reader past its
            // readahead): nothing cached to reference or wait for.
            return self.read_missing(now, task, file, first, first, last);
        }
        let missing = f.first_hole(first, last);
        let cached_end = missing.unwrap_or(last);
        let reading = f
            .runs_over(first, cached_end)
            .any(|(_, r)| r.flags & PG_READING != 0);
        self.cache.clear_dropbehind(file, first, cached_end);
        if reading {
            return Ok(self
                .tasks
                .wait_for(now, task, StallReason::ReadIo, WaitKey::FileIo(file)));
        }
        if self.cache.any_locked(file, first, cached_end) {
            // A writer is copying into a page: its frame may not hold the
            // page's data yet (page_cache/page_lock.rs).
            return Ok(self.tasks.wait_for(
                now,
                task,
                StallReason::PageLocked,
                WaitKey::FileIo(file),
            ));
        }
        self.mark_read(task, file, first, cached_end);
        let Some(p) = missing else {
            self.read_served(task, file, last);
            return self.tasks.finish(task, Ok(Step::Done));
        };
        self.read_missing(now, task, file, first, p, last)
    }

    /// Reads from the device the pages from `p`, the first uncached page
    /// of the task's read `first..last`, and waits for them.
    fn read_missing(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
        first: PageIndex,
        p: PageIndex,
        last: PageIndex,
    ) -> Result<Step, EngineError> {
        if let Some(e) = self.cache.files[file.index()].read_error.take() {
            return self.tasks.finish(task, Err(EngineError::Read(e)));
        }
        let sequential = self.sequential_read(task, file, first);
        let want = self.readahead_pages(file, sequential, p, last);
        if sequential {
            // A readahead window (Linux marks a page of it): the stream
            // reads ahead asynchronously from now on.
            self.tasks[task.index()].ra_file = Some(file);
        }
        if !self.reserve(now, want) && !self.reserve(now, 1) {
            return Ok(self
                .tasks
                .wait_for(now, task, StallReason::Memory, WaitKey::Memory));
        }
        let room = self.cache.free_pages();
        let pages = self.cache.files[file.index()]
            .hole_len(p, want.min(room))
            .max(1);
        self.cache
            .insert_pages(file, p, pages, PG_READING, false, &mut self.actions);
        self.submit_read(now, file, p, pages);
        Ok(self
            .tasks
            .wait_for(now, task, StallReason::ReadIo, WaitKey::FileIo(file)))
    }

    /// How many pages to read at a miss on page `p`: the rest of the request,
    /// or the readahead window for a sequential reader (one that starts at
    /// the beginning of the file or where it last stopped).
    fn readahead_pages(
        &self,
        file: FileId,
        sequential: bool,
        p: PageIndex,
        last: PageIndex,
    ) -> u64 {
        let f = &self.cache.files[file.index()];
        let dev = &self.devices[f.device.index()].config;
        let mut want = last - p;
        if sequential {
            want = want.max(dev.read_ahead_kb as u64 / 4);
        }
        let file_pages = f.size.div_ceil(PAGE_SIZE);
        want.min(file_pages - p).min(dev.max_request_pages()).max(1)
    }

    /// Whether a read of `first..` by `task` is sequential: it starts at
    /// the beginning of the file or where the task's last read ended.
    pub(crate) fn sequential_read(&self, task: TaskId, file: FileId, first: PageIndex) -> bool {
        first == 0 || self.tasks[task.index()].last_read == Some((file, first))
    }

    /// Before a read of `len` bytes at `offset`: when it is sequential,
    /// its pages are all cached or being read and the task's readahead
    /// has read a window of this file (`Task::ra_file`, where Linux would
    /// find its PG_readahead mark), reads ahead of it
    /// (`readahead_async`). A read with pages missing reads ahead
    /// synchronously instead (read_path.rs).
    pub(crate) fn readahead_before_read(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
        offset: u64,
        len: u64,
    ) {
        let f = &self.cache.files[file.index()];
        let end = (offset + len).min(f.size);
        if offset >= end {
            return;
        }
        let (first, last) = (offset / PAGE_SIZE, end.div_ceil(PAGE_SIZE));
        if self.tasks[task.index()].ra_file == Some(file)
            && self.sequential_read(task, file, first)
            && f.first_hole(first, last).is_none()
        {
            self.readahead_async(now, file, first, last);
        }
    }

    /// For a sequential read of `first..last`: when less than half a
    /// window ahead of it is cached or being read, start reading the next
    /// window from the first missing page. The window is `read_ahead_kb`,
    /// or twice the read if that is larger (Linux grows its window to the
    /// reads it sees).
    pub(crate) fn readahead_async(
        &mut self,
        now: Instant,
        file: FileId,
        first: PageIndex,
        last: PageIndex,
    ) {
        if self.cache.over_budget {
            return;
        }
        let f = &self.cache.files[file.index()];
        let dev = &self.devices[f.device.index()].config;
        let window = window_pages(dev.read_ahead_kb, last - first);
        let max_request = dev.max_request_pages();
        let file_pages = f.size.div_ceil(PAGE_SIZE);
        let Some(hole) = f.first_hole(last, (last + window).min(file_pages)) else {
            return;
        };
        if hole - last >= window / 2 {
            return;
        }
        let end = (hole + window).min(file_pages);
        let mut p = hole;
        while p < end {
            let f = &self.cache.files[file.index()];
            let Some(hole) = f.first_hole(p, end) else {
                return;
            };
            let want = (end - hole).min(max_request);
            let free = self.cache.free_pages();
            if free < want {
                self.cache.shrink(want - free, &mut self.actions);
            }
            let room = self.cache.free_pages().min(want);
            let pages = self.cache.files[file.index()].hole_len(hole, room);
            if pages == 0 {
                return;
            }
            self.cache
                .insert_pages(file, hole, pages, PG_READING, false, &mut self.actions);
            self.submit_read(now, file, hole, pages);
            self.stats.readahead_async_pages += pages;
            p = hole + pages;
        }
    }

    /// Reads pages that were inserted as PG_READING.
    pub(crate) fn submit_read(
        &mut self,
        now: Instant,
        file: FileId,
        first_page: PageIndex,
        pages: u64,
    ) {
        let at = (self.cache.files[file.index()].device, file);
        let span = (first_page, pages, pages * PAGE_SIZE);
        let req = self.io.request(at, IoDir::Read, span, None, false);
        self.issue_or_queue(now, req);
    }
}

#[cfg(test)]
mod tests {
    //! `read_hits` against `read` called as many times: the same pages,
    //! counters and positions, and it stops only where `read` would do
    //! more than copy out cached pages.
    use super::*;
    use crate::config::{Config, DeviceConfig};
    use crate::ids::DomainId;
    use crate::page_cache::{PageFlags, PG_ACTIVE, PG_DIRTY, PG_REFERENCED};
    use proptest::prelude::*;

    const FILE_PAGES: u64 = 512;

    /// What a stretch of the file holds: nothing, or pages with flags
    /// (not PG_LOCKED: a page is locked with page_cache/page_lock.rs's table).
    const KINDS: [Option<PageFlags>; 8] = [
        None,
        Some(0),
        Some(PG_REFERENCED),
        Some(PG_REFERENCED | PG_ACTIVE),
        Some(PG_ACTIVE),
        Some(PG_DIRTY),
        Some(PG_DROPBEHIND),
        Some(PG_READING),
    ];

    #[derive(Debug)]
    struct Setup {
        stretches: Vec<(u64, usize)>,
        readahead: bool,
        last_read: Option<PageIndex>,
        over_budget: bool,
    }

    /// An engine with one file laid out as `setup` says and a task that
    /// read it (or not) up to `last_read`.
    fn engine(setup: &Setup) -> (Engine, FileId, HandleId, TaskId) {
        let mut config = Config::default();
        config.set("memory", "64MiB").expect("a valid size");
        let mut e = Engine::new(config, Instant(0));
        let dev = e.add_device("d", DeviceConfig::default(), 100_000);
        let file = e
            .add_file(Instant(0), dev, DomainId(0), FILE_PAGES * PAGE_SIZE)
            .expect("the device exists");
        let handle = e.open(file).expect("the file exists");
        let task = e.add_task();
        let mut p = 0;
        for &(len, kind) in &setup.stretches {
            let len = len.min(FILE_PAGES - p);
            if let Some(flags) = KINDS[kind] {
                if len > 0 {
                    e.cache
                        .insert_pages(file, p, len, flags, false, &mut e.actions);
                }
            }
            p += len;
        }
        while e.poll_action().is_some() {}
        let t = &mut e.tasks[task.index()];
        t.ra_file = setup.readahead.then_some(file);
        t.last_read = setup.last_read.map(|p| (file, p));
        e.cache.over_budget = setup.over_budget;
        (e, file, handle, task)
    }

    /// Everything a read may change.
    fn state(e: &Engine, file: FileId, task: TaskId) -> String {
        let f = &e.cache.files[file.index()];
        let runs: Vec<_> = f.all_runs().collect();
        format!(
            "{runs:?} {:?} {} {} {} {} {} {:?} {:?} {:?} {:?}",
            f.counts(),
            f.last_use,
            e.cache.nr_cached,
            e.cache.nr_active,
            e.cache.nr_dirty,
            e.cache.nr_dontcache_dirty,
            e.stats(),
            e.cache.workingset,
            e.tasks[task.index()],
            e.eviction,
        )
    }

    fn setups() -> impl Strategy<Value = (Setup, u64, u64, u64)> {
        (
            prop::collection::vec((1..48u64, 0..KINDS.len()), 1..24),
            any::<bool>(),
            prop::option::of(0..FILE_PAGES),
            prop::bool::weighted(0.1),
            0..FILE_PAGES,
            1..4u64,
            1..96u64,
        )
            .prop_map(
                |(stretches, readahead, last_read, over_budget, first, pages, count)| {
                    let setup = Setup {
                        stretches,
                        readahead,
                        last_read,
                        over_budget,
                    };
                    (setup, first, pages, count)
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn read_hits_is_reads_one_after_another((setup, first, pages, count) in setups()) {
            let (mut a, file, ha, task) = engine(&setup);
            let (mut b, _, hb, _) = engine(&setup);
            let len = pages * PAGE_SIZE;
            let served = a.read_hits(task, ha, first * PAGE_SIZE, len, count).expect("valid");
            prop_assert!(served <= count);
            prop_assert!(a.poll_action().is_none(), "read_hits acted");
            for i in 0..served {
                let offset = (first + i * pages) * PAGE_SIZE;
                let step = b.read(Instant(i), task, hb, offset, len).expect("valid");
                prop_assert_eq!(step, Step::Done, "read {} of {} waits", i, served);
                prop_assert!(b.poll_action().is_none(), "read {} of {} acted", i, served);
            }
            prop_assert_eq!(state(&a, file, task), state(&b, file, task));
            // Single pages: it stopped short only before a read that does
            // more than copy out (a wait or an action), or at the end.
            let next = first + served * pages;
            if pages == 1 && served < count && next < FILE_PAGES {
                let step = b.read(Instant(served), task, hb, next * PAGE_SIZE, len).expect("valid");
                let acted = b.poll_action().is_some();
                prop_assert!(step != Step::Done || acted, "stopped before a plain hit at page {}", next);
            }
        }
    }
}
