//! The backlog of deferred releases: an unlink returns once its file is
//! queued; the worker drops the file's pages and asks for its release in
//! steps; producers are held back by the watermarks (or, flush-all, wait
//! for the whole backlog); sync waits for the backlog; bad input is an
//! error that changes nothing.

mod harness;

use harness::Harness;
use wb_engine::*;

const MIB: u64 = 1 << 20;

/// An engine with one device and one task; `files` files of `size` bytes
/// on it, each opened once. Returns (harness, task, files, handles).
fn setup(
    config: &[(&str, &str)],
    files: u32,
    size: u64,
) -> (Harness, TaskId, Vec<FileId>, Vec<HandleId>) {
    let mut c = Config::default();
    c.set("memory", "64MiB").unwrap();
    for (k, v) in config {
        c.set(k, v).unwrap();
    }
    let mut e = Engine::new(c, Instant(0));
    let dev = e.add_device("d", DeviceConfig::default(), 100_000);
    let task = e.add_task();
    let mut ids = Vec::new();
    let mut handles = Vec::new();
    for _ in 0..files {
        let f = e.add_file(Instant(0), dev, DomainId(0), size).unwrap();
        handles.push(e.open(f).unwrap());
        ids.push(f);
    }
    (Harness::new(e, 10_000), task, ids, handles)
}

fn backlog(hs: &Harness) -> BacklogStats {
    hs.engine.stats().devices[0].backlog
}

#[test]
fn an_unlink_returns_at_once_and_the_worker_releases_in_steps() {
    let size = RELEASE_STEP_BYTES * 2 + MIB;
    let (mut hs, task, files, handles) = setup(&[], 1, size);
    let (f, h) = (files[0], handles[0]);
    // Dirty pages, never written: the release drops them unwritten.
    hs.run(task, |e, now| e.write(now, task, h, 0, MIB))
        .unwrap();
    assert_eq!(
        hs.engine.unlink(hs.now, task, f),
        Err(EngineError::FileBusy(f))
    );
    hs.engine.close(h).unwrap();
    assert_eq!(hs.engine.unlink(hs.now, task, f).unwrap(), Step::Done);
    assert_eq!(hs.engine.open(f), Err(EngineError::BadFile(f)), "unlinked");
    hs.drain();
    // The unlink dropped nothing itself: the pages go when the release
    // starts, in the call that reports the Start step.
    assert_eq!(hs.engine.stats().cached_pages, MIB / PAGE_SIZE);
    assert_eq!(
        hs.engine.unlink(hs.now, task, f),
        Err(EngineError::BadFile(f))
    );
    let steps = hs.finish_releases(1_000_000);
    let kinds: Vec<ReleaseStep> = steps.iter().map(|s| s.2).collect();
    assert_eq!(
        kinds,
        [
            ReleaseStep::Start,
            ReleaseStep::Truncate {
                len: size - RELEASE_STEP_BYTES
            },
            ReleaseStep::Truncate { len: MIB },
            ReleaseStep::Remove
        ]
    );
    let s = hs.engine.stats();
    assert_eq!((s.dirty_pages, s.cached_pages, s.written_pages), (0, 0, 0));
    assert_eq!(backlog(&hs).items_done, 1);
    assert_eq!(backlog(&hs).steps_done, 3);
    assert!(hs.actions.contains(&Action::Evict { file: f }));
    hs.engine.check_invariants();
    // A late or unknown report changes nothing.
    hs.engine.release_done(hs.now, 12345, Ok(()));
    hs.engine.release_done(hs.now, u64::MAX, Ok(()));
    hs.engine.check_invariants();
}

