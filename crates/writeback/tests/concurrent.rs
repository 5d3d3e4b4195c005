//! Several threads write interleaved, unaligned stripes that share pages,
//! while readers read across them: no write is lost to another's
//! read-modify-write of a shared page, readers never see a byte its
//! stripe's owner did not write, and the end result equals the model.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use writeback::{Cache, OpenOptions};

const WRITERS: usize = 3;
const STRIPE: usize = 1000; // not a divisor of 4096: stripes share pages
const STRIPES_PER_WRITER: usize = 4000; // 12 MB: more than the cache holds
const VERSIONS: u8 = 8;
const LEN: usize = WRITERS * STRIPE * STRIPES_PER_WRITER;

fn owner(pos: usize) -> usize {
    (pos / STRIPE) % WRITERS
}

fn byte(writer: usize, version: u8) -> u8 {
    (writer as u8) << 4 | version
}

#[test]
fn concurrent_writers_and_readers_match_the_model() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("concurrent-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    if !writeback::io::supports_direct(&dir) {
        return;
    }
    // A small cache, so writeback and reclaim run while the threads work.
    let cache = Cache::builder()
        .knob("memory", "8MiB")
        .unwrap()
        .knob("dirty_background_bytes", "256KiB")
        .unwrap()
        .calibrate(false)
        .build()
        .unwrap();
    let path = dir.join("f");
    let file = cache.open(&path, OpenOptions { create: true }).unwrap();
    file.set_len(LEN as u64).unwrap();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let mut writers = Vec::new();
        for w in 0..WRITERS {
            let file = cache.open(&path, OpenOptions::default()).unwrap();
            writers.push(s.spawn(move || {
                for version in 1..=VERSIONS {
                    let data = vec![byte(w, version); STRIPE];
                    for k in 0..STRIPES_PER_WRITER {
                        let at = (k * WRITERS + w) * STRIPE;
                        file.write_at(&data, at as u64).unwrap();
                    }
                }
            }));
        }
        for r in 0..2 {
            let file = cache.open(&path, OpenOptions::default()).unwrap();
            let done = &done;
            s.spawn(move || {
                let mut buf = vec![0u8; 10_000];
                let mut at = r * 4321;
                while !done.load(Ordering::Acquire) {
                    let n = file.read_at(&mut buf, at as u64).unwrap();
                    for (i, &b) in buf[..n].iter().enumerate() {
                        let pos = at + i;
                        let ok = b == 0
                            || (b >> 4 == owner(pos) as u8 && (1..=VERSIONS).contains(&(b & 15)));
                        assert!(
                            ok,
                            "byte {pos} is {b:#x}: not written by its owner {}",
                            owner(pos)
                        );
                    }
                    at = (at + 7919) % LEN;
                }
            });
        }
        // Writers finish; then stop the readers.
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Release);
    });
    file.sync_data().unwrap();
    let expect: Vec<u8> = (0..LEN).map(|p| byte(owner(p), VERSIONS)).collect();
    let mut got = vec![0u8; LEN];
    assert_eq!(file.read_at(&mut got, 0).unwrap(), LEN);
    assert!(got == expect, "cache content equals the model");
    drop(file);
    drop(cache);
    assert!(
        std::fs::read(&path).unwrap() == expect,
        "disk content equals the model"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
