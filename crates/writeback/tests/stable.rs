//! Rewrites of pages under writeback keep every byte, whatever writers do
//! with such pages (`stable_writes` none, wait or snapshot), and when the
//! mode changes while they write: after a sync the cache and the disk
//! equal the model.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use writeback::io::Faults;
use writeback::{Cache, OpenOptions};

const PAGE: usize = 4096;
/// A small hot set: rewrites keep landing on pages being written back.
const PAGES: usize = 64;
const WRITES: usize = 20_000;

/// The byte write `n` puts at its offsets: changes with every write.
fn stamp(n: usize) -> u8 {
    (n % 251) as u8 + 1
}

/// Write `n`: (offset, len), pages whole or in part, some across two pages.
fn extent(n: usize) -> (usize, usize) {
    let x = n.wrapping_mul(2_654_435_761) % (PAGES * PAGE);
    let len = match n % 3 {
        0 => PAGE,
        1 => 100 + n % 1000,
        _ => 2 * PAGE,
    };
    (x.min(PAGES * PAGE - len), len)
}

/// Runs the rewrites with a syncing thread beside them (so writes meet
/// pages under writeback) and, if `modes` is not empty, a thread cycling
/// the device's stable_writes through them. How often writes meet pages
/// under writeback here is up to the threads; the deterministic case is
/// `a_writer_meeting_pages_under_writeback_gets_copies_and_does_not_wait`.
fn rewrite_and_check(name: &str, initial: &str, modes: &[&str]) {
    let Some(dir) = common::direct_test_dir(name) else {
        return;
    };
    let cache = Cache::builder()
        .knob("memory", "16MiB")
        .unwrap()
        .device_knob("stable_writes", initial)
        .unwrap()
        .calibrate(false)
        .build()
        .unwrap();
    let path = dir.join("f");
    let file = cache.open(&path, OpenOptions { create: true }).unwrap();
    let device = cache.device_names()[0].clone();
    let mut model = vec![0u8; PAGES * PAGE];
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let syncer = cache.open(&path, OpenOptions::default()).unwrap();
        let done = &done;
        s.spawn(move || {
            while !done.load(Ordering::Acquire) {
                syncer.sync_data().unwrap();
                // Let dirty pages gather: a sync of a few pages is a commit,
                // written by this thread itself in a moment, and a writer
                // would seldom meet its pages under writeback.
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        });
        if !modes.is_empty() {
            let (cache, device) = (&cache, &device);
            s.spawn(move || {
                let mut i = 0;
                while !done.load(Ordering::Acquire) {
                    cache
                        .set_device_knob(device, "stable_writes", modes[i % modes.len()])
                        .unwrap();
                    i += 1;
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
            });
        }
        for n in 0..WRITES {
            let (at, len) = extent(n);
            let data = vec![stamp(n); len];
            file.write_at(&data, at as u64).unwrap();
            model[at..at + len].copy_from_slice(&data);
        }
        done.store(true, Ordering::Release);
    });
    common::sync_and_check_model(name, cache, file, &path, &model);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rewrites_under_writeback_keep_every_byte_with_none() {
    rewrite_and_check("stable-none", "none", &[]);
}

#[test]
fn rewrites_under_writeback_keep_every_byte_with_wait() {
    rewrite_and_check("stable-wait", "wait", &[]);
}

#[test]
fn rewrites_under_writeback_keep_every_byte_with_snapshot() {
    rewrite_and_check("stable-snapshot", "snapshot", &[]);
}

/// Releases the writes the seam holds when dropped.
struct ReleaseOnDrop<'a>(&'a Faults);

impl Drop for ReleaseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.release_held();
    }
}

/// How long a test waits for a condition that holds at once on an idle
/// machine (a write-back submitted, a write returned).
const PATIENCE: Duration = Duration::from_secs(20);

/// With `stable_writes = snapshot`, a writer that meets its pages under
/// writeback gets copies and does not wait: the fault seam holds the
/// write-back in flight while the writer rewrites every page, so each
/// rewrite meets one, deterministically. The disk then holds the
/// rewrites, and the write-back in flight wrote the old data from the
/// pages it kept.
#[test]
fn a_writer_meeting_pages_under_writeback_gets_copies_and_does_not_wait() {
    let Some(dir) = common::direct_test_dir("stable-held") else {
        return;
    };
    let faults = Faults::new();
    let cache = Cache::builder()
        .knob("memory", "16MiB")
        .unwrap()
        .device_knob("stable_writes", "snapshot")
        .unwrap()
        .calibrate(false)
        .faults(faults.clone())
        .build()
        .unwrap();
    let path = dir.join("f");
    let file = cache.open(&path, OpenOptions { create: true }).unwrap();
    let old = vec![stamp(1); PAGES * PAGE];
    file.write_at(&old, 0).unwrap();
    faults.hold_writes(&path).unwrap();
    let new = vec![stamp(2); PAGES * PAGE];
    std::thread::scope(|s| {
        // Released also if an assertion fails: the sync waits for them.
        let _release = ReleaseOnDrop(&faults);
        let syncer = file.reopen().unwrap();
        let sync = s.spawn(move || syncer.sync_data());
        let deadline = Instant::now() + PATIENCE;
        while faults.held() == 0 || cache.stats().writeback_pages < PAGES as u64 {
            assert!(Instant::now() < deadline, "the sync's writes never came");
            std::thread::sleep(Duration::from_millis(1));
        }
        let (done_tx, done_rx) = mpsc::channel();
        let writer = file.reopen().unwrap();
        let new = &new;
        s.spawn(move || {
            for p in 0..PAGES {
                writer
                    .write_at(&new[p * PAGE..][..PAGE], (p * PAGE) as u64)
                    .unwrap();
            }
            let _ = done_tx.send(());
        });
        let returned = done_rx.recv_timeout(PATIENCE).is_ok();
        // Whatever happened, let the write-back finish before asserting.
        let held = faults.held();
        faults.release_held();
        sync.join().unwrap().unwrap();
        assert!(
            returned,
            "the writer waited for the write-back ({held} writes held)"
        );
    });
    assert_eq!(
        cache.stats().devices[0].snapshot_pages,
        PAGES as u64,
        "each rewritten page was copied once"
    );
    common::sync_and_check_model("stable-held", cache, file, &path, &new);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn changing_the_mode_under_load_keeps_every_byte() {
    rewrite_and_check(
        "stable-changing",
        "none",
        &["snapshot", "wait", "none", "auto", "snapshot"],
    );
}
