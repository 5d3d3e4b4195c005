//! `Engine::invalidate_range`: a range of a file's cached pages dropped
//! before the runtime changes the backing file under it (fallocate).

mod harness;

use harness::Harness;
use wb_engine::*;

const MIB: u64 = 1 << 20;

fn engine() -> (Harness, TaskId, TaskId, HandleId) {
    let mut config = Config::default();
    config.set("memory", "64MiB").unwrap();
    let mut e = Engine::new(config, Instant(0));
    let dev = e.add_device("d", DeviceConfig::default(), 100_000);
    let writer = e.add_task();
    let other = e.add_task();
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = e.open(file).unwrap();
    (Harness::new(e, 10_000), writer, other, h)
}

#[test]
fn dirty_and_clean_pages_in_the_range_go_and_the_rest_stays() {
    let (mut hs, writer, _, h) = engine();
    hs.run(writer, |e, now| e.write(now, writer, h, 0, 16 * PAGE_SIZE))
        .unwrap();
    assert_eq!(hs.engine.stats().dirty_pages, 16);
    // Bytes 4 pages + 100 .. 7 pages + 100: pages 4 to 7, the partial ends
    // included.
    let offset = 4 * PAGE_SIZE + 100;
    hs.run(writer, |e, now| {
        e.invalidate_range(now, writer, h, offset, 3 * PAGE_SIZE)
    })
    .unwrap();
    let stats = hs.engine.stats();
    assert_eq!(stats.cached_pages, 12);
    assert_eq!(
        stats.dirty_pages, 12,
        "the range's dirty pages are discarded"
    );
    assert_eq!(
        hs.engine.file_size(FileId(0)),
        Some(16 * PAGE_SIZE),
        "the length stays"
    );
    hs.engine.check_invariants();
    // To the end of the file and past it.
    hs.run(writer, |e, now| {
        e.invalidate_range(now, writer, h, 10 * PAGE_SIZE, u64::MAX)
    })
    .unwrap();
    assert_eq!(hs.engine.stats().cached_pages, 6);
    hs.engine.check_invariants();
}

#[test]
fn pages_under_writeback_are_waited_for() {
    let (mut hs, writer, other, h) = engine();
    hs.run(writer, |e, now| e.write(now, writer, h, 0, MIB))
        .unwrap();
    let step = hs.engine.fsync(hs.now, other, h).unwrap();
    assert!(
        matches!(step, Step::Sleep(_)),
        "the fsync waits for its writes"
    );
    hs.drain();
    assert!(hs.engine.stats().writeback_pages > 0, "writes in flight");
    let start = hs.now;
    hs.run(writer, |e, now| e.invalidate_range(now, writer, h, 0, MIB))
        .unwrap();
    assert!(hs.now > start, "the invalidation waited");
    assert!(hs.stalls.iter().all(|s| s.reason == StallReason::Sync));
    let stats = hs.engine.stats();
    assert_eq!((stats.writeback_pages, stats.cached_pages), (0, 0));
    hs.engine.check_invariants();
}

#[test]
fn an_unknown_handle_is_an_error() {
    let (mut hs, writer, _, _) = engine();
    let err = hs
        .engine
        .invalidate_range(hs.now, writer, HandleId(99), 0, PAGE_SIZE)
        .unwrap_err();
    assert!(matches!(err, EngineError::BadHandle(_)), "{err:?}");
}
