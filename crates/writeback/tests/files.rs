//! The library on real files: what is written reads back, through the
//! cache and after it is gone; partial pages; several handles; lengths.

mod common;

use common::pattern;
use std::path::PathBuf;
use writeback::{Cache, OpenOptions};

fn dir(name: &str) -> Option<PathBuf> {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("files-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    if !writeback::io::supports_direct(&d) {
        wb_testkit::skip(&format!("{} does not support O_DIRECT", d.display()));
        return None;
    }
    Some(d)
}

fn cache(memory: &str) -> Cache {
    Cache::builder()
        .knob("memory", memory)
        .unwrap()
        .calibrate(false)
        .build()
        .unwrap()
}

const CREATE: OpenOptions = OpenOptions { create: true };

#[test]
fn write_read_back_then_after_the_cache_is_gone() {
    let Some(d) = dir("basic") else { return };
    let path = d.join("f");
    let data = pattern(1, 3 * 1024 * 1024 + 123);
    {
        let c = cache("64MiB");
        let f = c.open(&path, CREATE).unwrap();
        f.write_at(&data, 7).unwrap();
        assert_eq!(f.len(), data.len() as u64 + 7);
        let mut back = vec![0u8; data.len()];
        assert_eq!(f.read_at(&mut back, 7).unwrap(), data.len());
        assert!(back == data, "read through the cache");
        f.sync_data().unwrap();
    }
    // A new cache reads from the device.
    let c = cache("64MiB");
    let f = c.open(&path, OpenOptions::default()).unwrap();
    assert_eq!(f.len(), data.len() as u64 + 7);
    let mut back = vec![0u8; data.len() + 100];
    assert_eq!(
        f.read_at(&mut back, 7).unwrap(),
        data.len(),
        "short read at the end"
    );
    assert!(back[..data.len()] == data[..], "read from the device");
    let mut head = [1u8; 7];
    f.read_at(&mut head, 0).unwrap();
    assert_eq!(head, [0u8; 7], "the hole before the data reads as zeros");
}

#[test]
fn partial_page_writes_keep_the_rest_of_the_page() {
    let Some(d) = dir("partial") else { return };
    let path = d.join("f");
    let base = pattern(2, 64 * 1024);
    {
        let c = cache("16MiB");
        let f = c.open(&path, CREATE).unwrap();
        f.write_at(&base, 0).unwrap();
    } // dropped: written back
    let c = cache("16MiB");
    let f = c.open(&path, OpenOptions::default()).unwrap();
    let mut model = base.clone();
    for (i, &(off, len)) in [
        (100usize, 10usize),
        (4090, 20),
        (8192, 4096),
        (12_000, 9000),
    ]
    .iter()
    .enumerate()
    {
        let patch = pattern(10 + i as u64, len);
        f.write_at(&patch, off as u64).unwrap();
        model[off..off + len].copy_from_slice(&patch);
    }
    let mut back = vec![0u8; model.len()];
    f.read_at(&mut back, 0).unwrap();
    assert!(back == model);
    drop(f);
    drop(c);
    let on_disk = std::fs::read(&path).unwrap();
    assert!(on_disk == model, "what reached the disk matches");
}

#[test]
fn every_handle_sees_every_write() {
    let Some(d) = dir("handles") else { return };
    let c = cache("16MiB");
    let a = c.open(d.join("f"), CREATE).unwrap();
    let b = c.open(d.join("f"), OpenOptions::default()).unwrap();
    a.write_at(b"written through a", 4096 * 3 + 5).unwrap();
    let mut buf = [0u8; 17];
    assert_eq!(b.read_at(&mut buf, 4096 * 3 + 5).unwrap(), 17);
    assert_eq!(&buf, b"written through a");
    assert_eq!(b.len(), 4096 * 3 + 5 + 17);
}

