//! A commit (an fsync of a few pages) is never held by wbt, as a read is
//! not: on a device that wbt has scaled down to one write at a time, the
//! commit's write goes out beside the flusher's write in flight instead
//! of waiting for it.

mod harness;

use harness::Harness;
use wb_engine::*;

const MIB: u64 = 1 << 20;

/// A copy's task and file, and a database's, on one device configured
/// with `knob = value`, in a 64 MiB cache; the device takes
/// `ns_per_page` a page.
struct CopyAndDb {
    hs: Harness,
    dev: DeviceId,
    copy: (TaskId, HandleId),
    db: (TaskId, HandleId, FileId),
}

fn copy_and_db(knob: &str, value: &str, ns_per_page: u64) -> CopyAndDb {
    let mut config = Config::default();
    config.set("memory", "64MiB").unwrap();
    let mut e = Engine::new(config, Instant(0));
    let mut dc = DeviceConfig::default();
    dc.set(knob, value).unwrap();
    let dev = e.add_device("d", dc, 100_000);
    let copy = e.add_task();
    let db = e.add_task();
    let mut hs = Harness::new(e, ns_per_page);
    let a = hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
    let b = hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
    let ha = hs.engine.open(a).unwrap();
    let hb = hs.engine.open(b).unwrap();
    CopyAndDb {
        hs,
        dev,
        copy: (copy, ha),
        db: (db, hb, b),
    }
}

/// Whether the commit's write was submitted while the flusher's write was
/// in flight, on a device scaled to depth 1; `commit_bytes` is how much
/// the committing task wrote before its fsync.
fn commit_goes_beside_the_flusher(commit_bytes: u64) -> bool {
    // 20 µs a page: a 1 MiB write takes 5 ms.
    let CopyAndDb {
        mut hs,
        dev,
        copy: (copy, ha),
        db: (db, hb, b),
    } = copy_and_db("queue_depth", "1", 20_000);
    // A copy writes on, while another process's reads are slow (20 ms):
    // wbt scales down to one write at a time.
    for i in 0..1000 {
        hs.run(copy, |e, now| e.write(now, copy, ha, i * MIB, MIB))
            .unwrap();
        let now = hs.now;
        hs.engine
            .note_foreign_reads(now, dev, 10, 20_000_000)
            .unwrap();
        hs.idle_until(now + 2_000_000);
        if hs.engine.stats().devices[0].wbt_max_depth == 1 && !hs.inflight.is_empty() {
            break;
        }
    }
    let stats = hs.engine.stats();
    assert_eq!(stats.devices[0].wbt_max_depth, 1, "scaled down");
    assert!(!hs.inflight.is_empty(), "the flusher has a write in flight");
    let in_flight = hs.inflight.len();
    hs.run(db, |e, now| e.write(now, db, hb, 0, commit_bytes))
        .unwrap();
    let before = hs.actions.len();
    let now = hs.now;
    let step = hs.engine.fsync(now, db, hb).unwrap();
    assert!(
        matches!(step, Step::Sleep(_)),
        "the fsync waits for its write"
    );
    hs.drain();
    let submitted = hs.actions[before..]
        .iter()
        .any(|a| matches!(a, Action::Submit(r) if r.file == b && r.dir == IoDir::Write));
    hs.engine.check_invariants();
    submitted && hs.inflight.len() > in_flight
}

#[test]
fn a_commit_goes_out_beside_the_flusher_s_write() {
    assert!(commit_goes_beside_the_flusher(8 << 10));
}

#[test]
fn a_larger_fsync_waits_for_its_turn() {
    assert!(!commit_goes_beside_the_flusher(256 << 10));
}

/// One commit of the database task: an 8 KiB write and its fsync, whose
/// flush the device takes `flush_ns` to do.
fn commit(hs: &mut Harness, db: TaskId, file: HandleId, flush_ns: u64) {
    hs.run(db, |e, now| e.write(now, db, file, 0, 8 << 10))
        .unwrap();
    hs.held_flushes = Some(Vec::new());
    let now = hs.now;
    let mut step = hs.engine.fsync(now, db, file).unwrap();
    // The commit's write goes out; its flush is asked for once it lands.
    while hs.held_flushes.as_ref().is_some_and(|h| h.is_empty()) {
        assert!(matches!(step, Step::Sleep(_)), "waits for its flush");
        let now = hs.now;
        hs.idle_until(now + 10_000);
        step = hs.engine.resume(hs.now, db).unwrap();
    }
    let asked = hs.now;
    hs.idle_until(asked + flush_ns);
    for id in hs.held_flushes.take().unwrap() {
        let now = hs.now;
        hs.engine.durable_done(now, id, Ok(()));
    }
    hs.drain();
    while let Step::Sleep(_) = hs.engine.resume(hs.now, db).unwrap() {
        let now = hs.now;
        hs.idle_until(now + 10_000);
    }
    hs.drain();
}

