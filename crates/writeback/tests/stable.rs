//! Rewrites of pages under writeback keep every byte, whatever writers do
//! with such pages (`stable_writes` none, wait or snapshot), and when the
//! mode changes while they write: after a sync the cache and the disk
//! equal the model.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
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
/// the device's stable_writes through them. Returns pages snapshotted
/// (None where the test cannot run here).
fn rewrite_and_check(name: &str, initial: &str, modes: &[&str]) -> Option<u64> {
    let dir = common::direct_test_dir(name)?;
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
    let snapshots = cache.stats().devices[0].snapshot_pages;
    common::sync_and_check_model(name, cache, file, &path, &model);
    let _ = std::fs::remove_dir_all(&dir);
    Some(snapshots)
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
    if let Some(snapshots) = rewrite_and_check("stable-snapshot", "snapshot", &[]) {
        assert!(
            snapshots > 0,
            "writers met pages under writeback and got copies"
        );
    }
}

#[test]
fn changing_the_mode_under_load_keeps_every_byte() {
    rewrite_and_check(
        "stable-changing",
        "none",
        &["snapshot", "wait", "none", "auto", "snapshot"],
    );
}
