//! The page map's protocol (`wb_engine::page_map`) on virtual time: the
//! harness keeps a map through the keeper from the engine's actions, as a
//! runtime does, and each script asserts the map's exact state, then
//! checks it against the engine (`PageMap::check`).

mod harness;

use harness::{setup, Harness};
use wb_engine::*;

const PAGE: u64 = PAGE_SIZE;

/// A harness with the device knobs `device_knobs`, a second task, and an
/// empty file opened: (harness, writer, syncer, file, handle).
fn with_file(device_knobs: &[(&str, &str)]) -> (Harness, TaskId, TaskId, FileId, HandleId) {
    let (mut hs, dev, writer) = setup(&[], device_knobs);
    let syncer = hs.engine.add_task();
    let file = hs.engine.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = hs.engine.open(file).unwrap();
    (hs, writer, syncer, file, h)
}

fn write(hs: &mut Harness, task: TaskId, h: HandleId, offset: u64, len: u64) {
    hs.run(task, |e, now| e.write(now, task, h, offset, len))
        .unwrap();
}

/// The map as (page, frame, overwritable), for `file`.
fn mapped(hs: &Harness, file: FileId) -> Vec<(PageIndex, u32, bool)> {
    let pages = hs.page_map.pages().into_iter();
    let pages = pages.filter(|&(f, _, _)| f == file);
    pages
        .map(|(_, page, frame)| (page, frame, hs.page_map.overwritable(frame)))
        .collect()
}

fn check(hs: &Harness) {
    hs.engine.check_invariants();
    hs.page_map.check(&hs.engine);
}

/// Starts an fsync of `h` on `syncer` and carries out its submits: the
/// file's dirty pages go under writeback.
fn start_fsync(hs: &mut Harness, syncer: TaskId, h: HandleId) {
    let step = hs.engine.fsync(hs.now, syncer, h).unwrap();
    assert!(matches!(step, Step::Sleep(_)), "the fsync waits");
    hs.drain();
}

/// Past dirty_expire_centisecs (30 s): everything written back.
fn settle(hs: &mut Harness) {
    let until = hs.now + 40_000_000_000;
    hs.idle_until(until);
}

#[test]
fn a_write_maps_its_pages_overwritable() {
    let (mut hs, writer, _, file, h) = with_file(&[]);
    write(&mut hs, writer, h, 0, 3 * PAGE);
    assert_eq!(
        mapped(&hs, file),
        vec![(0, 0, true), (1, 1, true), (2, 2, true)]
    );
    // A partial write into a new page: zeroed, then copied in; mapped.
    write(&mut hs, writer, h, 3 * PAGE + 10, 20);
    assert_eq!(mapped(&hs, file)[3], (3, 3, true));
    check(&hs);
}

#[test]
fn writeback_clears_the_bits_keeps_the_pages_and_a_rewrite_sets_one_again() {
    let (mut hs, writer, syncer, file, h) = with_file(&[]);
    write(&mut hs, writer, h, 0, 3 * PAGE);
    start_fsync(&mut hs, syncer, h);
    assert_eq!(hs.engine.stats().writeback_pages, 3, "submitted");
    assert_eq!(
        mapped(&hs, file),
        vec![(0, 0, false), (1, 1, false), (2, 2, false)],
        "a write request took them: not overwritable, still mapped"
    );
    check(&hs);
    settle(&mut hs);
    assert_eq!(hs.engine.stats().dirty_pages, 0);
    assert_eq!(
        mapped(&hs, file),
        vec![(0, 0, false), (1, 1, false), (2, 2, false)],
        "clean and valid: still mapped"
    );
    check(&hs);
    write(&mut hs, writer, h, PAGE + 100, 10);
    assert_eq!(
        mapped(&hs, file),
        vec![(0, 0, false), (1, 1, true), (2, 2, false)],
        "dirty again: overwritable again"
    );
    check(&hs);
}

