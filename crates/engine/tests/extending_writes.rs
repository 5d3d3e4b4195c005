//! `extending_writes = one-per-file`: a file's write-backs that make it
//! longer go to the device one at a time, in order; writes within its
//! length and other files' writes are not held, and every sync ends. With
//! the default (`parallel`) they go side by side as before.

mod harness;

use harness::Harness;
use wb_engine::*;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// Files: two that grow from empty (`growing`) and one written within its
/// length (`within`).
struct Files {
    growing: [FileId; 2],
    within: FileId,
}

/// A device of 4 slots taking requests of at most 64 KiB (so 1 MiB of a
/// file is 16 writes), `extending` as the knob says, and the three files.
fn setup(extending: &str) -> (Harness, TaskId, Files, [HandleId; 3]) {
    setup_with(extending, &[])
}

/// As `setup`, with these cache knobs.
fn setup_with(extending: &str, knobs: &[(&str, &str)]) -> (Harness, TaskId, Files, [HandleId; 3]) {
    let device_knobs = [("max_sectors_kb", "64"), ("extending_writes", extending)];
    let (mut hs, dev, task) = harness::setup(knobs, &device_knobs);
    hs.device_slots = vec![Instant(0); 4];
    let now = hs.now;
    let a = hs.engine.add_file(now, dev, DomainId(0), 0).unwrap();
    let b = hs.engine.add_file(now, dev, DomainId(0), 0).unwrap();
    let c = hs.engine.add_file(now, dev, DomainId(0), MIB).unwrap();
    let handles = [a, b, c].map(|f| hs.engine.open(f).unwrap());
    let files = Files {
        growing: [a, b],
        within: c,
    };
    (hs, task, files, handles)
}

/// Writes 1 MiB to each file (whole pages: nothing is read first).
fn write_all(hs: &mut Harness, task: TaskId, handles: [HandleId; 3]) {
    for h in handles {
        hs.run(task, |e, now| e.write(now, task, h, 0, MIB))
            .unwrap();
    }
}

/// The writes submitted, as (handed over, completes, request), with the
/// engine's `extends` checked against a backing length kept here: grown
/// by each write as it completes, from the files' lengths when added.
fn writes(hs: &Harness, files: &Files) -> Vec<(Instant, Instant, IoRequest)> {
    let writes: Vec<_> = hs
        .submitted
        .iter()
        .filter(|(_, _, r)| r.dir == IoDir::Write)
        .cloned()
        .collect();
    // Events in time order, a completion before a submission at the same
    // instant (the runtime reports it, then carries out what follows).
    let mut events: Vec<(Instant, u8, usize)> = Vec::new();
    for (i, (at, done, _)) in writes.iter().enumerate() {
        events.push((*at, 1, i));
        events.push((*done, 0, i));
    }
    events.sort();
    let mut len = std::collections::BTreeMap::from([(files.within, MIB)]);
    for (_, kind, i) in events {
        let req = &writes[i].2;
        let end = req.first_page * PAGE_SIZE + req.bytes;
        let backing = len.entry(req.file).or_insert(0);
        if kind == 0 {
            *backing = (*backing).max(end);
        } else {
            assert_eq!(req.extends, end > *backing, "{req:?}: extends");
        }
    }
    writes
}

/// The most writes of `file` making it longer that were in flight at once.
fn most_extending_at_once(writes: &[(Instant, Instant, IoRequest)], file: FileId) -> usize {
    let spans: Vec<(Instant, Instant)> = writes
        .iter()
        .filter(|(_, _, r)| r.file == file && r.extends)
        .map(|&(at, done, _)| (at, done))
        .collect();
    spans
        .iter()
        .map(|&(at, _)| spans.iter().filter(|&&(s, e)| s <= at && at < e).count())
        .max()
        .unwrap_or(0)
}

