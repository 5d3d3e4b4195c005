//! The engine driven directly, as a runtime would, with exact outcomes.

mod harness;

use harness::Harness;
use wb_engine::*;

const MIB: u64 = 1 << 20;

fn engine(memory: &str, device: DeviceConfig) -> (Engine, DeviceId) {
    let mut config = Config::default();
    config.set("memory", memory).unwrap();
    let mut engine = Engine::new(config, Instant(0));
    let dev = engine.add_device("d", device, 100_000);
    (engine, dev)
}

#[test]
fn fsync_cleans_everything_dirtied_before_it() {
    let (mut e, dev) = engine("64MiB", DeviceConfig::default());
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = e.open(file).unwrap();
    let task = e.add_task();
    let mut hs = Harness::new(e, 10_000);
    hs.run(task, |e, now| e.write(now, task, h, 0, 3 * MIB + 100))
        .unwrap();
    assert_eq!(hs.engine.stats().dirty_pages, 769);
    assert_eq!(hs.engine.file_size(file), Some(3 * MIB + 100));
    hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
    let s = hs.engine.stats();
    assert_eq!((s.dirty_pages, s.writeback_pages), (0, 0));
    assert_eq!(s.written_pages, 769);
    assert_eq!(
        s.written_by(WbReason::Sync),
        769,
        "all written by the sync itself"
    );
    hs.engine.check_invariants();
}

#[test]
fn sync_is_not_livelocked_by_a_writer_that_keeps_dirtying() {
    let (mut e, dev) = engine("256MiB", DeviceConfig::default());
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = e.open(file).unwrap();
    let writer = e.add_task();
    let syncer = e.add_task();
    let mut hs = Harness::new(e, 50_000);
    hs.run(writer, |e, now| e.write(now, writer, h, 0, 8 * MIB))
        .unwrap();
    // Start the sync, then keep dirtying the same range while it runs.
    let mut step = hs.engine.fsync(hs.now, syncer, h).unwrap();
    let mut rounds = 0;
    while let Step::Sleep(stall) = step {
        rounds += 1;
        assert!(rounds < 1000, "sync never finished");
        hs.run(writer, |e, now| e.write(now, writer, h, 0, MIB))
            .unwrap();
        hs.idle_until(stall.until.min(hs.now + 1_000_000));
        step = hs.engine.resume(hs.now, syncer).unwrap();
    }
    hs.engine.check_invariants();
}

#[test]
fn writeback_error_is_reported_once_per_handle_and_data_stays_dirty() {
    let (mut e, dev) = engine("64MiB", DeviceConfig::default());
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h1 = e.open(file).unwrap();
    let h2 = e.open(file).unwrap();
    let task = e.add_task();
    let mut hs = Harness::new(e, 10_000);
    hs.run(task, |e, now| e.write(now, task, h1, 0, 64 * 1024))
        .unwrap();
    hs.fail_writes = Some(IoErrorKind::Io);
    let err = hs.run(task, |e, now| e.fsync(now, task, h1)).unwrap_err();
    assert_eq!(err, EngineError::WriteBack(IoErrorKind::Io));
    assert_eq!(
        hs.engine.stats().dirty_pages,
        16,
        "failed pages are not marked clean"
    );
    // The other handle sees the error too, once.
    hs.fail_writes = None;
    let err = hs.run(task, |e, now| e.fsync(now, task, h2)).unwrap_err();
    assert_eq!(err, EngineError::WriteBack(IoErrorKind::Io));
    hs.run(task, |e, now| e.fsync(now, task, h2)).unwrap();
    hs.run(task, |e, now| e.fsync(now, task, h1)).unwrap();
    assert_eq!(hs.engine.stats().dirty_pages, 0, "the retry wrote them");
    hs.engine.check_invariants();
}

