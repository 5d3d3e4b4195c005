//! Letting go of idle files: least recently used first, never a busy one,
//! landed writes flushed first, down to three quarters of the limit.

mod harness;

use harness::Harness;
use wb_engine::*;

fn setup(max_files: usize) -> (Harness, DeviceId, TaskId) {
    let mut config = Config::default();
    config.set("memory", "64MiB").unwrap();
    let mut e = Engine::new(config, Instant(0));
    let dev = e.add_device("d", DeviceConfig::default(), 100_000);
    e.set_max_files(Some(max_files));
    let task = e.add_task();
    (Harness::new(e, 10_000), dev, task)
}

fn evicted(hs: &Harness) -> Vec<FileId> {
    hs.actions
        .iter()
        .filter_map(|a| match *a {
            Action::Evict { file } => Some(file),
            _ => None,
        })
        .collect()
}

/// Adds a file, opens it, reads a page of it (a use) and closes it.
fn use_new_file(hs: &mut Harness, dev: DeviceId, task: TaskId) -> FileId {
    let file = hs.engine.add_file(hs.now, dev, DomainId(0), 8192).unwrap();
    let h = hs.engine.open(file).unwrap();
    hs.run(task, |e, now| e.read(now, task, h, 0, 4096))
        .unwrap();
    hs.engine.close(h).unwrap();
    hs.drain();
    file
}

#[test]
fn idle_files_go_least_recently_used_first_down_to_three_quarters() {
    let (mut hs, dev, task) = setup(8);
    let files: Vec<FileId> = (0..8).map(|_| use_new_file(&mut hs, dev, task)).collect();
    assert!(evicted(&hs).is_empty(), "at the limit, nothing goes");
    // Use file 0 again: it is now the most recently used.
    let h = hs.engine.open(files[0]).unwrap();
    hs.engine.close(h).unwrap();
    let ninth = use_new_file(&mut hs, dev, task);
    // 9 live, keep 6: the three least recently used go, 1, 2, 3.
    assert_eq!(evicted(&hs), vec![files[1], files[2], files[3]]);
    assert_eq!(hs.engine.live_files(), 6);
    assert!(
        !hs.engine.file_idle(files[1]),
        "evicted files are not idle: gone"
    );
    assert!(hs.engine.file_idle(files[0]) && hs.engine.file_idle(ninth));
    hs.engine.check_invariants();
}

#[test]
fn busy_files_stay_and_a_fruitless_scan_is_not_repeated_at_once() {
    let (mut hs, dev, _) = setup(8);
    let mut handles = Vec::new();
    let mut files = Vec::new();
    for _ in 0..8 {
        let file = hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
        files.push(file);
        handles.push(hs.engine.open(file).unwrap());
    }
    let extra = hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
    hs.drain();
    assert!(evicted(&hs).is_empty(), "every file is open: none goes");
    assert_eq!(hs.engine.live_files(), 9);
    // Close them all: the next addition (one skipped scan: 8 / 8 = 1) does
    // not look, the one after does.
    for h in handles {
        hs.engine.close(h).unwrap();
    }
    hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
    hs.drain();
    assert!(evicted(&hs).is_empty(), "skipped after a fruitless scan");
    hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
    hs.drain();
    // 11 live, keep 6: the extra file (last used before the closes), then
    // the first four closed.
    assert_eq!(
        evicted(&hs),
        vec![extra, files[0], files[1], files[2], files[3]]
    );
    assert_eq!(hs.engine.live_files(), 6);
    hs.engine.check_invariants();
}

/// A file whose write landed (periodic writeback) but was not flushed,
/// with no handle left: idle and unsynced.
fn landed_unsynced_and_closed(hs: &mut Harness, dev: DeviceId, task: TaskId) -> FileId {
    let a = hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
    let h = hs.engine.open(a).unwrap();
    hs.run(task, |e, now| e.write(now, task, h, 0, 4096))
        .unwrap();
    hs.idle_until(Instant(40_000_000_000));
    assert!(hs.engine.file_unsynced(a), "landed, not flushed");
    hs.engine.close(h).unwrap();
    a
}

#[test]
fn landed_writes_are_flushed_before_their_file_goes() {
    let (mut hs, dev, task) = setup(1);
    let a = landed_unsynced_and_closed(&mut hs, dev, task);
    hs.held_flushes = Some(Vec::new());
    let b = hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
    hs.drain();
    let held = hs.held_flushes.take().unwrap();
    assert_eq!(held.len(), 1, "a flush first");
    assert!(evicted(&hs).is_empty(), "not before the flush is done");
    hs.engine.durable_done(hs.now, held[0], Ok(()));
    hs.drain();
    assert_eq!(evicted(&hs), vec![a]);
    assert!(hs.engine.file_idle(b));
    hs.engine.check_invariants();
}

