//! Write-back errors through the fault seam (`CacheBuilder::faults`): each
//! handle's next sync reports a failed write-back once; the failed pages
//! stay dirty, so a later sync returns Ok only once they are really
//! written; nothing is lost.

mod common;

use writeback::io::Faults;
use writeback::{Cache, Error, IoErrorKind, OpenOptions};

#[test]
fn a_failed_write_back_is_reported_once_to_every_handle_and_then_retried() {
    let Some(dir) = common::direct_test_dir("faults") else {
        return;
    };
    let faults = Faults::new();
    let cache = Cache::builder()
        .knob("memory", "64MiB")
        .unwrap()
        .calibrate(false)
        .faults(faults.clone())
        .build()
        .unwrap();
    let path = dir.join("f");
    let a = cache.open(&path, OpenOptions { create: true }).unwrap();
    let b = a.reopen().unwrap();
    let data = vec![0x5au8; 1 << 20];
    a.write_at(&data, 0).unwrap();
    // Every write to it fails until cleared.
    faults.fail_writes(&path, libc::EIO, 1000).unwrap();
    let eio = |r: Result<(), Error>| matches!(r, Err(Error::WriteBack(IoErrorKind::Io)));
    assert!(eio(a.sync_data()), "the first handle hears of it");
    assert!(faults.armed() < 1000, "writes failed");
    // Never silently clean: the failed pages are dirty again.
    assert_eq!(cache.stats().dirty_pages, 256);
    faults.clear();
    // The second handle's sync writes them (the disk works again) and
    // still reports the error it has not heard of, once.
    assert!(eio(b.sync_data()), "and the second, once too");
    assert_eq!(cache.stats().dirty_pages, 0);
    a.sync_data().unwrap();
    b.sync_data().unwrap();
    // ENOSPC is told as such.
    a.write_at(b"tail", 1 << 20).unwrap();
    faults.fail_writes(&path, libc::ENOSPC, 1).unwrap();
    assert!(matches!(
        b.sync_all(),
        Err(Error::WriteBack(IoErrorKind::NoSpace))
    ));
    b.sync_all().unwrap();
    drop((a, b));
    drop(cache);
    let back = std::fs::read(&path).unwrap();
    assert_eq!(back.len(), (1 << 20) + 4);
    assert!(back[..1 << 20] == data[..] && &back[1 << 20..] == b"tail");
    let _ = std::fs::remove_dir_all(&dir);
}
