//! The backing file's length: always a state the file passed through.
//!
//! A crash of the process that runs the cache (SIGKILL, an OOM kill, a
//! panic) loses the cache but not what the kernel was handed: every write
//! submitted lands, every length set stays. What the backing file then
//! holds must be a state the file passed through since its last sync: no
//! longer than it ever was, no byte it never held. The engine keeps that so
//! by what it asks for and in which order:
//!
//! - A write-back carries the file's bytes only (`IoRequest::bytes`): the
//!   partial last page ends at the file's length, so a write-back never
//!   leaves a page-rounded length with a zero tail.
//! - `disk_size` is the backing file's length as this engine made it: its
//!   length when added, grown by completed write-backs, set by the lengths
//!   it asks for (`Action::SetLength`, `Action::MakeDurable`).
//! - Past `disk_size` a file grows in order: the flusher writes the lowest
//!   waiting page there first (flusher/), so no page the file holds data
//!   in is skipped over and left reading zeros; and a device with
//!   `extending_writes = one-per-file` (the real runtime's) takes those
//!   writes one at a time, so none lands while a lower one has not
//!   (dispatch/extending.rs).
//! - A length is only set over written data: a truncation that shortens
//!   the file, or lengthens it with nothing waiting to be written past the
//!   backing file's end, sets it at once (`SetLength`, and the truncation
//!   waits for it); one that lengthens it over dirty pages leaves it to
//!   the next flush. A flush sets the length only when nothing past the
//!   backing file's end waits to be written or is being written
//!   (`durable_len`), else it leaves the length to the writes.
//! - While a length change is in flight, no write of the file starts: a
//!   truncation reaches the backing file in order with the writes.
//!
//! Linux: ext4's and XFS's on-disk size (i_disksize, di_size) advances as
//! data reaches the disk, for the same reason; `filemap` never writes past
//! i_size. Ours is stricter about holes (a power cut may show XFS's).

pub(crate) mod resizes;

use crate::action::{Action, IoErrorKind};
use crate::backing_len::resizes::Resizes;
use crate::dispatch::inflight::IoTable;
use crate::ids::{FileId, PAGE_SIZE};
use crate::page_cache::{CachedFile, PG_DIRTY};
use std::collections::VecDeque;

/// Whether a page of `f` past its backing file's end (from the page that
/// holds `disk_size`) is dirty or being written (`io`: the requests in
/// flight).
pub(crate) fn waits_past_backing_end(f: &CachedFile, io: &IoTable) -> bool {
    let from = f.disk_size / PAGE_SIZE;
    let dirty = f.counts().dirty > 0
        && (f.next_dirty(from).is_some() || f.flags(from).is_some_and(|fl| fl & PG_DIRTY != 0));
    let writing = f.inflight_writes.iter().any(|id| {
        io.inflight
            .get(id)
            .is_some_and(|w| w.req.first_page + w.req.pages as u64 > from)
    });
    dirty || writing
}

/// The length a flush of `f` sets its backing file to: the file's, unless
/// data past the backing file's end is still to land (then None: the
/// writes grow it).
pub(crate) fn durable_len(f: &CachedFile, io: &IoTable) -> Option<u64> {
    (!waits_past_backing_end(f, io)).then_some(f.size)
}

/// Whether the truncation of `f` to `len` should set the backing file's
/// length now: it differs, and either shortens it or lengthens it with
/// nothing past its end waiting to be written.
pub(crate) fn resize_now(f: &CachedFile, io: &IoTable, len: u64) -> bool {
    let disk = f.disk_size;
    len < disk || (len > disk && !waits_past_backing_end(f, io))
}