#[test]
fn a_failed_flush_keeps_the_file() {
    let (mut hs, dev, task) = setup(1);
    let a = landed_unsynced_and_closed(&mut hs, dev, task);
    hs.fail_flushes = Some(IoErrorKind::Io);
    hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
    hs.drain();
    assert_eq!(hs.flushes, 1);
    assert!(evicted(&hs).is_empty());
    assert!(
        hs.engine.file_unsynced(a),
        "still unsynced: the next sync reports it"
    );
    hs.fail_flushes = None;
    let result = hs.run(task, |e, now| e.sync(now, task));
    assert_eq!(result, Ok(()), "a later sync flushes it again");
    assert!(!hs.engine.file_unsynced(a));
}

#[test]
fn release_lets_one_idle_file_go_at_once() {
    let (mut hs, dev, _) = setup(100);
    let a = hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
    let h = hs.engine.open(a).unwrap();
    assert!(!hs.engine.release_file(a), "open: busy");
    hs.engine.close(h).unwrap();
    assert!(hs.engine.release_file(a));
    hs.drain();
    assert_eq!(evicted(&hs), vec![a]);
    hs.engine.check_invariants();
}

#[test]
fn evicted_ids_are_reused_so_the_file_table_stays_small() {
    let (mut hs, dev, task) = setup(4);
    let ids: Vec<FileId> = (0..40).map(|_| use_new_file(&mut hs, dev, task)).collect();
    let largest = ids.iter().map(|f| f.index()).max().unwrap_or(0);
    assert!(largest < 6, "ids up to {largest} for at most 5 live files");
    assert!(hs.engine.live_files() <= 5);
    hs.engine.check_invariants();
}

#[test]
fn an_evicted_id_waits_until_the_runtime_took_its_evict() {
    let (mut hs, dev, task) = setup(2);
    let first = use_new_file(&mut hs, dev, task);
    use_new_file(&mut hs, dev, task);
    // The third passes the limit: idle files go, their Evict queued.
    let third = hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
    let gone: Vec<FileId> = std::iter::from_fn(|| hs.engine.poll_action())
        .filter_map(|a| match a {
            Action::Evict { file } => Some(file),
            _ => None,
        })
        .collect();
    assert!(gone.contains(&first), "{gone:?}");
    // poll_action came back empty: now the ids may be used again.
    let fourth = hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
    assert!(
        gone.contains(&fourth),
        "fourth {fourth:?} reuses one of {gone:?}"
    );
    assert_ne!(fourth, third);
    assert_eq!(hs.engine.file_size(fourth), Some(0), "a fresh record");
    let h = hs.engine.open(fourth).expect("the reused id opens");
    hs.engine.close(h).unwrap();
    hs.engine.check_invariants();
}

#[test]
fn an_id_is_not_reused_before_its_evict_was_taken() {
    let (mut hs, dev, task) = setup(2);
    let ids = [
        use_new_file(&mut hs, dev, task),
        use_new_file(&mut hs, dev, task),
    ];
    // Passing the limit evicts; nothing is drained before the next add.
    let third = hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
    let fourth = hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
    assert!(
        !ids.contains(&third) && !ids.contains(&fourth),
        "{third:?} {fourth:?}"
    );
    hs.drain();
    hs.engine.check_invariants();
}

#[test]
fn dirty_closed_files_over_the_limit_are_written_back_so_they_can_go() {
    let (mut hs, dev, task) = setup(8);
    // Eight files with a dirty page each, closed: none idle, none can go.
    let mut files = Vec::new();
    for _ in 0..8 {
        let file = hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
        let h = hs.engine.open(file).unwrap();
        hs.run(task, |e, now| e.write(now, task, h, 0, 4096))
            .unwrap();
        hs.engine.close(h).unwrap();
        files.push(file);
    }
    // One open file, dirty too: not written for this (its writer is busy).
    let open = hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
    let h = hs.engine.open(open).unwrap();
    hs.run(task, |e, now| e.write(now, task, h, 0, 4096))
        .unwrap();
    hs.drain();
    // Nine live, keep six: the three oldest closed files are written back
    // (reason vmscan), nothing else.
    let vmscan = WbReason::ALL
        .iter()
        .position(|&r| r == WbReason::Vmscan)
        .unwrap();
    let written = |hs: &Harness| hs.engine.stats().written_by_reason[vmscan];
    hs.idle_until(hs.now + 1_000_000_000);
    assert_eq!(written(&hs), 3);
    assert!(evicted(&hs).is_empty(), "not before the next look");
    assert!(files[..3].iter().all(|&f| hs.engine.file_idle(f)));
    assert!(!hs.engine.file_idle(files[3]) && !hs.engine.file_idle(open));
    // The next look (after the skipped scan) lets them go.
    hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
    hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
    hs.idle_until(hs.now + 1_000_000_000);
    let gone = evicted(&hs);
    assert!(files[..3].iter().all(|f| gone.contains(f)), "{gone:?}");
    hs.engine.check_invariants();
}
