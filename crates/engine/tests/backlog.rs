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

/// The release steps the backlog asks for until it has nothing left.
fn steps(hs: &mut Harness) -> Vec<ReleaseStep> {
    hs.finish_releases(1_000_000)
        .into_iter()
        .map(|s| s.2)
        .collect()
}

#[test]
fn a_large_truncation_returns_at_once_and_the_backlog_cuts_in_steps() {
    let size = 3 * RELEASE_STEP_BYTES + MIB;
    let (mut hs, task, files, handles) = setup(&[], 2, size);
    let (f, h) = (files[0], handles[0]);
    hs.run(task, |e, now| e.write(now, task, h, 0, MIB))
        .unwrap();
    // One step's worth or less: the runtime cuts at once, nothing queued.
    hs.run(task, |e, now| {
        e.set_len(now, task, h, size - RELEASE_STEP_BYTES)
    })
    .unwrap();
    assert!(!hs.engine.cut_queued(f));
    assert_eq!(steps(&mut hs), []);
    // More: done when the size is set, the cut queued behind it.
    let size = size - RELEASE_STEP_BYTES;
    assert_eq!(
        hs.engine.set_len(hs.now, task, h, 1000).unwrap(),
        Step::Done
    );
    assert!(hs.engine.cut_queued(f));
    assert_eq!(hs.engine.file_size(f), Some(1000));
    hs.engine.check_invariants();
    assert_eq!(
        steps(&mut hs),
        [
            ReleaseStep::Truncate {
                len: size - RELEASE_STEP_BYTES
            },
            ReleaseStep::Truncate {
                len: size - 2 * RELEASE_STEP_BYTES
            },
            ReleaseStep::Truncate { len: 1000 },
        ]
    );
    assert!(!hs.engine.cut_queued(f));
    let b = backlog(&hs);
    assert_eq!((b.cuts_done, b.items_done, b.steps_done), (1, 0, 3));
    // The file stays, its first page too.
    assert_eq!(hs.engine.stats().cached_pages, 1);
    hs.engine.check_invariants();
    // A second truncation while a cut is queued lowers its target.
    let g = handles[1];
    let big = 3 * RELEASE_STEP_BYTES + MIB;
    assert_eq!(
        hs.engine
            .set_len(hs.now, task, g, 2 * RELEASE_STEP_BYTES)
            .unwrap(),
        Step::Done
    );
    assert_eq!(hs.engine.set_len(hs.now, task, g, 0).unwrap(), Step::Done);
    hs.engine.check_invariants();
    let got = steps(&mut hs);
    assert_eq!(got.last(), Some(&ReleaseStep::Truncate { len: 0 }));
    assert_eq!(got.len() as u64, big.div_ceil(RELEASE_STEP_BYTES));
}

#[test]
fn writes_that_extend_a_file_wait_for_its_cut() {
    let size = 4 * RELEASE_STEP_BYTES;
    let (mut hs, task, files, handles) = setup(&[], 1, size);
    let (f, h) = (files[0], handles[0]);
    assert_eq!(hs.engine.set_len(hs.now, task, h, MIB).unwrap(), Step::Done);
    // Within the new size: no wait.
    hs.run(task, |e, now| e.write(now, task, h, 0, 4096))
        .unwrap();
    // Past it: the old data would show through a hole; wait for the cut.
    let Step::Sleep(stall) = hs.engine.write(hs.now, task, h, 2 * MIB, 4096).unwrap() else {
        panic!("an extending write waits for the cut");
    };
    assert_eq!(stall.reason, StallReason::Backlog);
    // Growing with a truncation waits too (another task).
    let other = hs.engine.add_task();
    let Step::Sleep(stall) = hs.engine.set_len(hs.now, other, h, 8 * MIB).unwrap() else {
        panic!("an extending truncation waits for the cut");
    };
    assert_eq!(stall.reason, StallReason::Backlog);
    // 63 MiB to free: 16 + 16 + 16 + 15.
    assert_eq!(steps(&mut hs).len(), 4);
    assert!(!hs.engine.cut_queued(f));
    assert_eq!(hs.engine.resume(hs.now, task).unwrap(), Step::Done);
    assert_eq!(hs.engine.resume(hs.now, other).unwrap(), Step::Done);
    assert_eq!(hs.engine.file_size(f), Some(8 * MIB));
    hs.engine.check_invariants();
}

#[test]
fn unlinking_a_file_with_a_queued_cut_frees_the_rest_in_its_removal() {
    let size = 4 * RELEASE_STEP_BYTES;
    let (mut hs, task, files, handles) = setup(&[], 2, size);
    let (f, h) = (files[0], handles[0]);
    // The other file's removal first, so the cut stays queued behind it.
    hs.engine.close(handles[1]).unwrap();
    assert_eq!(
        hs.engine.unlink(hs.now, task, files[1]).unwrap(),
        Step::Done
    );
    assert_eq!(hs.engine.set_len(hs.now, task, h, MIB).unwrap(), Step::Done);
    hs.engine.close(h).unwrap();
    assert_eq!(hs.engine.unlink(hs.now, task, f).unwrap(), Step::Done);
    assert!(!hs.engine.cut_queued(f));
    hs.engine.check_invariants();
    let done = hs.finish_releases(1_000_000);
    let of_f: Vec<ReleaseStep> = done.iter().filter(|s| s.1 == f).map(|s| s.2).collect();
    // All 64 MiB go in the removal's steps: 1 MiB kept plus the 63 the cut had.
    assert_eq!(
        of_f,
        [
            ReleaseStep::Start,
            ReleaseStep::Truncate {
                len: size - RELEASE_STEP_BYTES
            },
            ReleaseStep::Truncate {
                len: size - 2 * RELEASE_STEP_BYTES
            },
            ReleaseStep::Truncate {
                len: size - 3 * RELEASE_STEP_BYTES
            },
            ReleaseStep::Remove,
        ]
    );
    let b = backlog(&hs);
    assert_eq!((b.items_done, b.cuts_done), (2, 0));
    hs.engine.check_invariants();
}