#[test]
fn memory_never_exceeds_budget_and_writers_wait_for_reclaim() {
    let mut config = Config::default();
    config.set("memory", "8MiB").unwrap();
    config.set("dirty_ratio", "100").unwrap();
    config.set("dirty_background_ratio", "90").unwrap();
    // The 2007 throttle looks at a limit of all memory only now and then:
    // the cache fills with dirty pages and pages under writeback before
    // it does, so the writer must wait for reclaim.
    config.set("dirty_throttle", "global-2007").unwrap();
    let mut e = Engine::new(config, Instant(0));
    let dev = e.add_device("d", DeviceConfig::default(), 100_000);
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = e.open(file).unwrap();
    let task = e.add_task();
    let mut hs = Harness::new(e, 20_000);
    for i in 0..8 {
        hs.run(task, |e, now| e.write(now, task, h, i * 4 * MIB, 4 * MIB))
            .unwrap();
        assert!(hs.engine.cached_pages() <= hs.engine.memory_pages());
        hs.engine.check_invariants();
    }
    let s = hs.engine.stats();
    // The writer waited for reclaim, each wait bounded.
    let memory = s.stall(StallReason::Memory);
    assert!(memory.count > 0, "no reclaim wait: {memory:?}");
    assert!(memory.max_ns <= EVENT_WAIT_MAX_NS, "{memory:?}");
    assert!(s.cached_peak_pages <= 2048);
}

#[test]
fn throttle_pauses_are_bounded_and_counted() {
    let (mut e, dev) = engine("64MiB", DeviceConfig::default());
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = e.open(file).unwrap();
    let task = e.add_task();
    // A slow device: 1 ms per page (4 MB/s).
    let mut hs = Harness::new(e, 1_000_000);
    hs.run(task, |e, now| e.write(now, task, h, 0, 40 * MIB))
        .unwrap();
    let pauses: Vec<_> = hs
        .stalls
        .iter()
        .filter(|s| s.reason == StallReason::DirtyThrottle)
        .collect();
    assert!(
        !pauses.is_empty(),
        "a writer far faster than its device is throttled"
    );
    let s = hs.engine.stats();
    assert_eq!(
        s.stall(StallReason::DirtyThrottle).count,
        pauses.len() as u64
    );
    assert!(s.stall(StallReason::DirtyThrottle).max_ns <= MAX_PAUSE_NS);
    assert!(
        s.dirty_peak_pages + s.writeback_peak_pages
            <= hs.engine.hard_limit_pages() + hs.engine.dirty_slack_pages()
    );
}

#[test]
fn periodic_writeback_writes_expired_data() {
    let (mut e, dev) = engine("64MiB", DeviceConfig::default());
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = e.open(file).unwrap();
    let task = e.add_task();
    let mut hs = Harness::new(e, 10_000);
    // Some writeout history, so the device's share of the thresholds is all of them
    // (a device that never wrote has a share of 0 and is "over" at once, as in Linux).
    hs.run(task, |e, now| e.write(now, task, h, 0, MIB))
        .unwrap();
    hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
    hs.run(task, |e, now| e.write(now, task, h, MIB, MIB))
        .unwrap();
    // Under the background threshold: nothing is written until it expires (30 s).
    hs.idle_until(Instant(29 * 1_000_000_000));
    assert_eq!(hs.engine.stats().dirty_pages, 256);
    hs.idle_until(Instant(36 * 1_000_000_000));
    let s = hs.engine.stats();
    assert_eq!(s.dirty_pages, 0);
    assert_eq!(s.written_by(WbReason::Periodic), 256);
}

#[test]
fn background_writeback_starts_above_threshold_and_stops_below() {
    let (mut e, dev) = engine("64MiB", DeviceConfig::default());
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = e.open(file).unwrap();
    let task = e.add_task();
    let mut hs = Harness::new(e, 10_000);
    // Background threshold: 10% of 16384 pages = 1638 pages.
    hs.run(task, |e, now| e.write(now, task, h, 0, 12 * MIB))
        .unwrap();
    // The flusher's periodic wake-up (5 s) picks up what writers left over the threshold.
    hs.idle_until(Instant(6_000_000_000));
    let s = hs.engine.stats();
    assert!(s.written_by(WbReason::Background) > 0);
    assert!(
        s.dirty_pages <= s.bg_thresh_pages,
        "background writeback goes below the threshold: {s:?}"
    );
    assert!(
        s.dirty_pages + 128 >= s.bg_thresh_pages,
        "and stops soon after: {}",
        s.dirty_pages
    );
}

