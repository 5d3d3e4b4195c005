//! Space reserved at write time (space/): a write past the backing
//! filesystem's free space fails with NoSpace after one write-back that
//! learns the real free space, and nothing of it is written; reservations
//! are used by write-back and returned by truncation.

mod harness;

use harness::Harness;
use wb_engine::*;

const MIB: u64 = 1 << 20;

/// An engine with one file on one device whose free space is reported as
/// `free_bytes` (None: never reported).
fn engine_with(free_bytes: Option<u64>) -> (Harness, DeviceId, TaskId, HandleId) {
    let mut config = Config::default();
    config.set("memory", "64MiB").unwrap();
    let mut e = Engine::new(config, Instant(0));
    let dev = e.add_device("d", DeviceConfig::default(), 100_000);
    if let Some(bytes) = free_bytes {
        e.set_free_space(Instant(0), dev, bytes).unwrap();
    }
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = e.open(file).unwrap();
    let task = e.add_task();
    let mut hs = Harness::new(e, 10_000);
    hs.free_space = free_bytes;
    (hs, dev, task, h)
}

fn engine(free_bytes: u64) -> (Harness, DeviceId, TaskId, HandleId) {
    engine_with(Some(free_bytes))
}

fn device(hs: &Harness) -> DeviceStats {
    hs.engine.stats().devices[0].clone()
}

#[test]
fn a_write_past_the_free_space_fails_after_one_write_back() {
    // 4 MiB free: 1024 pages, a margin of 16.
    let (mut hs, dev, task, h) = engine(4 * MIB);
    hs.run(task, |e, now| e.write(now, task, h, 0, 2 * MIB))
        .unwrap();
    assert_eq!(device(&hs).space_reserved_pages, 512);
    hs.engine.check_invariants();
    // What the first write allocates is gone from the filesystem once it
    // is written back: the report after the flush says so.
    hs.free_space = Some(2 * MIB);
    let err = hs
        .run(task, |e, now| e.write(now, task, h, 2 * MIB, 3 * MIB))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "no space left on the device: the write needs 3.0MiB of new blocks, 2.0MiB are free \
         for it (after what dirty data holds reserved and a margin)"
    );
    assert!(matches!(
        hs.stalls.last(),
        Some(Stall {
            reason: StallReason::Sync,
            ..
        })
    ));
    let d = device(&hs);
    assert_eq!((d.enospc_writes, d.space_flushes), (1, 1));
    assert_eq!(
        d.space_reserved_pages, 0,
        "the flush used every reservation"
    );
    assert_eq!(
        hs.engine.stats().dirty_pages,
        0,
        "and wrote everything back"
    );
    assert!(hs.statfs_asked >= 1);
    assert_eq!(
        hs.engine.file_size(FileId(0)),
        Some(2 * MIB),
        "nothing of it written"
    );
    hs.engine.check_invariants();
    // Room reported again: the same write goes through.
    hs.engine.set_free_space(hs.now, dev, 8 * MIB).unwrap();
    hs.run(task, |e, now| e.write(now, task, h, 2 * MIB, 3 * MIB))
        .unwrap();
    assert_eq!(hs.engine.file_size(FileId(0)), Some(5 * MIB));
    hs.engine.check_invariants();
}

#[test]
fn a_too_pessimistic_estimate_is_corrected_by_the_write_back() {
    // The report is old: 1 MiB free then, 64 MiB now (another process
    // freed space). The flush learns it and the write goes through.
    let (mut hs, _, task, h) = engine(MIB);
    hs.free_space = Some(64 * MIB);
    hs.run(task, |e, now| e.write(now, task, h, 0, 4 * MIB))
        .unwrap();
    let d = device(&hs);
    assert_eq!((d.enospc_writes, d.space_flushes), (0, 1));
    assert_eq!(d.space_reserved_pages, 1024);
    hs.engine.check_invariants();
}

#[test]
fn reservations_are_used_by_write_back_and_returned_by_truncation() {
    let (mut hs, _, task, h) = engine(64 * MIB);
    hs.run(task, |e, now| e.write(now, task, h, 0, MIB))
        .unwrap();
    assert_eq!(device(&hs).space_reserved_pages, 256);
    hs.run(task, |e, now| e.set_len(now, task, h, 0)).unwrap();
    assert_eq!(
        device(&hs).space_reserved_pages,
        0,
        "discarded pages give theirs back"
    );
    hs.engine.check_invariants();
    hs.run(task, |e, now| e.write(now, task, h, 0, MIB))
        .unwrap();
    hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
    assert_eq!(
        device(&hs).space_reserved_pages,
        0,
        "written back: allocated"
    );
    // Overwriting what is on the backing file reserves nothing.
    hs.run(task, |e, now| e.write(now, task, h, 0, MIB))
        .unwrap();
    assert_eq!(device(&hs).space_reserved_pages, 0);
    // Extending it does.
    hs.run(task, |e, now| e.write(now, task, h, MIB, 4096))
        .unwrap();
    assert_eq!(device(&hs).space_reserved_pages, 1);
    hs.engine.check_invariants();
}

#[test]
fn without_a_report_nothing_is_limited() {
    let (mut hs, _, task, h) = engine_with(None);
    hs.run(task, |e, now| e.write(now, task, h, 0, 16 * MIB))
        .unwrap();
    assert_eq!(device(&hs).space_reserved_pages, 0);
    assert_eq!(hs.statfs_asked, 0);
    let err = hs
        .engine
        .set_free_space(hs.now, DeviceId(9), MIB)
        .unwrap_err();
    assert!(matches!(err, EngineError::BadDevice(_)));
}