#[test]
fn a_read_maps_the_pages_it_read() {
    let (mut hs, dev, reader) = setup(&[], &[]);
    let file = hs
        .engine
        .add_file(Instant(0), dev, DomainId(0), 64 * PAGE)
        .unwrap();
    let h = hs.engine.open(file).unwrap();
    // Sequential reads: the second brings pages ahead of it in.
    hs.read(reader, file, h, 0, 2 * PAGE).unwrap();
    hs.read(reader, file, h, 2 * PAGE, 2 * PAGE).unwrap();
    let cached = hs.engine.file_cached_pages(file).unwrap().0;
    assert!(cached > 4, "read ahead too: {cached} pages cached");
    let frame = |page| hs.engine.page_frame(file, page).unwrap();
    let read: Vec<_> = (0..4).map(|p| (p, frame(p), false)).collect();
    assert_eq!(
        mapped(&hs, file),
        read,
        "only the pages read; clean: not overwritable"
    );
    check(&hs);
}

#[test]
fn truncation_and_eviction_unmap() {
    let (mut hs, writer, syncer, file, h) = with_file(&[]);
    write(&mut hs, writer, h, 0, 4 * PAGE);
    hs.run(syncer, |e, now| e.fsync(now, syncer, h)).unwrap();
    write(&mut hs, writer, h, PAGE, 3 * PAGE);
    assert_eq!(
        mapped(&hs, file),
        vec![(0, 0, false), (1, 1, true), (2, 2, true), (3, 3, true)]
    );
    let len = PAGE + 100;
    hs.run(writer, |e, now| e.set_len(now, writer, h, len))
        .unwrap();
    // As the runtime does once set_len is done: the now partial last
    // page is no longer overwritable, and its tail is to be zeroed.
    assert_eq!(hs.page_map.truncated(&hs.engine, file, len), Some((1, 100)));
    assert_eq!(
        mapped(&hs, file),
        vec![(0, 0, false), (1, 1, false)],
        "pages past the end unmapped"
    );
    assert!(hs.unmapped.contains(&(file, 2, 4)));
    check(&hs);
    settle(&mut hs);
    hs.engine.close(h).unwrap();
    hs.engine.evict_file(file).unwrap();
    hs.drain();
    assert!(hs.page_map.is_empty(), "an evicted file's pages leave");
    check(&hs);
}

#[test]
fn reclaim_unmaps_what_it_drops() {
    let (mut hs, writer, syncer, file, h) = with_file(&[]);
    let pages = 2048; // 8 MiB
    write(&mut hs, writer, h, 0, pages * PAGE);
    hs.run(syncer, |e, now| e.fsync(now, syncer, h)).unwrap();
    assert_eq!(hs.page_map.len() as u64, pages);
    hs.engine.set_knob("memory", "4MiB").unwrap();
    hs.drain();
    let cached = hs.engine.file_cached_pages(file).unwrap().0;
    assert!(cached < pages, "clean pages dropped: {cached} cached");
    assert_eq!(hs.page_map.len() as u64, cached, "the rest unmapped");
    for (page, frame, bit) in mapped(&hs, file) {
        assert_eq!(hs.engine.page_frame(file, page), Some(frame));
        assert!(!bit);
    }
    check(&hs);
}

#[test]
fn a_snapshot_moves_the_pages_and_the_map_follows() {
    let (mut hs, writer, syncer, file, h) = with_file(&[("stable_writes", "snapshot")]);
    write(&mut hs, writer, h, 0, 4 * PAGE);
    start_fsync(&mut hs, syncer, h);
    write(&mut hs, writer, h, 0, 4 * PAGE);
    let copy = hs.actions.iter().find_map(|a| match *a {
        Action::CopyFrames {
            file: f,
            first,
            from,
            to,
            count,
        } => Some((f, first, from, to, count)),
        _ => None,
    });
    assert_eq!(copy, Some((file, 0, 0, 4, 4)), "the writer got copies");
    assert_eq!(
        mapped(&hs, file),
        vec![(0, 4, true), (1, 5, true), (2, 6, true), (3, 7, true)],
        "mapped at the copies, dirty under writeback: overwritable"
    );
    check(&hs);
    settle(&mut hs);
    assert_eq!(
        mapped(&hs, file),
        vec![(0, 4, false), (1, 5, false), (2, 6, false), (3, 7, false)],
        "written back from the copies"
    );
    check(&hs);
}