#[test]
fn partial_write_to_a_page_on_disk_reads_it_first() {
    let (mut e, dev) = engine("64MiB", DeviceConfig::default());
    let file = e.add_file(Instant(0), dev, DomainId(0), 8192).unwrap();
    let h = e.open(file).unwrap();
    let task = e.add_task();
    let mut hs = Harness::new(e, 10_000);
    hs.run(task, |e, now| e.write(now, task, h, 100, 10))
        .unwrap();
    let s = hs.engine.stats();
    assert_eq!(s.devices[0].reads, 1);
    assert_eq!(s.stall(StallReason::ReadIo).count, 1);
    hs.run(task, |e, now| e.write(now, task, h, 4096, 4096))
        .unwrap();
    assert_eq!(
        hs.engine.stats().devices[0].reads,
        1,
        "a whole-page write needs no read"
    );
}

#[test]
fn bad_calls_are_errors_not_panics() {
    let (mut e, dev) = engine("64MiB", DeviceConfig::default());
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = e.open(file).unwrap();
    let task = e.add_task();
    assert!(matches!(
        e.write(Instant(0), task, h, u64::MAX - 1, 10),
        Err(EngineError::OutOfRange { .. })
    ));
    assert!(matches!(
        e.write(Instant(0), task, HandleId(99), 0, 10),
        Err(EngineError::BadHandle(_))
    ));
    assert!(matches!(
        e.resume(Instant(0), task),
        Err(EngineError::NothingToResume(_))
    ));
    assert!(matches!(
        e.write(Instant(0), TaskId(42), h, 0, 10),
        Err(EngineError::BadTask(_))
    ));
}

#[test]
fn sync_with_nothing_to_write_returns_at_once() {
    let (mut e, dev) = engine("64MiB", DeviceConfig::default());
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = e.open(file).unwrap();
    let task = e.add_task();
    assert_eq!(e.sync(Instant(0), task), Ok(Step::Done));
    assert_eq!(e.fsync(Instant(0), task, h), Ok(Step::Done));
}

#[test]
fn set_len_drops_pages_past_the_end_without_writing_them() {
    let (mut e, dev) = engine("64MiB", DeviceConfig::default());
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = e.open(file).unwrap();
    let task = e.add_task();
    let mut hs = Harness::new(e, 10_000);
    hs.run(task, |e, now| e.write(now, task, h, 0, 64 * 1024))
        .unwrap();
    hs.run(task, |e, now| e.set_len(now, task, h, 5000))
        .unwrap();
    let s = hs.engine.stats();
    assert_eq!(
        s.dirty_pages, 2,
        "pages 0 and 1 stay; 14 are dropped unwritten"
    );
    assert_eq!(s.cached_pages, 2);
    assert_eq!(hs.engine.file_size(file), Some(5000));
    hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
    assert_eq!(hs.engine.stats().written_pages, 2);
    // Growing only changes the length.
    hs.run(task, |e, now| e.set_len(now, task, h, 1 << 20))
        .unwrap();
    assert_eq!(hs.engine.file_size(file), Some(1 << 20));
    hs.engine.check_invariants();
}

/// Reads 8 KiB at 0 (readahead caches pages 0..32), optionally notes a
/// cached read of pages 2..32 as a runtime's own index would, then reads
/// page 32: whether page 40 got cached shows whether it counted as sequential.
fn page_40_cached_after(note: bool) -> bool {
    let (mut e, dev) = engine("64MiB", DeviceConfig::default());
    let file = e.add_file(Instant(0), dev, DomainId(0), 1 << 20).unwrap();
    let h = e.open(file).unwrap();
    let task = e.add_task();
    let mut hs = Harness::new(e, 10_000);
    hs.run(task, |e, now| e.read(now, task, h, 0, 8192))
        .unwrap();
    assert!(hs.engine.page_frame(file, 31).is_some(), "readahead");
    assert!(hs.engine.page_frame(file, 32).is_none());
    if note {
        hs.engine.note_cached_read(task, file, 2, 32).unwrap();
    }
    hs.run(task, |e, now| e.read(now, task, h, 32 * 4096, 4096))
        .unwrap();
    hs.engine.page_frame(file, 40).is_some()
}

