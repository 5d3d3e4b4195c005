//! Durability marks: a file whose backing changed is flushed by the next
//! sync (`Action::MakeDurable`), only then, and a failed flush is reported
//! and retried, never claimed.

mod harness;

use harness::Harness;
use wb_engine::*;

const MIB: u64 = 1 << 20;

fn setup() -> (Harness, FileId, HandleId, TaskId) {
    let mut config = Config::default();
    config.set("memory", "64MiB").unwrap();
    let mut e = Engine::new(config, Instant(0));
    let dev = e.add_device("d", DeviceConfig::default(), 100_000);
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = e.open(file).unwrap();
    let task = e.add_task();
    (Harness::new(e, 10_000), file, h, task)
}

fn flush_ids(hs: &Harness) -> Vec<(u64, FileId)> {
    hs.actions
        .iter()
        .filter_map(|a| match *a {
            Action::MakeDurable { id, file, .. } => Some((id, file)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_sync_flushes_what_landed_and_nothing_else() {
    let (mut hs, file, h, task) = setup();
    hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
    assert_eq!(hs.flushes, 0, "nothing landed: no flush");
    hs.run(task, |e, now| e.write(now, task, h, 0, MIB))
        .unwrap();
    assert!(!hs.engine.file_unsynced(file), "dirty, not landed yet");
    hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
    assert_eq!(hs.flushes, 1);
    assert_eq!(flush_ids(&hs)[0].1, file);
    assert!(!hs.engine.file_unsynced(file));
    hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
    assert_eq!(hs.flushes, 1, "nothing new: no second flush");
    hs.engine.check_invariants();
}

#[test]
fn writes_landed_by_the_flusher_are_flushed_by_sync() {
    let (mut hs, file, h, task) = setup();
    hs.run(task, |e, now| e.write(now, task, h, 0, MIB))
        .unwrap();
    // Periodic writeback lands the data long before anyone syncs.
    hs.idle_until(Instant(40_000_000_000));
    assert_eq!(hs.engine.stats().dirty_pages, 0);
    assert!(hs.engine.file_unsynced(file), "landed, not flushed");
    hs.run(task, |e, now| e.sync(now, task)).unwrap();
    assert_eq!(hs.flushes, 1, "sync flushes files with nothing dirty left");
    assert!(!hs.engine.file_unsynced(file));
}

#[test]
fn a_failed_flush_fails_the_sync_and_is_tried_again() {
    let (mut hs, file, h, task) = setup();
    hs.run(task, |e, now| e.write(now, task, h, 0, MIB))
        .unwrap();
    hs.fail_flushes = Some(IoErrorKind::Io);
    let err = hs.run(task, |e, now| e.fsync(now, task, h)).unwrap_err();
    assert_eq!(err, EngineError::Durability(IoErrorKind::Io));
    assert!(hs.engine.file_unsynced(file), "not durable: still marked");
    hs.fail_flushes = None;
    hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
    assert_eq!(hs.flushes, 2, "the next fsync flushed again");
    assert!(!hs.engine.file_unsynced(file));
}

#[test]
fn a_write_landing_during_a_flush_keeps_the_file_marked() {
    let (mut hs, file, h, task) = setup();
    let writer = hs.engine.add_task();
    hs.run(task, |e, now| e.write(now, task, h, 0, MIB))
        .unwrap();
    hs.held_flushes = Some(Vec::new());
    let now = hs.now;
    assert!(matches!(hs.engine.fsync(now, task, h), Ok(Step::Sleep(_))));
    // The sync's writes land; resumed, it asks for its flush (held).
    hs.idle_until(hs.now + 1_000_000_000);
    let now = hs.now;
    assert!(matches!(hs.engine.resume(now, task), Ok(Step::Sleep(_))));
    hs.drain();
    let held = hs.held_flushes.take().expect("held");
    assert_eq!(held.len(), 1, "one flush asked for");
    // Another write lands before the flush is reported done.
    hs.run(writer, |e, now| e.write(now, writer, h, 2 * MIB, 4096))
        .unwrap();
    hs.idle_until(hs.now + 40_000_000_000);
    assert_eq!(hs.engine.stats().dirty_pages, 0, "the new write landed");
    hs.engine.durable_done(hs.now, held[0], Ok(()));
    assert!(
        hs.engine.file_unsynced(file),
        "a change that landed after the flush began is not claimed durable"
    );
    let now = hs.now;
    assert_eq!(hs.engine.resume(now, task), Ok(Step::Done));
    hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
    assert!(!hs.engine.file_unsynced(file), "the next fsync flushes it");
}