impl Resizes {
    /// Asks the runtime to set `file`'s (`f`'s) backing length to `len`;
    /// no write of the file starts until it is done. Returns the
    /// request's id.
    pub fn request(
        &mut self,
        file: FileId,
        f: &mut CachedFile,
        len: u64,
        out: &mut VecDeque<Action>,
    ) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.pending.insert(id, (file, len));
        f.resizing = Some(id);
        out.push_back(Action::SetLength { id, file, len });
        id
    }

    /// The result of length change `id`, once reported (taken once).
    pub fn take(&mut self, id: u64) -> Option<Result<(), IoErrorKind>> {
        self.done.remove(&id)
    }

    /// Length change `id` ended with `result` (kept for `take`): returns
    /// its file and the length it asked for; None for an unknown id.
    pub fn finished(&mut self, id: u64, result: Result<(), IoErrorKind>) -> Option<(FileId, u64)> {
        let (file, len) = self.pending.remove(&id)?;
        self.done.insert(id, result);
        Some((file, len))
    }
}

#[cfg(test)]
mod tests {
    use super::durable_len;
    use crate::action::WbReason;
    use crate::*;

    const NOW: Instant = Instant(1_000_000);

    /// An engine with one device and one file of `size` bytes on it, and a
    /// task that holds a handle.
    fn engine(size: u64) -> (Engine, FileId, HandleId, TaskId) {
        let mut e = Engine::new(Config::default(), Instant(0));
        let dev = e.add_device("d", DeviceConfig::default(), 100_000);
        let file = e.add_file(Instant(0), dev, DomainId(0), size).unwrap();
        let h = e.open(file).unwrap();
        let task = e.add_task();
        (e, file, h, task)
    }

    /// Carries out `e`'s actions at once (every request completes, every
    /// length is set, every flush is done), writes copied: the write
    /// requests' (first page, pages, bytes), in order.
    fn drain(e: &mut Engine) -> Vec<(u64, u32, u64)> {
        let mut writes = Vec::new();
        while let Some(action) = e.poll_action() {
            match action {
                Action::Submit(req) => {
                    if req.dir == IoDir::Write {
                        writes.push((req.first_page, req.pages, req.bytes));
                    }
                    e.io_complete(NOW, req.id, Ok(()));
                }
                Action::SetLength { id, .. } => e.length_set(NOW, id, Ok(())),
                Action::MakeDurable { id, .. } => e.durable_done(NOW, id, Ok(())),
                _ => {}
            }
        }
        writes
    }

    /// Runs an operation of `task` to its end, carrying out what it asks.
    fn run(
        e: &mut Engine,
        task: TaskId,
        op: impl FnOnce(&mut Engine) -> Result<Step, EngineError>,
    ) -> Vec<(u64, u32, u64)> {
        let mut step = op(e).unwrap();
        let mut writes = drain(e);
        while step != Step::Done {
            step = e.resume(NOW, task).unwrap();
            writes.extend(drain(e));
        }
        writes
    }

    #[test]
    fn a_write_back_of_a_partial_last_page_ends_at_the_files_length() {
        let (mut e, file, h, task) = engine(0);
        run(&mut e, task, |e| e.write(NOW, task, h, 0, 10_000));
        let writes = run(&mut e, task, |e| e.fsync(NOW, task, h));
        assert_eq!(writes, [(0, 3, 10_000)]);
        assert_eq!(e.cache.files[file.index()].disk_size, 10_000);
        e.check_invariants();
    }

    /// Past the backing file's end the flusher writes the lowest waiting
    /// page first, wherever its cursor is: a page the file holds data in
    /// is never skipped over (and left reading zeros after a crash).
    #[test]
    fn the_flusher_grows_a_file_from_its_lowest_waiting_page() {
        let (mut e, file, h, task) = engine(0);
        run(&mut e, task, |e| e.write(NOW, task, h, 0, 8 * PAGE_SIZE));
        run(&mut e, task, |e| e.fsync(NOW, task, h));
        // Pages 8..10 then 20..24 dirty; the cursor beyond the first.
        run(&mut e, task, |e| {
            e.write(NOW, task, h, 8 * PAGE_SIZE, 2 * PAGE_SIZE)
        });
        run(&mut e, task, |e| {
            e.write(NOW, task, h, 20 * PAGE_SIZE, 4 * PAGE_SIZE)
        });
        e.cache.files[file.index()].writeback_index = 16;
        let wb = e.cache.files[file.index()].wb;
        e.wbs[wb.index()].flusher.start_all(WbReason::Vmscan);
        let dev = e.cache.files[file.index()].device;
        e.pump(NOW, dev);
        let writes = drain(&mut e);
        assert_eq!(writes.first(), Some(&(8, 2, 2 * PAGE_SIZE)), "{writes:?}");
        assert!(writes.contains(&(20, 4, 4 * PAGE_SIZE)), "{writes:?}");
        assert_eq!(e.cache.files[file.index()].disk_size, 24 * PAGE_SIZE);
    }