#[test]
fn cached_reads_noted_by_a_runtime_keep_readahead_sequential() {
    assert!(page_40_cached_after(true), "noted: a sequential reader");
    assert!(!page_40_cached_after(false), "not noted: a random read");
    let (mut e, dev) = engine("64MiB", DeviceConfig::default());
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let task = e.add_task();
    assert_eq!(
        e.note_cached_read(task, FileId(7), 0, 1),
        Err(EngineError::BadFile(FileId(7)))
    );
    assert_eq!(
        e.note_cached_read(TaskId(9), file, 0, 1),
        Err(EngineError::BadTask(TaskId(9)))
    );
    assert_eq!(e.note_cached_read(task, file, 5, 1), Ok(()), "empty range");
}

#[test]
fn pages_leaving_the_cache_are_reported_in_order() {
    let (mut e, dev) = engine("64MiB", DeviceConfig::default());
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = e.open(file).unwrap();
    let task = e.add_task();
    let mut hs = Harness::new(e, 10_000);
    hs.run(task, |e, now| e.write(now, task, h, 0, 5 * 4096))
        .unwrap();
    assert!(hs.unmapped.is_empty(), "nothing left the cache yet");
    hs.run(task, |e, now| e.set_len(now, task, h, 4096 + 10))
        .unwrap();
    assert_eq!(
        hs.unmapped,
        vec![(FileId(0), 2, 5)],
        "the pages past the new end, in order"
    );
}

#[test]
fn only_idle_files_are_evicted_and_they_leave_nothing() {
    let (e, dev) = engine("64MiB", DeviceConfig::default());
    let mut e = e;
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = e.open(file).unwrap();
    let task = e.add_task();
    let mut hs = Harness::new(e, 10_000);
    hs.run(task, |e, now| e.write(now, task, h, 0, 3 * 4096))
        .unwrap();
    assert!(!hs.engine.file_idle(file), "open and dirty");
    assert_eq!(hs.engine.evict_file(file), Err(EngineError::FileBusy(file)));
    hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
    assert!(!hs.engine.file_idle(file), "still open");
    hs.engine.close(h).unwrap();
    assert!(hs.engine.file_idle(file));
    assert!(hs.unmapped.is_empty());
    hs.engine.evict_file(file).unwrap();
    hs.drain();
    assert_eq!(hs.unmapped, vec![(file, 0, 3)]);
    assert_eq!(hs.engine.stats().cached_pages, 0);
    assert!(!hs.engine.file_idle(file), "evicted once");
    // A closed handle's slot serves the next open.
    let other = hs.engine.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    assert_eq!(hs.engine.open(other).unwrap(), h);
    hs.engine.check_invariants();
}