#[test]
fn set_len_shrinks_and_grows_with_zeros() {
    let Some(d) = dir("setlen") else { return };
    let c = cache("16MiB");
    let f = c.open(d.join("f"), CREATE).unwrap();
    f.write_at(&[7u8; 10_000], 0).unwrap();
    f.set_len(5000).unwrap();
    assert_eq!(f.len(), 5000);
    f.set_len(10_000).unwrap();
    let mut back = vec![1u8; 10_000];
    assert_eq!(f.read_at(&mut back, 0).unwrap(), 10_000);
    assert!(back[..5000].iter().all(|&b| b == 7));
    assert!(
        back[5000..].iter().all(|&b| b == 0),
        "the regrown tail reads as zeros"
    );
    f.sync_all().unwrap();
    assert_eq!(std::fs::metadata(d.join("f")).unwrap().len(), 10_000);
}

#[test]
fn bad_paths_are_errors_with_the_path() {
    let c = cache("16MiB");
    let err = match c.open("/nonexistent/dir/f", CREATE) {
        Ok(_) => panic!("opened a file in a missing directory"),
        Err(e) => e,
    };
    assert!(err.to_string().contains("/nonexistent/dir/f"), "{err}");
    assert_eq!(err.errno(), libc_enoent());
}

fn libc_enoent() -> i32 {
    2
}