#[test]
fn watermarks_hold_producers_until_the_backlog_is_under_low() {
    // 1 ms backlog_wait_ms: high 2 ms, low 1 ms of estimated work. Before
    // anything is measured a 4 KiB file is estimated at 50 us + 4/1024 ms
    // = 53,906 ns: 38 files fill it (37 are 1.99 ms).
    const EST_NS: u64 = 50_000 + 4096 * 1_000_000 / MIB;
    let (mut hs, task, files, handles) = setup(&[("backlog_wait_ms", "1")], 100, 4096);
    for &h in &handles {
        hs.engine.close(h).unwrap();
    }
    let mut first_wait = None;
    for (i, &f) in files.iter().enumerate() {
        match hs.engine.unlink(hs.now, task, f).unwrap() {
            Step::Done => {}
            Step::Sleep(stall) => {
                assert_eq!(stall.reason, StallReason::Backlog);
                first_wait = Some(i);
                break;
            }
        }
        hs.drain();
        hs.engine.check_invariants();
    }
    let i = first_wait.expect("the backlog filled");
    assert_eq!(
        i as u64,
        2_000_000_u64.div_ceil(EST_NS),
        "38 files reach high"
    );
    let b = backlog(&hs);
    assert_eq!((b.items, b.throttles), (38, 1));
    assert_eq!(b.level_ns, 38 * EST_NS);
    assert_eq!((b.high_ns, b.low_ns), (2_000_000, 1_000_000));
    // The worker's steps (one is in flight): the producer goes once the
    // level is under low, not before.
    let mut released_at = None;
    let mut removed = 0;
    while removed < 40 {
        let (id, _, step) = hs.releases.pop().expect("one step at a time");
        if step == ReleaseStep::Remove {
            hs.now = hs.now + 50_000;
            removed += 1;
        }
        hs.engine.release_done(hs.now, id, Ok(()));
        let woken = hs.drain();
        if woken.contains(&task) {
            released_at = Some(removed);
            break;
        }
    }
    // Under 1 ms: 18 files left (18 x 53,906 < 1 ms), so after 20 done.
    assert_eq!(released_at, Some(20));
    assert_eq!(hs.engine.resume(hs.now, task).unwrap(), Step::Done);
    hs.engine.check_invariants();
}

#[test]
fn flush_all_waits_for_everything_queued_before() {
    let n = FLUSH_ALL_MAX_ITEMS as u32 + 2;
    let (mut hs, task, files, handles) = setup(&[("backlog_throttle", "flush-all")], n, 4096);
    for &h in &handles {
        hs.engine.close(h).unwrap();
    }
    for &f in &files[..FLUSH_ALL_MAX_ITEMS + 1] {
        assert_eq!(hs.engine.unlink(hs.now, task, f).unwrap(), Step::Done);
        hs.drain();
    }
    let last = files[FLUSH_ALL_MAX_ITEMS + 1];
    let Step::Sleep(stall) = hs.engine.unlink(hs.now, task, last).unwrap() else {
        panic!("past 256 items the producer waits");
    };
    assert_eq!(stall.reason, StallReason::Backlog);
    // Woken after each item, it waits on until all 257 are done.
    let mut done = 0;
    while done < FLUSH_ALL_MAX_ITEMS + 1 {
        let (id, _, step) = hs.releases.pop().expect("a step in flight");
        hs.now = hs.now + 10_000;
        hs.engine.release_done(hs.now, id, Ok(()));
        if step == ReleaseStep::Start {
            hs.drain();
            continue;
        }
        done += 1;
        if hs.drain().contains(&task) {
            let step = hs.engine.resume(hs.now, task).unwrap();
            if done < FLUSH_ALL_MAX_ITEMS + 1 {
                assert!(matches!(step, Step::Sleep(_)), "after {done}: {step:?}");
            } else {
                assert_eq!(step, Step::Done);
            }
        }
    }
    hs.finish_releases(10_000);
    assert_eq!(backlog(&hs).items_done, n as u64);
    hs.engine.check_invariants();
}

#[test]
fn sync_waits_for_the_backlog_and_knobs_refuse_bad_values() {
    let (mut hs, task, files, handles) = setup(&[], 3, 4096);
    for &h in &handles {
        hs.engine.close(h).unwrap();
    }
    for &f in &files {
        hs.engine.unlink(hs.now, task, f).unwrap();
        hs.drain();
    }
    let Step::Sleep(stall) = hs.engine.sync(hs.now, task).unwrap() else {
        panic!("sync waits for the releases");
    };
    assert_eq!(stall.reason, StallReason::Sync);
    hs.finish_releases(1_000);
    hs.run(task, |e, now| e.resume(now, task)).unwrap();
    assert_eq!(backlog(&hs).items_done, 3);

    for (knob, value) in [
        ("backlog_throttle", "sometimes"),
        ("backlog_wait_ms", "0"),
        ("backlog_wait_ms", "60001"),
        ("backlog_wait_ms", "soon"),
    ] {
        let e = hs.engine.set_knob(knob, value).unwrap_err();
        assert!(e.to_string().contains(knob), "{e}");
    }
    assert_eq!(
        hs.engine.config().get("backlog_throttle").as_deref(),
        Some("watermarks")
    );
    assert_eq!(
        hs.engine.config().get("backlog_wait_ms").as_deref(),
        Some("100")
    );
    hs.engine.set_knob("backlog_throttle", "flush-all").unwrap();
    hs.engine.set_knob("backlog_wait_ms", "250").unwrap();
    assert_eq!(backlog(&hs).high_ns, 500_000_000);
    hs.engine.check_invariants();
}