/// wbt's pace step after a copy and a database's commits have run side
/// by side for a while, each commit's flush taking `flush_ns`. The
/// commits' writes are fast either way (one page in 1 µs).
fn pace_step_beside_commits(flush_ns: u64) -> u32 {
    let CopyAndDb {
        mut hs,
        copy: (copy, ha),
        db: (db, hb, _),
        ..
    } = copy_and_db("wbt_lat_usec", "1000", 1_000);
    for i in 0..400 {
        hs.run(copy, |e, now| e.write(now, copy, ha, i * MIB, MIB))
            .unwrap();
        commit(&mut hs, db, hb, flush_ns);
        hs.engine.check_invariants();
    }
    hs.engine.stats().devices[0].wbt_pace_step
}

#[test]
fn commits_slowed_in_their_flush_pace_the_copy() {
    // The whole commit is what wbt watches: 3 ms against a 1 ms target,
    // though the commit's write takes microseconds.
    assert_eq!(pace_step_beside_commits(3_000_000), MAX_PACE_STEP);
    // Flushes of 100 µs: commits within the target, nothing paced.
    assert_eq!(pace_step_beside_commits(100_000), 0);
}

/// The writes to `file` in `actions`: (marked `commit`, not marked).
fn writes_to(actions: &[Action], file: FileId) -> (usize, usize) {
    let marks = actions.iter().filter_map(|a| match a {
        Action::Submit(r) if r.file == file && r.dir == IoDir::Write => Some(r.commit),
        _ => None,
    });
    marks.fold((0, 0), |(c, p), m| if m { (c + 1, p) } else { (c, p + 1) })
}

/// A runtime may carry out a commit's writes on the caller's thread: the
/// engine marks them (`IoRequest::commit`), and only them: not a larger
/// fsync's, not the flusher's.
#[test]
fn the_writes_of_a_commit_are_marked_and_no_others() {
    let CopyAndDb {
        mut hs,
        copy: (copy, ha),
        db: (db, hb, b),
        ..
    } = copy_and_db("queue_depth", "32", 1_000);
    // copy_and_db adds the copy's file first, then the database's.
    let a = FileId(0);
    assert_eq!(b, FileId(1));
    // 8 MiB of a copy, written back by the flusher (dirty_expire).
    let before = hs.actions.len();
    for i in 0..8 {
        hs.run(copy, |e, now| e.write(now, copy, ha, i * MIB, MIB))
            .unwrap();
    }
    let later = hs.now + 40_000_000_000;
    hs.idle_until(later);
    let (marked, plain) = writes_to(&hs.actions[before..], a);
    assert_eq!(marked, 0, "flusher writes marked as a commit's");
    assert!(plain > 0, "the copy was written back");
    // A commit: 8 KiB and its fsync.
    hs.run(db, |e, now| e.write(now, db, hb, 0, 8 << 10))
        .unwrap();
    let before = hs.actions.len();
    hs.run(db, |e, now| e.fsync(now, db, hb)).unwrap();
    assert_eq!(
        writes_to(&hs.actions[before..], b),
        (1, 0),
        "the commit's write"
    );
    // Not a commit: 256 KiB (64 pages, over COMMIT_WRITE_MAX_PAGES).
    const { assert!(64 > COMMIT_WRITE_MAX_PAGES) };
    hs.run(db, |e, now| e.write(now, db, hb, 0, 256 << 10))
        .unwrap();
    let before = hs.actions.len();
    hs.run(db, |e, now| e.fsync(now, db, hb)).unwrap();
    let (marked, plain) = writes_to(&hs.actions[before..], b);
    assert_eq!(marked, 0, "a larger fsync's writes marked as a commit's");
    assert!(plain > 0, "the fsync wrote");
    hs.engine.check_invariants();
}
