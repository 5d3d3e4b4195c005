//! The active and inactive lists (lru.rs, workingset.rs): a page read
//! twice is active, a stream cannot push the active pages out, and a page
//! that comes back soon after its eviction enters active. The same
//! workloads under `lru = clock` lose the hot set.

mod harness;

use harness::Harness;
use wb_engine::*;

const MIB: u64 = 1 << 20;
const KIB: u64 = 1 << 10;
const HOT_PAGES: u64 = 16 * MIB / PAGE_SIZE;

struct Cache {
    hs: Harness,
    task: TaskId,
    hot: (FileId, HandleId),
    stream: (FileId, HandleId),
}

/// A 64 MiB cache, a 16 MiB file on disk (the hot set) and an empty one
/// (the stream).
fn cache(lru: &str) -> Cache {
    let mut config = Config::default();
    config.set("memory", "64MiB").unwrap();
    config.set("lru", lru).unwrap();
    let mut e = Engine::new(config, Instant(0));
    let dev = e.add_device("d", DeviceConfig::default(), 100_000);
    let hot = e.add_file(Instant(0), dev, DomainId(0), 16 * MIB).unwrap();
    let stream = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let (hh, sh) = (e.open(hot).unwrap(), e.open(stream).unwrap());
    let task = e.add_task();
    Cache {
        hs: Harness::new(e, 1_000),
        task,
        hot: (hot, hh),
        stream: (stream, sh),
    }
}

impl Cache {
    fn read_all(&mut self, (file, h): (FileId, HandleId)) {
        let size = self.hs.engine.file_size(file).unwrap();
        let task = self.task;
        for off in (0..size).step_by(64 * KIB as usize) {
            self.hs
                .run(task, |e, now| e.read(now, task, h, off, 64 * KIB))
                .unwrap();
        }
    }

    /// Writes `bytes` more to the stream file, 1 MiB at a time, and syncs.
    fn stream(&mut self, bytes: u64) {
        let (file, h) = self.stream;
        let task = self.task;
        let start = self.hs.engine.file_size(file).unwrap();
        for off in (start..start + bytes).step_by(MIB as usize) {
            self.hs
                .run(task, |e, now| e.write(now, task, h, off, MIB))
                .unwrap();
        }
        self.hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
        self.hs.engine.check_invariants();
    }

    fn hot_cached(&self) -> (u64, u64) {
        self.hs.engine.file_cached_pages(self.hot.0).unwrap()
    }
}

#[test]
fn a_page_read_twice_is_active_a_page_read_or_written_once_is_not() {
    let mut c = cache("active-inactive");
    c.read_all(c.hot);
    assert_eq!(c.hot_cached(), (HOT_PAGES, 0), "read once: inactive");
    c.stream(4 * MIB);
    assert_eq!(
        c.hs.engine.file_cached_pages(c.stream.0),
        Some((4 * MIB / PAGE_SIZE, 0)),
        "written once: inactive"
    );
    c.read_all(c.hot);
    assert_eq!(c.hot_cached(), (HOT_PAGES, HOT_PAGES), "read twice: active");
    let s = c.hs.engine.stats();
    assert_eq!((s.pgactivate, s.active_pages), (HOT_PAGES, HOT_PAGES));
    c.hs.engine.check_invariants();
}

#[test]
fn small_reads_through_one_page_mark_it_once() {
    let mut c = cache("active-inactive");
    let (_, h) = c.hot;
    let task = c.task;
    // 512-byte reads through the first 4 pages: each page is reached by
    // eight reads, of which the first marks it.
    for off in (0..4 * PAGE_SIZE).step_by(512) {
        c.hs.run(task, |e, now| e.read(now, task, h, off, 512))
            .unwrap();
    }
    assert_eq!(c.hs.engine.stats().pgactivate, 0);
    // A second pass is a second access.
    for off in (0..4 * PAGE_SIZE).step_by(512) {
        c.hs.run(task, |e, now| e.read(now, task, h, off, 512))
            .unwrap();
    }
    assert_eq!(c.hs.engine.stats().pgactivate, 4);
}

#[test]
fn a_stream_four_times_the_cache_leaves_the_hot_set_with_two_lists_not_with_clock() {
    for (lru, kept) in [("active-inactive", HOT_PAGES), ("clock", 0)] {
        let mut c = cache(lru);
        c.read_all(c.hot);
        c.read_all(c.hot);
        c.stream(256 * MIB);
        assert_eq!(c.hot_cached().0, kept, "lru = {lru}");
        // The stream's pages beyond what the rest of the cache holds were
        // reclaimed: it went through the cache four times.
        let room = 64 * MIB / PAGE_SIZE - kept;
        assert!(
            c.hs.engine.stats().reclaimed_pages >= 256 * MIB / PAGE_SIZE - room,
            "the stream went through the cache"
        );
    }
}

