//! Several threads write interleaved, unaligned stripes that share pages,
//! while readers read across them: no write is lost to another's
//! read-modify-write of a shared page, readers never see a byte its
//! stripe's owner did not write nor a byte older than one they saw before,
//! and the end result equals the model. Readers racing truncation never
//! see data from before it once they have seen data from after it.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use writeback::{Cache, OpenOptions};

const WRITERS: usize = 3;
const VERSIONS: u8 = 8;
/// Bytes of the file: more than the cache holds.
const LEN_MIN: usize = 12_000_000;

fn owner(pos: usize, stripe: usize) -> usize {
    (pos / stripe) % WRITERS
}

fn byte(writer: usize, version: u8) -> u8 {
    (writer as u8) << 4 | version
}

/// Stripes of 1000 bytes (not a divisor of 4096: stripes share pages),
/// copied under the engine's lock.
#[test]
fn concurrent_writers_and_readers_match_the_model() {
    writers_and_readers("concurrent", 1000);
}

/// Stripes of 70,000 bytes: copied outside the engine's lock (page locks),
/// still sharing pages with their neighbours.
#[test]
fn concurrent_long_writers_and_readers_match_the_model() {
    writers_and_readers("concurrent-long", 70_000);
}

fn writers_and_readers(name: &str, stripe: usize) {
    let Some(dir) = common::direct_test_dir(name) else {
        return;
    };
    let stripes_per_writer = LEN_MIN.div_ceil(WRITERS * stripe);
    let len = WRITERS * stripe * stripes_per_writer;
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
    file.set_len(len as u64).unwrap();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let mut writers = Vec::new();
        for w in 0..WRITERS {
            let file = cache.open(&path, OpenOptions::default()).unwrap();
            writers.push(s.spawn(move || {
                for version in 1..=VERSIONS {
                    let data = vec![byte(w, version); stripe];
                    for k in 0..stripes_per_writer {
                        let at = (k * WRITERS + w) * stripe;
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
                // The newest version seen of each byte.
                let mut seen = vec![0u8; len];
                while !done.load(Ordering::Acquire) {
                    let n = file.read_at(&mut buf, at as u64).unwrap();
                    for (i, &b) in buf[..n].iter().enumerate() {
                        let pos = at + i;
                        let ok = b == 0
                            || (b >> 4 == owner(pos, stripe) as u8
                                && (1..=VERSIONS).contains(&(b & 15)));
                        assert!(
                            ok,
                            "byte {pos} is {b:#x}: not written by its owner {}",
                            owner(pos, stripe)
                        );
                        assert!(
                            b & 15 >= seen[pos],
                            "byte {pos} went back from version {} to {}",
                            seen[pos],
                            b & 15
                        );
                        seen[pos] = b & 15;
                    }
                    at = (at + 7919) % len;
                }
            });
        }
        // Writers finish; then stop the readers.
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Release);
    });
    let expect: Vec<u8> = (0..len).map(|p| byte(owner(p, stripe), VERSIONS)).collect();
    common::sync_and_check_model(name, cache, file, &path, &expect);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Round k writes k over the whole file, then cuts it to half and grows it
/// back: while it stays so (a sequence number even and unchanged across a
/// read), the first half reads k and the second half zeros, never the data
/// from before the cut.
#[test]
fn readers_racing_truncation_see_holes_not_old_data() {
    const ROUNDS: u8 = 40;
    const SIZE: usize = 256 * 1024;
    let Some(dir) = common::direct_test_dir("truncate-race") else {
        return;
    };
    let cache = Cache::builder()
        .knob("memory", "4MiB")
        .unwrap()
        .calibrate(false)
        .build()
        .unwrap();
    let path = dir.join("f");
    let file = cache.open(&path, OpenOptions { create: true }).unwrap();
    // Odd: the writer is changing the file; even (2k): round k's holes stand.
    let seq = AtomicU64::new(1);
    let hole_reads = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let readers_alive = AtomicU64::new(2);
    std::thread::scope(|s| {
        for r in 0..2 {
            let file = cache.open(&path, OpenOptions::default()).unwrap();
            let (seq, hole_reads, done) = (&seq, &hole_reads, &done);
            let alive = Alive(&readers_alive);
            s.spawn(move || {
                let _alive = alive;
                let mut buf = vec![0u8; 6000];
                let mut at = r * 1234;
                while !done.load(Ordering::Acquire) {
                    let before = seq.load(Ordering::Acquire);
                    let n = file.read_at(&mut buf, at as u64).unwrap();
                    if before % 2 == 0 && seq.load(Ordering::Acquire) == before {
                        let round = (before / 2) as u8;
                        assert_eq!(n, buf.len());
                        for (i, &b) in buf.iter().enumerate() {
                            let want = if at + i < SIZE / 2 { round } else { 0 };
                            assert_eq!(b, want, "byte {} in round {round}", at + i);
                        }
                        hole_reads.fetch_add(1, Ordering::AcqRel);
                    }
                    at = (at + 4099) % (SIZE - buf.len());
                }
            });
        }
        for round in 1..=ROUNDS {
            file.write_at(&vec![round; SIZE], 0).unwrap();
            file.set_len(SIZE as u64 / 2).unwrap();
            file.set_len(SIZE as u64).unwrap();
            let reads = hole_reads.load(Ordering::Acquire);
            seq.store(2 * round as u64, Ordering::Release);
            // Let the readers look at the holes (bounded: they read in µs).
            let deadline = Instant::now() + Duration::from_secs(10);
            while hole_reads.load(Ordering::Acquire) < reads + 4
                && Instant::now() < deadline
                && readers_alive.load(Ordering::Acquire) == 2
            {
                std::thread::yield_now();
            }
            seq.store(2 * round as u64 + 1, Ordering::Release);
        }
        done.store(true, Ordering::Release);
    });
    assert!(
        hole_reads.load(Ordering::Acquire) >= 4 * ROUNDS as u64,
        "the readers checked every round"
    );
    drop(file);
    drop(cache);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Counts a reader thread down when it ends, also by a failed assertion.
struct Alive<'a>(&'a AtomicU64);

impl Drop for Alive<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