/// A deferred copy into snapshot copies: the pages leave the map at the
/// CopyFrames, and the write in flight that kept the old frames may
/// complete (and free them) before the copy-in maps the new ones; the
/// map never points at a freed frame meanwhile.
#[test]
fn a_deferred_copy_into_a_snapshot_leaves_no_page_at_a_freed_frame() {
    let (mut hs, writer, syncer, file, h) = with_file(&[("stable_writes", "snapshot")]);
    write(&mut hs, writer, h, 0, 2 * PAGE);
    start_fsync(&mut hs, syncer, h);
    hs.held_copies = Some(Vec::new());
    let step = hs
        .engine
        .write_with(hs.now, writer, h, 0, 2 * PAGE, WriteFlags::DEFERRED_COPY)
        .unwrap();
    assert_eq!(step, Step::Done);
    hs.drain();
    assert_eq!(hs.held_copies.as_ref().map(Vec::len), Some(1));
    assert_eq!(mapped(&hs, file), vec![], "moved: out until copied in");
    // The old write completes meanwhile; its frames are free again.
    let until = hs.now + 1_000_000;
    hs.idle_until(until);
    assert_eq!(hs.engine.stats().snapshot_held_pages, 0);
    check(&hs);
    hs.copy_held(writer);
    assert_eq!(mapped(&hs, file), vec![(0, 2, true), (1, 3, true)]);
    check(&hs);
}

/// The message `PageMap::check` panics with on `hs`, if it does.
fn check_fault(hs: &Harness) -> Option<String> {
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        hs.page_map.check(&hs.engine)
    }));
    let panic = caught.err()?;
    let text = panic.downcast_ref::<String>().cloned();
    Some(text.unwrap_or_else(|| "a panic without a message".into()))
}

/// Each of the check's three rules catches a map that breaks it, naming
/// the page: (a) a page at another frame than the engine's, (b) a bit on
/// a page written back, (c) a dirty page missing.
#[test]
fn the_check_names_the_page_a_wrong_map_breaks() {
    let (mut hs, writer, syncer, file, h) = with_file(&[]);
    write(&mut hs, writer, h, 0, 2 * PAGE);
    check(&hs);
    // (c): page 1 is dirty in the engine, gone from the map.
    let gone = Action::Unmapped {
        file,
        first: 1,
        end: 2,
    };
    hs.page_map.on_action(&hs.engine, &gone);
    assert_eq!(
        check_fault(&hs).as_deref(),
        Some(format!("page 1 of {file:?} is dirty (frame 1) but not mapped").as_str())
    );
    // (a): page 1 back, at page 0's frame (page 0 keeps its entry).
    hs.page_map.copied_in(file, PAGE, PAGE, 0);
    let fault = check_fault(&hs).expect("a page at another's frame");
    assert!(
        fault.starts_with(&format!(
            "page 1 of {file:?} is mapped at frame 0, the engine's frame of page 0 of {file:?}"
        )),
        "{fault}"
    );
    // Mapped right again: the check holds.
    hs.page_map.copied_in(file, PAGE, PAGE, 1);
    check(&hs);
    // (b): written back (clean), then a bit set on page 0's frame.
    start_fsync(&mut hs, syncer, h);
    settle(&mut hs);
    check(&hs);
    hs.page_map.copied_in(file, 0, PAGE, 0);
    assert_eq!(
        check_fault(&hs).as_deref(),
        Some(format!("page 0 of {file:?} is overwritable (frame 0) but not dirty").as_str())
    );
}