#[test]
fn a_page_back_soon_after_eviction_enters_active_one_back_late_does_not() {
    let mut c = cache("active-inactive");
    // An active set of 16 MiB, then a file read once that the stream
    // pushes out.
    c.read_all(c.hot);
    c.read_all(c.hot);
    let (_, dev) = (0, DeviceId(0));
    let once =
        c.hs.engine
            .add_file(c.hs.now, dev, DomainId(0), 8 * MIB)
            .unwrap();
    let once = (once, c.hs.engine.open(once).unwrap());
    c.read_all(once);
    let once_pages = 8 * MIB / PAGE_SIZE;
    let mut streamed = 0;
    while c.hs.engine.file_cached_pages(once.0).unwrap().0 > 0 {
        c.stream(MIB);
        streamed += 1;
        assert!(streamed < 256, "the file read once never left");
    }
    // Back at once: its distance (the pages evicted since) is within the
    // 4096 active pages.
    c.read_all(once);
    let s = c.hs.engine.stats();
    assert_eq!(s.workingset_activate, once_pages);
    assert_eq!(
        c.hs.engine.file_cached_pages(once.0),
        Some((once_pages, once_pages))
    );
    assert_eq!(c.hot_cached(), (HOT_PAGES, HOT_PAGES));
    c.hs.engine.check_invariants();
}

#[test]
fn a_page_back_after_more_than_the_active_list_was_evicted_stays_inactive() {
    let mut c = cache("active-inactive");
    c.read_all(c.hot);
    c.read_all(c.hot);
    let once =
        c.hs.engine
            .add_file(c.hs.now, DeviceId(0), DomainId(0), 8 * MIB)
            .unwrap();
    let once = (once, c.hs.engine.open(once).unwrap());
    c.read_all(once);
    // 128 MiB streamed: every shadow is 32,768 pages old, the active list
    // 4,096 pages.
    c.stream(128 * MIB);
    assert_eq!(c.hs.engine.file_cached_pages(once.0).unwrap().0, 0);
    c.read_all(once);
    assert_eq!(c.hs.engine.stats().workingset_activate, 0);
    assert_eq!(
        c.hs.engine.file_cached_pages(once.0),
        Some((8 * MIB / PAGE_SIZE, 0))
    );
}

#[test]
fn switching_to_clock_at_run_time_drains_the_active_list() {
    let mut c = cache("active-inactive");
    c.read_all(c.hot);
    c.read_all(c.hot);
    assert_eq!(c.hot_cached().1, HOT_PAGES);
    c.hs.engine.set_knob("lru", "clock").unwrap();
    c.stream(256 * MIB);
    assert_eq!(c.hot_cached(), (0, 0), "clock: the stream took the hot set");
    assert_eq!(c.hs.engine.stats().active_pages, 0);
    c.hs.engine.set_knob("lru", "active-inactive").unwrap();
    c.read_all(c.hot);
    c.read_all(c.hot);
    assert_eq!(c.hot_cached(), (HOT_PAGES, HOT_PAGES));
    assert_eq!(
        c.hs.engine.set_knob("lru", "2q"),
        Err(KnobError::Invalid {
            knob: "lru".into(),
            value: "2q".into(),
            reason: "expected 'active-inactive' or 'clock'".into(),
        })
    );
}

/// Runtimes serve cached reads from an index of their own and note the
/// frames (frame_notes.rs): frames noted twice are a second access, found
/// when the hand comes; frames noted once only a first.
#[test]
fn frames_a_runtime_read_twice_are_activated_when_the_hand_comes() {
    for (notes, kept) in [(2, (HOT_PAGES, HOT_PAGES)), (1, (0, 0))] {
        let mut c = cache("active-inactive");
        let (hot, h) = c.hot;
        let task = c.task;
        // Its pages come in by writes, which are no access.
        for off in (0..16 * MIB).step_by(MIB as usize) {
            c.hs.run(task, |e, now| e.write(now, task, h, off, MIB))
                .unwrap();
        }
        c.hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
        let frames: Vec<u32> = (0..HOT_PAGES)
            .map(|p| c.hs.engine.page_frame(hot, p).unwrap())
            .collect();
        for _ in 0..notes {
            c.hs.engine.note_referenced_frames(&frames);
        }
        c.stream(256 * MIB);
        assert_eq!(c.hot_cached(), kept, "noted {notes} times");
    }
}
