//! Page locks: a write with `deferred_copy` leaves its pages locked until
//! `write_end` (the runtime copies meanwhile, outside its lock). Locked
//! pages are not written back, read through the engine or truncated away;
//! those wait or skip, and go on at `write_end`.

mod harness;

use harness::Harness;
use wb_engine::*;

const PAGES: u64 = 64;
const LEN: u64 = PAGES * PAGE_SIZE;

/// An engine with one device and one file opened by three tasks; `LEN`
/// bytes written and synced first when `cached`.
fn setup(cached: bool) -> (Harness, [TaskId; 3], HandleId) {
    let mut config = Config::default();
    config.set("memory", "64MiB").unwrap();
    let mut e = Engine::new(config, Instant(0));
    let dev = e.add_device("d", DeviceConfig::default(), 100_000);
    let tasks = [e.add_task(), e.add_task(), e.add_task()];
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = e.open(file).unwrap();
    let mut hs = Harness::new(e, 10_000);
    if cached {
        let t = tasks[0];
        hs.run(t, |e, now| e.write(now, t, h, 0, LEN)).unwrap();
        hs.run(t, |e, now| e.fsync(now, t, h)).unwrap();
    }
    hs.actions.clear();
    hs.stalls.clear();
    (hs, tasks, h)
}

/// Starts a deferred-copy write of the whole file by `task`: done at once,
/// its pages locked.
fn write_locked(hs: &mut Harness, task: TaskId, h: HandleId) {
    let step = hs
        .engine
        .write_with(hs.now, task, h, 0, LEN, WriteFlags::DEFERRED_COPY)
        .unwrap();
    assert_eq!(step, Step::Done);
    hs.drain();
    hs.engine.check_invariants();
}

fn write_end(hs: &mut Harness, task: TaskId) -> Vec<TaskId> {
    hs.engine.write_end(hs.now, task).unwrap();
    let woken = hs.drain();
    hs.engine.check_invariants();
    woken
}

#[test]
fn an_fsync_does_not_write_locked_pages_until_write_end() {
    let (mut hs, [writer, syncer, _], h) = setup(false);
    write_locked(&mut hs, writer, h);
    assert_eq!(hs.engine.stats().dirty_pages, PAGES);
    let step = hs.engine.fsync(hs.now, syncer, h).unwrap();
    assert!(matches!(step, Step::Sleep(_)), "{step:?}");
    hs.drain();
    assert_eq!(hs.engine.stats().writeback_pages, 0, "nothing written yet");
    assert!(hs.inflight.is_empty());
    write_end(&mut hs, writer);
    assert_eq!(
        hs.engine.stats().writeback_pages,
        PAGES,
        "written at write_end"
    );
    hs.run(syncer, |e, now| e.resume(now, syncer)).unwrap();
    assert_eq!(hs.written_pages, PAGES);
    assert_eq!(hs.engine.stats().dirty_pages, 0);
}

#[test]
fn a_read_of_a_locked_page_waits_for_write_end() {
    let (mut hs, [writer, reader, _], h) = setup(false);
    write_locked(&mut hs, writer, h);
    let step = hs.engine.read(hs.now, reader, h, 0, PAGE_SIZE).unwrap();
    let Step::Sleep(stall) = step else {
        panic!("the read must wait: {step:?}");
    };
    assert_eq!(stall.reason, StallReason::PageLocked);
    assert!(stall.wakeable);
    let woken = write_end(&mut hs, writer);
    assert!(woken.contains(&reader), "write_end wakes the reader");
    assert_eq!(hs.engine.resume(hs.now, reader).unwrap(), Step::Done);
    assert_eq!(hs.engine.stats().stall(StallReason::PageLocked).count, 1);
}

#[test]
fn a_truncation_waits_for_write_end_then_drops_the_pages() {
    let (mut hs, [writer, truncator, _], h) = setup(true);
    write_locked(&mut hs, writer, h);
    let step = hs.engine.set_len(hs.now, truncator, h, PAGE_SIZE).unwrap();
    let Step::Sleep(stall) = step else {
        panic!("the truncation must wait: {step:?}");
    };
    assert_eq!(stall.reason, StallReason::PageLocked);
    // Nothing went: the writer's frames are still its own.
    assert_eq!(hs.engine.stats().cached_pages, PAGES);
    let woken = write_end(&mut hs, writer);
    assert!(woken.contains(&truncator));
    // The pages go, then the backing file is cut, which it waits for.
    let step = hs.engine.resume(hs.now, truncator).unwrap();
    assert!(
        matches!(step, Step::Sleep(s) if s.reason == StallReason::Sync),
        "{step:?}"
    );
    assert!(hs.drain().contains(&truncator), "the cut wakes it");
    assert_eq!(hs.engine.resume(hs.now, truncator).unwrap(), Step::Done);
    hs.drain();
    assert_eq!(hs.engine.stats().cached_pages, 1);
    assert_eq!(hs.engine.file_size(FileId(0)), Some(PAGE_SIZE));
    hs.engine.check_invariants();
}

#[test]
fn overlapping_writers_keep_the_pages_locked_until_both_end() {
    let (mut hs, [a, b, syncer], h) = setup(true);
    let written_before = hs.written_pages;
    write_locked(&mut hs, a, h);
    // b locks the second half too (a write of the second half).
    let half = LEN / 2;
    let step = hs
        .engine
        .write_with(hs.now, b, h, half, half, WriteFlags::DEFERRED_COPY)
        .unwrap();
    assert_eq!(step, Step::Done);
    hs.drain();
    hs.engine.check_invariants();
    write_end(&mut hs, a);
    let step = hs.engine.fsync(hs.now, syncer, h).unwrap();
    assert!(matches!(step, Step::Sleep(_)));
    hs.drain();
    // The first half went; the second is b's until it ends.
    assert_eq!(hs.engine.stats().writeback_pages, PAGES / 2);
    write_end(&mut hs, b);
    hs.run(syncer, |e, now| e.resume(now, syncer)).unwrap();
    assert_eq!(hs.engine.stats().dirty_pages, 0);
    assert_eq!(hs.written_pages - written_before, PAGES);
}

#[test]
fn write_end_refuses_unknown_tasks_repeats_harmlessly_and_uncached_writes_never_lock() {
    let (mut hs, [writer, _, _], h) = setup(true);
    write_locked(&mut hs, writer, h);
    assert_eq!(
        hs.engine.write_end(hs.now, TaskId(99)),
        Err(EngineError::BadTask(TaskId(99)))
    );
    // A write_end with nothing locked is harmless.
    write_end(&mut hs, writer);
    write_end(&mut hs, writer);
    // An uncached write never locks (its inline flush needs the pages).
    let flags = WriteFlags {
        dontcache: true,
        deferred_copy: true,
    };
    let step = hs.engine.write_with(hs.now, writer, h, 0, LEN, flags);
    assert!(step.is_ok());
    hs.drain();
    hs.engine.check_invariants();
    let reader = TaskId(1);
    let step = hs.engine.read(hs.now, reader, h, 0, LEN).unwrap();
    assert_eq!(step, Step::Done, "nothing locked");
}
