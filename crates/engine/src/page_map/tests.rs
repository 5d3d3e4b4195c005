//! The map alone: pages in and out, bits, and the two lock-free rules
//! (7, 8) under threads, with frames of the test's own (a lock and a tag
//! each) standing for a runtime's.

use super::*;
use crate::action::Action;
use crate::config::Config;
use crate::engine::Engine;
use crate::ids::PAGE_SIZE;
use crate::time::Instant;
use std::sync::{Arc, Barrier, RwLock};

fn engine() -> Engine {
    let mut config = Config::default();
    config.set("memory", "16MiB").expect("a valid budget");
    Engine::new(config, Instant(0))
}

#[test]
fn pages_come_and_go() {
    let (e, map) = (engine(), PageMap::new(8));
    assert_eq!(map.frame(FileId(0), 5), None);
    map.copied_in(FileId(0), 5 * PAGE_SIZE + 10, 100, 2);
    map.read_done(&e, FileId(1), 0, 4); // nothing cached in the engine
    map.copied_in(FileId(1), 5 * PAGE_SIZE, 2 * PAGE_SIZE, 3);
    assert_eq!(
        map.pages(),
        vec![(FileId(0), 5, 2), (FileId(1), 5, 3), (FileId(1), 6, 4)]
    );
    assert!(map.overwritable(2) && map.overwritable(3) && map.overwritable(4));
    assert_eq!(
        map.with_frame(FileId(1), 6, |f, bit| (f, bit.get())),
        Some((4, true))
    );
    let unmapped = Action::Unmapped {
        file: FileId(1),
        first: 0,
        end: 6,
    };
    map.on_action(&e, &unmapped);
    assert_eq!(map.pages(), vec![(FileId(0), 5, 2), (FileId(1), 6, 4)]);
    assert!(!map.overwritable(3), "gone with its page");
    map.on_action(&e, &Action::ZeroFrames { first: 4, count: 1 });
    assert!(!map.overwritable(4) && map.overwritable(2));
    assert_eq!(map.len(), 2);
    let set = map.bits.iter().filter(|b| b.get()).count();
    assert_eq!(
        (set, map.bits_set.load(Ordering::Relaxed)),
        (1, 1),
        "counted as set"
    );
}

/// A frame of the test's runtime: its lock, and the page it holds data of.
type TestFrames = Vec<RwLock<(u32, PageIndex)>>;

/// Rule 7: a reader that found a page holds its frame, and the frame
/// holds that page's data for as long as the reader holds it, while the
/// keeper unmaps the page and the runtime gives the frame to another.
#[test]
fn readers_never_see_a_frame_reused_under_them() {
    const ROUNDS: u32 = 2000;
    let e = engine();
    let map = Arc::new(PageMap::new(2));
    let frames: Arc<TestFrames> = Arc::new((0..2).map(|_| RwLock::new((0, 0))).collect());
    let start = Arc::new(Barrier::new(3));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (map, frames, start) = (map.clone(), frames.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                let mut seen = 0u32;
                for i in 0..ROUNDS * 20 {
                    let page = ((i + r) % 2) as PageIndex;
                    let held = map.with_frame(FileId(0), page, |f, _| {
                        frames[f as usize].read().expect("not poisoned")
                    });
                    if let Some(data) = held {
                        assert_eq!(*data, (0, page), "the frame holds the page's data");
                        std::hint::spin_loop();
                        assert_eq!(*data, (0, page), "and goes on holding it");
                        seen += 1;
                    }
                }
                seen
            })
        })
        .collect();
    start.wait();
    // The keeper's side, as under the engine's lock: pages 0 and 1 take
    // turns in frame 0; each leaves before the frame is written for the
    // other (rule 3), and every write of a frame takes its write lock.
    for round in 0..ROUNDS {
        let page = (round % 2) as PageIndex;
        *frames[0].write().expect("not poisoned") = (0, page);
        map.copied_in(FileId(0), page * PAGE_SIZE, PAGE_SIZE, 0);
        let unmapped = Action::Unmapped {
            file: FileId(0),
            first: page,
            end: page + 1,
        };
        map.on_action(&e, &unmapped);
    }
    for r in readers {
        r.join().expect("a reader saw another page's data");
    }
    assert!(map.is_empty());
}

/// Rule 8: once the keeper has cleared a frame's bit and the runtime has
/// passed the frame's lock (as it does to copy or lend a request's
/// frames), no overwriter changes the frame any more.
#[test]
fn overwriters_stop_once_the_bit_is_cleared_and_the_lock_passed() {
    let e = engine();
    let map = Arc::new(PageMap::new(1));
    let frame = Arc::new(RwLock::new(0u64));
    map.copied_in(FileId(0), 0, PAGE_SIZE, 0);
    let start = Arc::new(Barrier::new(3));
    let writers: Vec<_> = (0..2)
        .map(|_| {
            let (map, frame, start) = (map.clone(), frame.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                let mut wrote = 0u64;
                for _ in 0..200_000 {
                    let found = map.with_frame(FileId(0), 0, |_, bit| {
                        (frame.write().expect("not poisoned"), bit)
                    });
                    let Some((mut data, bit)) = found else { break };
                    if !bit.get() {
                        break;
                    }
                    *data += 1;
                    wrote += 1;
                }
                wrote
            })
        })
        .collect();
    start.wait();
    std::thread::yield_now();
    map.on_action(&e, &Action::ZeroFrames { first: 0, count: 1 });
    let carried = *frame.read().expect("not poisoned");
    let wrote: u64 = writers.into_iter().map(|w| w.join().expect("ran")).sum();
    assert_eq!(
        *frame.read().expect("not poisoned"),
        carried,
        "nothing after"
    );
    assert_eq!(
        carried, wrote,
        "every overwrite is in what the lock pass saw"
    );
}