/// Whether a write of `file` (extending as `extends` says) was in flight
/// at some instant a write of `other` making it longer was too.
fn overlaps(
    writes: &[(Instant, Instant, IoRequest)],
    file: FileId,
    extends: bool,
    other: FileId,
) -> bool {
    let of = |f: FileId, x: bool| -> Vec<(Instant, Instant)> {
        writes
            .iter()
            .filter(|(_, _, r)| r.file == f && r.extends == x)
            .map(|&(at, done, _)| (at, done))
            .collect()
    };
    let theirs = of(other, true);
    of(file, extends)
        .iter()
        .any(|&(s, e)| theirs.iter().any(|&(s2, e2)| s < e2 && s2 < e))
}

/// Runs a sync of everything written; returns the writes, checked.
fn written_by_sync(extending: &str) -> (Harness, Files, Vec<(Instant, Instant, IoRequest)>) {
    let (mut hs, task, files, handles) = setup(extending);
    write_all(&mut hs, task, handles);
    hs.run(task, |e, now| e.sync(now, task)).unwrap();
    let stats = hs.engine.stats();
    assert_eq!(stats.dirty_pages + stats.writeback_pages, 0, "all written");
    hs.engine.check_invariants();
    let writes = writes(&hs, &files);
    (hs, files, writes)
}

#[test]
fn one_per_file_sends_a_files_extending_writes_one_at_a_time_in_order() {
    let (hs, files, writes) = written_by_sync("one-per-file");
    for file in files.growing {
        let mine: Vec<&IoRequest> = writes
            .iter()
            .map(|(_, _, r)| r)
            .filter(|r| r.file == file)
            .collect();
        assert_eq!(mine.len(), 16, "1 MiB in 64 KiB writes");
        assert!(mine.iter().all(|r| r.extends), "each grows the file");
        assert_eq!(most_extending_at_once(&writes, file), 1);
        let firsts: Vec<u64> = mine.iter().map(|r| r.first_page).collect();
        assert!(firsts.is_sorted(), "in order: {firsts:?}");
        // Each goes when the one before it completes.
        let spans: Vec<(Instant, Instant)> = writes
            .iter()
            .filter(|(_, _, r)| r.file == file)
            .map(|&(at, done, _)| (at, done))
            .collect();
        assert!(spans.windows(2).all(|w| w[1].0 == w[0].1), "{spans:?}");
    }
    // Writes within a length and other files' are not held.
    assert!(writes
        .iter()
        .all(|(_, _, r)| r.file != files.within || !r.extends));
    let [a, b] = files.growing;
    assert!(
        overlaps(&writes, b, true, a),
        "another file's grows meanwhile"
    );
    assert!(overlaps(&writes, files.within, false, a));
    assert_eq!(hs.written_pages, 3 * MIB / PAGE_SIZE);
}

#[test]
fn parallel_sends_them_side_by_side() {
    let (_, files, writes) = written_by_sync("parallel");
    for file in files.growing {
        assert!(
            most_extending_at_once(&writes, file) > 1,
            "the device's slots are used"
        );
    }
}

/// The same sync with the knob set at run time, before and after: the
/// held writes go once the one in flight completes, even with the knob
/// back to `parallel` meanwhile.
#[test]
fn the_knob_changes_at_run_time_and_nothing_stays_held() {
    let (mut hs, task, files, handles) = setup("parallel");
    write_all(&mut hs, task, handles);
    let dev = DeviceId(0);
    hs.engine
        .set_device_knob(dev, "extending_writes", "one-per-file")
        .unwrap();
    let mut step = hs.engine.sync(hs.now, task).unwrap();
    hs.drain();
    let handed: usize = hs
        .submitted
        .iter()
        .filter(|(_, _, r)| r.file == files.growing[0])
        .count();
    assert_eq!(handed, 1, "the rest is held");
    hs.engine
        .set_device_knob(dev, "extending_writes", "parallel")
        .unwrap();
    while step != Step::Done {
        let deadline = hs.now + 1_000_000_000;
        hs.idle_until(deadline);
        step = hs.engine.resume(hs.now, task).unwrap();
    }
    hs.drain();
    let stats = hs.engine.stats();
    assert_eq!(stats.dirty_pages + stats.writeback_pages, 0);
    hs.engine.check_invariants();
}