#[test]
fn frames_noted_referenced_get_a_second_chance_in_reclaim() {
    const NOTED: std::ops::Range<u64> = 300..316;
    let survivors = |note: bool| {
        let (mut e, dev) = engine("4MiB", DeviceConfig::default());
        let a = e.add_file(Instant(0), dev, DomainId(0), 8 << 20).unwrap();
        let b = e.add_file(Instant(0), dev, DomainId(0), 8 << 20).unwrap();
        let (ha, hb) = (e.open(a).unwrap(), e.open(b).unwrap());
        let task = e.add_task();
        let mut hs = Harness::new(e, 10_000);
        let read = |hs: &mut Harness, h, pages: std::ops::Range<u64>| {
            for p in pages {
                hs.run(task, |e, now| e.read(now, task, h, p * 4096, 4096))
                    .unwrap();
            }
        };
        // A fills most of the 1024-page cache; B's first reads make the
        // clock hand clear every page's referenced bit once (read-in pages
        // start referenced), and reclaim A's first pages.
        read(&mut hs, ha, 0..768);
        read(&mut hs, hb, 0..300);
        assert!(NOTED.clone().all(|p| hs.engine.page_frame(a, p).is_some()));
        if note {
            let frames: Vec<u32> = NOTED.map(|p| hs.engine.page_frame(a, p).unwrap()).collect();
            hs.engine.note_referenced_frames(&frames);
        }
        // More of B pushes A's pages out, in order.
        read(&mut hs, hb, 300..700);
        hs.engine.check_invariants();
        assert!(
            hs.engine.page_frame(a, NOTED.end + 50).is_none(),
            "the clock went past the noted pages"
        );
        NOTED
            .filter(|&p| hs.engine.page_frame(a, p).is_some())
            .count()
    };
    assert_eq!(
        survivors(false),
        0,
        "not noted: reclaimed with their neighbours"
    );
    assert_eq!(survivors(true), 16, "noted: a second chance");
}

#[test]
fn copy_in_covers_the_written_bytes_in_order_before_any_write_of_them() {
    // A small cache, so the writer is throttled and its pages are written
    // back while it writes.
    let (mut e, dev) = engine("8MiB", DeviceConfig::default());
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = e.open(file).unwrap();
    let task = e.add_task();
    let mut hs = Harness::new(e, 20_000);
    let (offset, len) = (50, 6 * MIB + 100);
    hs.run(task, |e, now| e.write(now, task, h, offset, len))
        .unwrap();
    let mut next = offset;
    let mut copied_pages = std::collections::BTreeSet::new();
    for action in &hs.actions {
        match *action {
            Action::CopyIn {
                task: t,
                file: f,
                pos,
                len,
                ..
            } => {
                assert_eq!((t, f, pos), (task, file, next), "contiguous, in order");
                assert!(len > 0);
                copied_pages.extend(pos / 4096..(pos + len).div_ceil(4096));
                next = pos + len;
            }
            Action::Submit(ref req) if req.dir == IoDir::Write => {
                for p in req.first_page..req.first_page + req.pages as u64 {
                    assert!(
                        copied_pages.contains(&p),
                        "page {p} written before its copy-in"
                    );
                }
            }
            _ => {}
        }
    }
    assert_eq!(next, offset + len, "every byte is copied once");
    hs.engine.check_invariants();
}

#[test]
fn unknown_ids_are_errors_not_panics() {
    let mut e = Engine::new(Config::default(), Instant(0));
    let dev = e.add_device("d", DeviceConfig::default(), 100_000);
    let now = Instant(0);
    assert_eq!(
        e.add_file(now, DeviceId(5), DomainId(0), 0),
        Err(EngineError::BadDevice(DeviceId(5)))
    );
    assert_eq!(
        e.add_file(now, dev, DomainId(9), 0),
        Err(EngineError::BadDomain(DomainId(9)))
    );
    assert_eq!(e.open(FileId(7)), Err(EngineError::BadFile(FileId(7))));
    assert_eq!(e.file_size(FileId(7)), None);
    assert_eq!(e.page_frame(FileId(7), 0), None);
    assert!(!e.file_idle(FileId(7)));
    assert!(!e.release_file(FileId(7)));
    assert_eq!(
        e.evict_file(FileId(7)),
        Err(EngineError::BadFile(FileId(7)))
    );
    assert!(e.device_config(DeviceId(3)).is_none());
    assert_eq!(
        e.note_foreign_reads(now, DeviceId(3), 10, 1_000_000),
        Err(EngineError::BadDevice(DeviceId(3)))
    );
    assert_eq!(
        e.set_stable_writes_required(DeviceId(3), true),
        Err(EngineError::BadDevice(DeviceId(3)))
    );
    let err = e
        .set_device_knob(DeviceId(3), "wbt_lat_usec", "0")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid value '0' for wbt_lat_usec: no device 3"
    );
    // An evicted file's id is retired: opening it again is an error.
    let file = e.add_file(now, dev, DomainId(0), 0).unwrap();
    e.evict_file(file).unwrap();
    assert_eq!(e.open(file), Err(EngineError::BadFile(file)));
    assert_eq!(e.evict_file(file), Err(EngineError::BadFile(file)));
    e.check_invariants();
}