#[test]
fn many_files_stay_within_the_file_limit_and_keep_their_data() {
    let Some(d) = dir("many") else { return };
    const FILES: usize = 300;
    const MAX: usize = 64;
    let cache = Cache::builder()
        .knob("memory", "16MiB")
        .unwrap()
        .calibrate(false)
        .max_files(MAX)
        .build()
        .unwrap();
    for i in 0..FILES {
        let f = cache.open(d.join(format!("f{i}")), CREATE).unwrap();
        f.write_at(&pattern(i as u64, 5000 + i), 0).unwrap();
        if i % 50 == 49 {
            // Dirty files are busy; a sync makes them idle (and durable).
            cache.sync().unwrap();
        }
        assert!(
            cache.files() <= MAX + 50,
            "{} files held after {i} opens",
            cache.files()
        );
    }
    // Evicted files open again with their data, from the disk.
    for i in (0..FILES).step_by(7) {
        let f = cache
            .open(d.join(format!("f{i}")), OpenOptions::default())
            .unwrap();
        assert_eq!(f.len(), 5000 + i as u64);
        let mut got = vec![0u8; 5000 + i];
        assert_eq!(f.read_at(&mut got, 0).unwrap(), got.len());
        assert!(got == pattern(i as u64, 5000 + i), "file {i}");
    }
    drop(cache);
    for i in 0..FILES {
        let got = std::fs::read(d.join(format!("f{i}"))).unwrap();
        assert!(got == pattern(i as u64, 5000 + i), "file {i} on disk");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn evict_lets_go_of_idle_files_only() {
    let Some(d) = dir("evict") else { return };
    let cache = cache("16MiB");
    let path = d.join("f");
    let f = cache.open(&path, CREATE).unwrap();
    f.write_at(b"kept", 0).unwrap();
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(&path).unwrap();
    let (dev, ino) = (meta.dev(), meta.ino());
    assert_eq!(cache.files(), 1);
    assert!(!cache.evict(dev, ino).unwrap(), "open");
    drop(f);
    assert!(!cache.evict(dev, ino).unwrap(), "dirty");
    cache.sync().unwrap();
    assert!(cache.evict(dev, ino).unwrap(), "idle");
    assert_eq!(cache.files(), 0);
    assert!(!cache.evict(dev, ino).unwrap(), "already gone");
    assert_eq!(std::fs::read(&path).unwrap(), b"kept", "durable first");
    let f = cache.open(&path, OpenOptions::default()).unwrap();
    let mut buf = [0u8; 4];
    assert_eq!(f.read_at(&mut buf, 0).unwrap(), 4);
    assert_eq!(&buf, b"kept");
    drop(f);
    drop(cache);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn overwrites_of_dirty_pages_and_writes_past_a_cut_end_keep_length_and_data() {
    let Some(d) = dir("overwrite") else {
        return;
    };
    let cache = cache("16MiB");
    let path = d.join("f");
    let f = cache.open(&path, CREATE).unwrap();
    // Dirty pages, then overwritten in place (no engine call needed).
    f.write_at(&[1u8; 8192], 0).unwrap();
    f.write_at(&[2u8; 100], 4000).unwrap();
    // Cut into the first page; a write past the new end must extend the
    // file again, even though its page is still cached and dirty.
    f.set_len(1000).unwrap();
    f.write_at(&[3u8; 10], 2000).unwrap();
    assert_eq!(f.len(), 2010);
    let mut got = vec![9u8; 2010];
    assert_eq!(f.read_at(&mut got, 0).unwrap(), 2010);
    assert!(got[..1000].iter().all(|&b| b == 1));
    assert!(
        got[1000..2000].iter().all(|&b| b == 0),
        "zeros past the cut"
    );
    assert!(got[2000..].iter().all(|&b| b == 3));
    f.sync_data().unwrap();
    drop(f);
    drop(cache);
    assert_eq!(std::fs::read(&path).unwrap(), got, "the disk agrees");
    let _ = std::fs::remove_dir_all(&d);
}

/// A commit of a few scattered pages (written side by side on the
/// syncing thread's own ring) lands each page at its place before
/// `sync_data` returns, round after round; so does a single page.
#[test]
fn small_syncs_land_every_page_at_its_place() {
    let Some(d) = dir("commits") else { return };
    let path = d.join("f");
    let page = 4096usize;
    std::fs::write(&path, pattern(9, 64 * page)).unwrap();
    let c = cache("64MiB");
    let f = c.open(&path, OpenOptions::default()).unwrap();
    let mut expect = std::fs::read(&path).unwrap();
    let mut writes = 0;
    for round in 0..20u8 {
        // Three scattered pages, then one: each round's pages differ.
        let pages = [round as usize, 20 + 2 * round as usize, 63 - round as usize];
        let count = if round % 2 == 0 { 3 } else { 1 };
        // One write per stretch of adjacent pages (round 14: 48 and 49).
        let mut sorted = pages[..count].to_vec();
        sorted.sort();
        writes += 1 + sorted.windows(2).filter(|w| w[1] != w[0] + 1).count() as u64;
        for &p in &pages[..count] {
            let data = pattern(u64::from(round) << 8 | p as u64, page);
            f.write_at(&data, (p * page) as u64).unwrap();
            expect[p * page..(p + 1) * page].copy_from_slice(&data);
        }
        f.sync_data().unwrap();
        // O_DIRECT writes invalidate the backing file's page cache: a
        // plain read sees what reached the file.
        let on_disk = std::fs::read(&path).unwrap();
        assert!(
            on_disk == expect,
            "round {round}: the file differs after the sync"
        );
    }
    // Each round's sync was a commit, written by the syncing thread itself.
    assert_eq!(c.writes_on_caller(), writes, "commit writes on the caller");
    // 256 KiB is more than a commit: written by the backend.
    f.write_at(&pattern(99, 64 * page), 0).unwrap();
    f.sync_data().unwrap();
    assert_eq!(
        c.writes_on_caller(),
        writes,
        "a larger sync's writes on the caller"
    );
}

/// A log's commits: each appends whole pages and syncs. The writes make
/// the file longer; the engine hands them over one at a time per file
/// (`extending_writes = one-per-file`), so the syncing thread writes them
/// itself, as it does a commit within the file, and after every sync the
/// backing file holds exactly what was appended, at its length. A
/// partial last page still goes through the backend (`tail.rs`).
#[test]
fn appending_commits_are_written_by_the_syncing_thread_and_land_whole() {
    let Some(d) = dir("appends") else { return };
    let path = d.join("log");
    let page = 4096usize;
    let c = cache("64MiB");
    let f = c.open(&path, CREATE).unwrap();
    let mut expect = Vec::new();
    for round in 0..16u64 {
        // One page, then two: every round's write starts at the end.
        let data = pattern(round, page * (1 + round as usize % 2));
        f.write_at(&data, expect.len() as u64).unwrap();
        expect.extend_from_slice(&data);
        f.sync_data().unwrap();
        let on_disk = std::fs::read(&path).unwrap();
        assert!(
            on_disk == expect,
            "round {round}: the file differs after the sync"
        );
    }
    assert_eq!(
        c.writes_on_caller(),
        16,
        "one write per commit, on the caller"
    );
    // A partial last page: through the backend, and the length is exact.
    let tail = pattern(99, 1000);
    f.write_at(&tail, expect.len() as u64).unwrap();
    expect.extend_from_slice(&tail);
    f.sync_data().unwrap();
    assert_eq!(c.writes_on_caller(), 16, "a partial page is the backend's");
    assert_eq!(std::fs::read(&path).unwrap(), expect, "the disk agrees");
    drop(f);
    drop(c);
    let _ = std::fs::remove_dir_all(&d);
}

/// The runtime's tuning knobs (`deferred_copy_min`, `prefault_read_min`,
/// `release_batch`, `backing_files_percent`) change at run time through
/// `Cache::set_knob`, refuse bad values with the knob's own message, and
/// every setting keeps the data: writes copied under the lock or outside
/// it, reads prefaulted or not, read back the same.
#[test]
fn runtime_tuning_knobs_change_at_run_time_and_keep_the_data() {
    let Some(d) = dir("tuning") else { return };
    let c = cache("64MiB");
    let e = c.set_knob("release_batch", "1MiB").unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid value '1MiB' for release_batch: must be between 2MiB and 16TiB"
    );
    c.set_knob("release_batch", "2MiB").unwrap();
    let e = c.set_knob("backing_files_percent", "0").unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid value '0' for backing_files_percent: must be between 1 and 100"
    );
    c.set_knob("backing_files_percent", "40").unwrap();
    assert_eq!(c.knob("backing_files_percent").as_deref(), Some("40"));
    let settings = [
        ("0", "0"),         // every copy under the lock, no read prefaulted
        ("4KiB", "4KiB"),   // every copy outside it, every read prefaulted
        ("64KiB", "64KiB"), // the defaults
    ];
    for (round, (copy, prefault)) in settings.into_iter().enumerate() {
        c.set_knob("deferred_copy_min", copy).unwrap();
        c.set_knob("prefault_read_min", prefault).unwrap();
        let path = d.join(format!("f{round}"));
        let f = c.open(&path, CREATE).unwrap();
        let mut expect = Vec::new();
        for (i, len) in [4096usize, 5000, 65536, 300_000].into_iter().enumerate() {
            let data = pattern((round * 10 + i) as u64, len);
            f.write_at(&data, expect.len() as u64).unwrap();
            expect.extend_from_slice(&data);
        }
        f.sync_data().unwrap();
        let mut back = vec![0u8; expect.len()];
        assert_eq!(f.read_at(&mut back, 0).unwrap(), expect.len());
        assert!(
            back == expect,
            "deferred_copy_min={copy}: read back through the cache"
        );
        drop(f);
        assert!(
            std::fs::read(&path).unwrap() == expect,
            "deferred_copy_min={copy}: the disk"
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// The library's devices take a file's write-backs that make it longer one
/// at a time (`extending_writes = one-per-file`, unless set; the backends
/// no longer order them): two files grown by many writes, synced, hold
/// every byte; as they do with the knob at `parallel`, set at run time.
#[test]
fn extending_write_backs_go_one_per_file_and_land_in_either_mode() {
    let Some(d) = dir("extending") else { return };
    let c = cache("64MiB");
    let files: Vec<PathBuf> = (0..2).map(|i| d.join(format!("f{i}"))).collect();
    let handles: Vec<_> = files.iter().map(|p| c.open(p, CREATE).unwrap()).collect();
    let device = c.device_names().pop().expect("one device");
    assert_eq!(
        c.device_knob(&device, "extending_writes").as_deref(),
        Some("one-per-file")
    );
    let mut models = vec![Vec::new(); 2];
    for (round, mode) in ["one-per-file", "parallel"].into_iter().enumerate() {
        c.set_device_knob(&device, "extending_writes", mode)
            .unwrap();
        for i in 0..40 {
            for (f, model) in handles.iter().zip(models.iter_mut()) {
                let data = pattern((round * 100 + i) as u64, 100_000 + i * 4096 + 17);
                f.write_at(&data, model.len() as u64).unwrap();
                model.extend_from_slice(&data);
            }
        }
        for f in &handles {
            f.sync_data().unwrap();
        }
        for (path, model) in files.iter().zip(&models) {
            assert!(
                std::fs::read(path).unwrap() == *model,
                "{mode}: {} holds what was written",
                path.display()
            );
        }
    }
    drop(handles);
    drop(c);
    let _ = std::fs::remove_dir_all(&d);
}