/// The flusher's own writes (periodic writeback) are held the same way,
/// and an fsync of a file whose writes are held ends.
#[test]
fn the_flusher_and_an_fsync_behind_held_writes_finish() {
    let knobs = [
        ("dirty_expire_centisecs", "1"),
        ("dirty_writeback_centisecs", "1"),
    ];
    let (mut hs, task, files, handles) = setup_with("one-per-file", &knobs);
    write_all(&mut hs, task, handles);
    // Some periodic writeback (from 10 ms, each write 3.2 ms), then an
    // fsync of the first file while its writes are held.
    hs.ns_per_page = 200_000;
    let until = hs.now + 12_000_000;
    hs.idle_until(until);
    let handed: u64 = hs
        .submitted
        .iter()
        .filter(|&&(_, done, _)| done > hs.now)
        .map(|(_, _, r)| r.pages as u64)
        .sum();
    let writing = hs.engine.stats().writeback_pages;
    assert!(handed > 0, "the flusher writes");
    assert!(writing > handed, "and holds some: {writing} > {handed}");
    let h = handles[0];
    hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
    let until = hs.now + 1_000_000_000;
    hs.idle_until(until);
    let stats = hs.engine.stats();
    assert_eq!(stats.dirty_pages + stats.writeback_pages, 0);
    hs.engine.check_invariants();
    let writes = writes(&hs, &files);
    for file in files.growing {
        assert_eq!(most_extending_at_once(&writes, file), 1);
    }
}

/// A rewrite of pages the backing file holds does not extend it; a write
/// of a page past its end does, even when that write's first page is
/// inside (KiB-sized file end).
#[test]
fn extends_is_past_the_backing_length_only() {
    let (mut hs, task, files, handles) = setup("one-per-file");
    let [a, _] = files.growing;
    let h = handles[0];
    hs.run(task, |e, now| e.write(now, task, h, 0, 10 * KIB))
        .unwrap();
    hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
    hs.run(task, |e, now| e.write(now, task, h, 0, 4 * KIB))
        .unwrap();
    hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
    hs.run(task, |e, now| e.write(now, task, h, 8 * KIB, 4 * KIB))
        .unwrap();
    hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
    let ours: Vec<(u64, u64, bool)> = hs
        .submitted
        .iter()
        .map(|(_, _, r)| r)
        .filter(|r| r.file == a && r.dir == IoDir::Write)
        .map(|r| (r.first_page, r.bytes, r.extends))
        .collect();
    assert_eq!(
        ours,
        [(0, 10 * KIB, true), (0, 4 * KIB, false), (2, 4 * KIB, true)]
    );
}

/// A failed extending write lets the next one go (it still extends the
/// file): the sync reports the error and ends, and the next one writes it
/// all.
#[test]
fn a_failed_extending_write_releases_the_next() {
    let (mut hs, task, files, handles) = setup("one-per-file");
    let h = handles[0];
    hs.run(task, |e, now| e.write(now, task, h, 0, MIB))
        .unwrap();
    hs.fail_writes = Some(IoErrorKind::Io);
    let failed = hs.run(task, |e, now| e.fsync(now, task, h));
    assert_eq!(failed, Err(EngineError::WriteBack(IoErrorKind::Io)));
    let tried = hs.submitted.len();
    assert_eq!(tried, 16, "every write was tried, one after another");
    hs.fail_writes = None;
    hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
    let stats = hs.engine.stats();
    assert_eq!(stats.dirty_pages + stats.writeback_pages, 0);
    hs.engine.check_invariants();
    let writes: Vec<_> = hs.submitted.clone();
    assert_eq!(most_extending_at_once(&writes, files.growing[0]), 1);
    assert!(writes.iter().all(|(_, _, r)| r.extends));
}