#[test]
fn the_2007_limit_holds_a_small_cache_near_its_threshold() {
    // 16 MiB: threshold 819 pages; a fixed 1024-page rate limit let the
    // writer run a whole 4 MiB past it between looks.
    let mut config = Config::default();
    config.set("memory", "16MiB").unwrap();
    config.set("dirty_throttle", "global-2007").unwrap();
    let mut e = Engine::new(config, Instant(0));
    let dev = e.add_device("d", DeviceConfig::default(), 100_000);
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = e.open(file).unwrap();
    let task = e.add_task();
    let mut hs = Harness::new(e, 200_000);
    let thresh = hs.engine.stats().thresh_pages;
    let slack = ratelimit_pages_2007(hs.engine.memory_pages());
    assert_eq!(slack, 128, "memory / 32");
    let mut peak = 0;
    for i in 0..32 {
        hs.run(task, |e, now| e.write(now, task, h, i * MIB, MIB))
            .unwrap();
        peak = peak.max(hs.engine.dirty_and_writeback_pages());
    }
    assert!(
        peak <= thresh + slack,
        "dirty + writeback peaked at {peak} pages, threshold {thresh} + rate limit {slack}"
    );
}

/// A 4 KiB sequential reader: its first miss reads a window (128 KiB) and
/// waits; from then on each read keeps the next window being read ahead
/// of it (readahead.rs), and every page is read from the device once.
#[test]
fn a_sequential_reader_reads_ahead_without_waiting_and_each_page_once() {
    let (mut e, dev) = engine("64MiB", DeviceConfig::default());
    let file = e.add_file(Instant(0), dev, DomainId(0), 4 << 20).unwrap();
    let h = e.open(file).unwrap();
    let task = e.add_task();
    let mut hs = Harness::new(e, 10_000);
    for off in (0..4u64 << 20).step_by(4096) {
        hs.run(task, |e, now| e.read(now, task, h, off, 4096))
            .unwrap();
    }
    let s = hs.engine.stats();
    let pages = (4 << 20) / 4096;
    assert_eq!(s.devices[0].pages_read, pages, "each page read once");
    assert_eq!(
        s.readahead_async_pages,
        pages - 32,
        "all but the first window read ahead"
    );
    // Another pass finds everything cached: nothing more is read.
    for off in (0..4u64 << 20).step_by(4096) {
        hs.run(task, |e, now| e.read(now, task, h, off, 4096))
            .unwrap();
    }
    assert_eq!(hs.engine.stats().devices[0].pages_read, pages);
    hs.engine.check_invariants();
}

