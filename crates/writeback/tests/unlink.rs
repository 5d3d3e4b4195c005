//! Cache::unlink: the name goes at once; the release of the file's data
//! (its pages, and its blocks on the backing filesystem, freed in steps)
//! is deferred work on the device's backlog, after the last handle closes;
//! sync waits for it.

mod common;

use std::time::Instant;
use writeback::{Cache, OpenOptions};

const MIB: usize = 1 << 20;

fn cache() -> Cache {
    Cache::builder()
        .knob("memory", "64MiB")
        .unwrap()
        .calibrate(false)
        .build()
        .unwrap()
}

/// (files released, release steps) over the cache's devices.
fn backlog(cache: &Cache) -> (u64, u64) {
    let s = cache.stats();
    let items = s.devices.iter().map(|d| d.backlog.items_done).sum();
    let steps = s.devices.iter().map(|d| d.backlog.steps_done).sum();
    (items, steps)
}

#[test]
fn an_unlinked_file_is_released_in_steps_behind_the_unlink() {
    let Some(dir) = common::direct_test_dir("unlink") else {
        return;
    };
    let cache = cache();
    let path = dir.join("big");
    let file = cache.open(&path, OpenOptions { create: true }).unwrap();
    // 40 MiB, written back: three release steps (16 + 16 MiB cut, then the
    // removal of the last 8 MiB).
    let data = vec![7u8; MIB];
    for i in 0..40 {
        file.write_at(&data, (i * MIB) as u64).unwrap();
    }
    file.sync_data().unwrap();
    drop(file);
    let start = Instant::now();
    cache.unlink(&path).unwrap();
    let took = start.elapsed();
    assert!(!path.exists(), "the name is gone when unlink returns");
    assert!(took.as_secs() < 5, "unlink took {took:?}");
    cache.sync().unwrap();
    assert_eq!(backlog(&cache), (1, 3));
    assert_eq!(cache.stats().cached_pages, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_open_when_unlinked_is_released_after_its_last_close() {
    let Some(dir) = common::direct_test_dir("unlink-open") else {
        return;
    };
    let cache = cache();
    let path = dir.join("f");
    let file = cache.open(&path, OpenOptions { create: true }).unwrap();
    file.write_at(b"still here", 0).unwrap();
    cache.unlink(&path).unwrap();
    assert!(!path.exists());
    // The open handle keeps working, dirty data and all.
    let mut buf = [0u8; 10];
    assert_eq!(file.read_at(&mut buf, 0).unwrap(), 10);
    assert_eq!(&buf, b"still here");
    cache.sync().unwrap();
    assert_eq!(backlog(&cache).0, 0, "not while open");
    drop(file);
    cache.sync().unwrap();
    assert_eq!(backlog(&cache).0, 1);
    // A file the cache never opened goes through the backlog too.
    let other = dir.join("never-opened");
    std::fs::write(&other, vec![1u8; 3 * MIB]).unwrap();
    cache.unlink(&other).unwrap();
    assert!(!other.exists());
    cache.sync().unwrap();
    assert_eq!(backlog(&cache).0, 2);
    // Errors name the path; other names keep the data (nothing released).
    let e = cache.unlink(dir.join("missing")).unwrap_err().to_string();
    assert!(e.contains("missing") && e.contains("No such file"), "{e}");
    let a = dir.join("a");
    std::fs::write(&a, b"x").unwrap();
    std::fs::hard_link(&a, dir.join("b")).unwrap();
    cache.unlink(&a).unwrap();
    cache.sync().unwrap();
    assert_eq!(backlog(&cache).0, 2);
    assert_eq!(std::fs::read(dir.join("b")).unwrap(), b"x");
    let _ = std::fs::remove_dir_all(&dir);
}