    /// A truncation that shortens the backing file sets its length before
    /// it returns, and no write of the file starts meanwhile; one that
    /// lengthens it over data not yet written leaves the length to the
    /// next flush, which sets it once that data has landed.
    #[test]
    fn lengths_are_set_over_written_data_only() {
        let (mut e, file, h, task) = engine(0);
        run(&mut e, task, |e| e.write(NOW, task, h, 0, 4 * PAGE_SIZE));
        run(&mut e, task, |e| e.fsync(NOW, task, h));
        // Shorter: the task waits for the length change.
        let step = e.set_len(NOW, task, h, 100).unwrap();
        assert!(matches!(step, Step::Sleep(s) if s.reason == StallReason::Sync));
        let pending: Vec<Action> = std::iter::from_fn(|| e.poll_action())
            .filter(|a| matches!(a, Action::SetLength { .. }))
            .collect();
        let id = match pending.as_slice() {
            [Action::SetLength {
                id,
                file: f,
                len: 100,
            }] if *f == file => *id,
            other => panic!("{other:?}"),
        };
        assert!(e.cache.files[file.index()].resizing.is_some());
        e.length_set(NOW, id, Ok(()));
        assert_eq!(e.resume(NOW, task).unwrap(), Step::Done);
        assert_eq!(e.cache.files[file.index()].disk_size, 100);
        // A page past the end waits dirty: lengthening leaves the length.
        run(&mut e, task, |e| e.write(NOW, task, h, PAGE_SIZE, 10));
        assert_eq!(e.set_len(NOW, task, h, 8 * PAGE_SIZE).unwrap(), Step::Done);
        assert!(
            std::iter::from_fn(|| e.poll_action()).all(|a| !matches!(a, Action::SetLength { .. }))
        );
        assert_eq!(
            durable_len(&e.cache.files[file.index()], &e.io),
            None,
            "page 1 is still to land"
        );
        // The fsync writes it, then sets the length with its flush.
        let mut lens = Vec::new();
        let mut step = e.fsync(NOW, task, h).unwrap();
        loop {
            while let Some(action) = e.poll_action() {
                match action {
                    Action::Submit(req) => e.io_complete(NOW, req.id, Ok(())),
                    Action::MakeDurable { id, len, .. } => {
                        lens.push(len);
                        e.durable_done(NOW, id, Ok(()));
                    }
                    _ => {}
                }
            }
            if step == Step::Done {
                break;
            }
            step = e.resume(NOW, task).unwrap();
        }
        assert_eq!(lens, [Some(8 * PAGE_SIZE)]);
        assert_eq!(e.cache.files[file.index()].disk_size, 8 * PAGE_SIZE);
        e.check_invariants();
    }

    /// A failed length change fails the truncation, and the next flush
    /// sets the length.
    #[test]
    fn a_failed_length_change_is_reported_and_set_again_by_the_next_flush() {
        let (mut e, file, h, task) = engine(0);
        run(&mut e, task, |e| e.write(NOW, task, h, 0, 4 * PAGE_SIZE));
        run(&mut e, task, |e| e.fsync(NOW, task, h));
        assert!(matches!(e.set_len(NOW, task, h, 0), Ok(Step::Sleep(_))));
        while let Some(action) = e.poll_action() {
            if let Action::SetLength { id, .. } = action {
                e.length_set(NOW, id, Err(IoErrorKind::Io));
            }
        }
        assert_eq!(
            e.resume(NOW, task),
            Err(EngineError::Resize(IoErrorKind::Io))
        );
        assert!(e.cache.files[file.index()].resizing.is_none());
        assert_eq!(durable_len(&e.cache.files[file.index()], &e.io), Some(0));
    }
}