/// Making room to read ahead reclaims the oldest clean pages, which may
/// be those of the read that triggers it: a read reported done still has
/// every one of its pages cached (a runtime copies them after the engine
/// says so).
#[test]
fn reading_ahead_never_takes_the_pages_of_the_read_it_serves() {
    // 4 MiB of cache, 2 MiB windows, 256 KiB reads.
    let device = DeviceConfig {
        read_ahead_kb: 2048,
        ..DeviceConfig::default()
    };
    let (mut e, dev) = engine("4MiB", device);
    let a = e.add_file(Instant(0), dev, DomainId(0), 16 << 20).unwrap();
    let b = e.add_file(Instant(0), dev, DomainId(0), 16 << 20).unwrap();
    let (ha, hb) = (e.open(a).unwrap(), e.open(b).unwrap());
    let task = e.add_task();
    let mut hs = Harness::new(e, 10_000);
    let read = 256 << 10;
    // The task reads `a` from its start: a miss, so a readahead window
    // (where Linux leaves its PG_readahead mark, from which a later
    // cached read reads ahead), then dropped.
    hs.run(task, |e, now| e.read(now, task, ha, 0, 4096))
        .unwrap();
    hs.run(task, |e, now| {
        e.invalidate_range(now, task, ha, 0, u64::MAX)
    })
    .unwrap();
    // The start of `a` written and clean: the oldest pages in the cache.
    hs.run(task, |e, now| e.write(now, task, ha, 0, read))
        .unwrap();
    hs.run(task, |e, now| e.fsync(now, task, ha)).unwrap();
    // Newer pages of `b` fill most of the rest (read backwards: without
    // readahead).
    for k in (1..12u64).rev() {
        let off = k * read;
        hs.run(task, |e, now| e.read(now, task, hb, off, read))
            .unwrap();
    }
    // The first read of `a` is cached and sequential: it reads ahead.
    let before = hs.engine.stats().readahead_async_pages;
    hs.run(task, |e, now| e.read(now, task, ha, 0, read))
        .unwrap();
    assert!(hs.engine.stats().readahead_async_pages > before);
    for page in 0..read / 4096 {
        assert!(
            hs.engine.page_frame(a, page).is_some(),
            "page {page} of the read is cached when it is done"
        );
    }
    hs.engine.check_invariants();
}

#[test]
fn a_reader_of_pages_it_wrote_does_not_read_ahead() {
    // Linux reads ahead asynchronously only from a page a readahead
    // marked: a dbench client reading back the block it wrote at the
    // start of its file must not read the rest of the file ahead, where
    // its writers would wait for those reads (Wong 2013, S3).
    let device = DeviceConfig {
        read_ahead_kb: 128,
        ..DeviceConfig::default()
    };
    let (mut e, dev) = engine("4MiB", device);
    let a = e.add_file(Instant(0), dev, DomainId(0), 1 << 20).unwrap();
    let ha = e.open(a).unwrap();
    let task = e.add_task();
    let mut hs = Harness::new(e, 10_000);
    hs.run(task, |e, now| e.write(now, task, ha, 0, 4096))
        .unwrap();
    for _ in 0..3 {
        hs.run(task, |e, now| e.read(now, task, ha, 0, 4096))
            .unwrap();
    }
    assert_eq!(hs.engine.stats().readahead_async_pages, 0);
    assert!(hs.engine.page_frame(a, 1).is_none(), "page 1 read ahead");
    // A reader that missed at the start reads ahead as it goes.
    let b = hs
        .engine
        .add_file(Instant(0), dev, DomainId(0), 1 << 20)
        .unwrap();
    let hb = hs.engine.open(b).unwrap();
    for k in 0..64u64 {
        hs.run(task, |e, now| e.read(now, task, hb, k * 4096, 4096))
            .unwrap();
    }
    assert!(hs.engine.stats().readahead_async_pages > 0);
}

/// `gauges_into` over a `Gauges` holding another moment's figures (more
/// devices, other counts) gives what `gauges` gives: a timeline reuses
/// one in place.
#[test]
fn gauges_into_overwrites_every_figure() {
    let (mut e, dev) = engine("64MiB", DeviceConfig::default());
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = e.open(file).unwrap();
    let task = e.add_task();
    let mut hs = Harness::new(e, 10_000);
    hs.run(task, |e, now| e.write(now, task, h, 0, MIB))
        .unwrap();
    let fresh = hs.engine.gauges();
    assert_eq!((fresh.dirty_pages, fresh.devices.len()), (256, 1));
    let stale = DeviceGauges {
        pages_read: 7,
        pages_written: 7,
        dirty_pages: 7,
        wbt_max_depth: 7,
    };
    let mut reused = Gauges {
        cached_pages: 9,
        dirty_pages: 9,
        writeback_pages: 9,
        thresh_pages: 9,
        bg_thresh_pages: 9,
        devices: vec![stale; 3],
        stalled_ns: [9; StallReason::ALL.len()],
    };
    hs.engine.gauges_into(&mut reused);
    assert_eq!(reused, fresh);
}
