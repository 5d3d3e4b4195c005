//! Stable pages: a write to pages under writeback modifies them in place
//! (`none`), waits for the writeback (`wait`) or gets copies while the
//! write in flight keeps the old frames (`snapshot`).

mod harness;

use harness::Harness;
use wb_engine::*;

const MIB: u64 = 1 << 20;
const PAGES: u64 = MIB / PAGE_SIZE;

/// An engine with one device in `mode`, a file with 1 MiB written and
/// synced once, and a second task that has started an fsync of it, so its
/// pages are under writeback. Returns (harness, writer task, handle).
fn pages_under_writeback(mode: &str) -> (Harness, TaskId, HandleId) {
    let mut config = Config::default();
    config.set("memory", "64MiB").unwrap();
    let mut e = Engine::new(config, Instant(0));
    let mut dc = DeviceConfig::default();
    dc.set("stable_writes", mode).unwrap();
    let dev = e.add_device("d", dc, 100_000);
    let writer = e.add_task();
    let syncer = e.add_task();
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = e.open(file).unwrap();
    let mut hs = Harness::new(e, 10_000);
    hs.run(writer, |e, now| e.write(now, writer, h, 0, MIB))
        .unwrap();
    let step = hs.engine.fsync(hs.now, syncer, h).unwrap();
    assert!(
        matches!(step, Step::Sleep(_)),
        "the fsync waits for its writes"
    );
    hs.drain();
    assert_eq!(
        hs.engine.stats().writeback_pages,
        PAGES,
        "all under writeback"
    );
    hs.actions.clear();
    hs.stalls.clear();
    (hs, writer, h)
}

fn rewrite(hs: &mut Harness, task: TaskId, h: HandleId) {
    hs.run(task, |e, now| e.write(now, task, h, 0, MIB))
        .unwrap();
}

fn settle(hs: &mut Harness) {
    // Past dirty_expire_centisecs (30 s): the periodic flusher writes all.
    let until = hs.now + 40_000_000_000;
    hs.idle_until(until);
    hs.engine.check_invariants();
}

fn device(hs: &Harness) -> DeviceStats {
    hs.engine.stats().devices[0].clone()
}

#[test]
fn snapshot_gives_the_writer_copies_and_frees_the_old_frames_at_completion() {
    let (mut hs, writer, h) = pages_under_writeback("snapshot");
    let start = hs.now;
    rewrite(&mut hs, writer, h);
    assert_eq!(hs.now, start, "the writer did not wait");
    assert!(hs.stalls.is_empty(), "no stall: {:?}", hs.stalls);
    assert_eq!(device(&hs).snapshot_pages, PAGES);
    // The copy of the old content comes before the writer's bytes.
    let copy = hs
        .actions
        .iter()
        .position(|a| matches!(a, Action::CopyFrames { .. }))
        .expect("frames copied");
    let copy_in = hs
        .actions
        .iter()
        .position(|a| matches!(a, Action::CopyIn { .. }))
        .expect("bytes copied in");
    assert!(copy < copy_in);
    let copied: u32 = hs
        .actions
        .iter()
        .map(|a| match a {
            Action::CopyFrames { count, .. } => *count,
            _ => 0,
        })
        .sum();
    assert_eq!(copied as u64, PAGES);
    hs.engine.check_invariants();
    // The old frames count against the budget until the writes complete.
    assert_eq!(hs.engine.stats().cached_pages, PAGES);
    assert_eq!(hs.engine.stats().snapshot_held_pages, PAGES);
    settle(&mut hs);
    let stats = hs.engine.stats();
    assert_eq!(stats.snapshot_held_pages, 0, "freed at completion");
    assert_eq!(stats.writeback_pages, 0);
    assert_eq!(stats.dirty_pages, 0, "the rewrite was written back too");
    assert_eq!(hs.written_pages, 2 * PAGES);
}

#[test]
fn wait_makes_the_writer_wait_for_the_writeback() {
    let (mut hs, writer, h) = pages_under_writeback("wait");
    let start = hs.now;
    rewrite(&mut hs, writer, h);
    assert!(hs.now > start, "the writer waited");
    assert!(
        hs.stalls
            .iter()
            .any(|s| s.reason == StallReason::StablePage),
        "stalls: {:?}",
        hs.stalls
    );
    assert!(!hs
        .actions
        .iter()
        .any(|a| matches!(a, Action::CopyFrames { .. })));
    assert_eq!(device(&hs).snapshot_pages, 0);
    settle(&mut hs);
    assert_eq!(hs.written_pages, 2 * PAGES);
}

#[test]
fn none_modifies_in_place_and_writes_the_pages_again() {
    let (mut hs, writer, h) = pages_under_writeback("none");
    let start = hs.now;
    rewrite(&mut hs, writer, h);
    assert_eq!(hs.now, start, "the writer did not wait");
    assert!(!hs
        .actions
        .iter()
        .any(|a| matches!(a, Action::CopyFrames { .. })));
    // Dirty again while under writeback: written once more.
    let stats = hs.engine.stats();
    assert_eq!(stats.dirty_pages, PAGES);
    settle(&mut hs);
    assert_eq!(hs.written_pages, 2 * PAGES);
    assert_eq!(hs.engine.stats().dirty_pages, 0);
}

#[test]
fn stable_writes_accepts_four_modes_and_refuses_others() {
    let mut dc = DeviceConfig::default();
    assert_eq!(dc.stable_writes, StableWrites::Auto, "the default");
    for mode in ["none", "wait", "snapshot", "auto"] {
        dc.set("stable_writes", mode).unwrap();
        assert_eq!(dc.stable_writes.name(), mode);
    }
    let err = dc.set("stable_writes", "bounce").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid value 'bounce' for stable_writes: expected none, wait, snapshot or auto"
    );
    assert_eq!(dc.stable_writes, StableWrites::Auto, "nothing changed");
}

/// A truncation that cuts a page under writeback waits for that write, in
/// every mode: the runtime zeroes the page's tail in its frame (which the
/// write in flight may be reading), and the write must not land after the
/// backing file is cut.
#[test]
fn truncating_into_a_page_under_writeback_waits_for_its_write() {
    for mode in ["none", "wait", "snapshot"] {
        let (mut hs, writer, h) = pages_under_writeback(mode);
        let start = hs.now;
        hs.run(writer, |e, now| e.set_len(now, writer, h, PAGE_SIZE / 2))
            .unwrap();
        assert!(hs.now > start, "{mode}: the truncation waited");
        // Once per write request that completes (two of 128 pages), then
        // once for the backing file's cut (backing_len/).
        assert_eq!(
            hs.stalls.iter().map(|s| s.reason).collect::<Vec<_>>(),
            [StallReason::Sync, StallReason::Sync, StallReason::Sync],
            "{mode}"
        );
        assert_eq!(hs.engine.stats().writeback_pages, 0, "{mode}");
        assert_eq!(hs.engine.file_size(FileId(0)), Some(PAGE_SIZE / 2));
        hs.engine.check_invariants();
    }
}
