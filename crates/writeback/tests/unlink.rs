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

#[test]
fn remove_later_keeps_the_name_until_the_release_removes_it() {
    let Some(dir) = common::direct_test_dir("remove-later") else {
        return;
    };
    let cache = cache();
    let path = dir.join("orphan");
    let file = cache.open(&path, OpenOptions { create: true }).unwrap();
    let data = vec![9u8; MIB];
    for i in 0..40 {
        file.write_at(&data, (i * MIB) as u64).unwrap();
    }
    file.sync_data().unwrap();
    cache.remove_later(&path).unwrap();
    // An open handle holds the release back, and with it the name.
    cache.sync().unwrap();
    assert!(path.exists(), "the name stays while the file is released");
    assert_eq!(backlog(&cache).0, 0);
    drop(file);
    cache.sync().unwrap();
    assert!(!path.exists(), "the release's last step removed the name");
    assert_eq!(backlog(&cache), (1, 3));
    // A name among two: removed at once, the other keeps the data.
    let a = dir.join("a");
    let b = dir.join("b");
    std::fs::write(&a, b"kept").unwrap();
    std::fs::hard_link(&a, &b).unwrap();
    cache.remove_later(&a).unwrap();
    assert!(!a.exists());
    assert_eq!(std::fs::read(&b).unwrap(), b"kept");
    cache.sync().unwrap();
    assert_eq!(backlog(&cache).0, 1, "nothing to release for a linked file");
    let e = cache.remove_later(dir.join("nope")).unwrap_err();
    assert!(
        matches!(&e, writeback::Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound),
        "{e:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_large_set_len_returns_at_once_and_the_backlog_cuts_behind_it() {
    let Some(dir) = common::direct_test_dir("set-len") else {
        return;
    };
    let cache = cache();
    let path = dir.join("f");
    let file = cache.open(&path, OpenOptions { create: true }).unwrap();
    let data = vec![5u8; MIB];
    for i in 0..48 {
        file.write_at(&data, (i * MIB) as u64).unwrap();
    }
    file.sync_data().unwrap();
    file.set_len(4096).unwrap();
    assert_eq!(file.len(), 4096);
    // At once, an extending write: it waits for the cut, and the hole it
    // leaves reads as zeros, not as the old data.
    file.write_at(b"end", (8 * MIB) as u64).unwrap();
    let mut hole = vec![1u8; 8 * MIB - 4096];
    assert_eq!(file.read_at(&mut hole, 4096).unwrap(), hole.len());
    assert!(
        hole.iter().all(|&b| b == 0),
        "old data shows through the hole"
    );
    let mut head = vec![0u8; 4096];
    file.read_at(&mut head, 0).unwrap();
    assert!(head.iter().all(|&b| b == 5));
    cache.sync().unwrap();
    let b = &cache.stats().devices[0].backlog;
    assert_eq!((b.cuts_done, b.items_done), (1, 0));
    assert_eq!(b.steps_done, 3, "48 MiB less 4 KiB: three steps");
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        (8 * MIB + 3) as u64
    );
    // The same through the backing file, read cold by a new cache.
    drop(file);
    drop(cache);
    let back = std::fs::read(&path).unwrap();
    assert!(back[4096..8 * MIB].iter().all(|&b| b == 0));
    assert_eq!(&back[8 * MIB..], b"end");
    let _ = std::fs::remove_dir_all(&dir);
}
