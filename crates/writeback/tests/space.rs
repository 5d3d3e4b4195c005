//! `File::fallocate` and `File::seek_data` against the backing filesystem
//! itself: every mode, with dirty data in and around each range, gives the
//! same results and the same bytes as the same calls on a plain file.

mod common;

use common::pattern;

use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use writeback::{Cache, Error, OpenOptions};

const K: u64 = 1024;

/// The calls: (name, mode, offset, len).
const STEPS: [(&str, i32, u64, u64); 11] = [
    (
        "punch",
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        64 * K,
        128 * K,
    ),
    (
        "punch unaligned",
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        300 * K + 100,
        5000,
    ),
    ("zero", libc::FALLOC_FL_ZERO_RANGE, 512 * K, 64 * K),
    (
        "zero past the end",
        libc::FALLOC_FL_ZERO_RANGE,
        4096 * K - 8 * K,
        64 * K,
    ),
    (
        "collapse",
        libc::FALLOC_FL_COLLAPSE_RANGE,
        1024 * K,
        256 * K,
    ),
    (
        "collapse unaligned",
        libc::FALLOC_FL_COLLAPSE_RANGE,
        1000,
        4096,
    ),
    ("insert", libc::FALLOC_FL_INSERT_RANGE, 2048 * K, 128 * K),
    ("unshare", libc::FALLOC_FL_UNSHARE_RANGE, 0, 64 * K),
    ("keep size", libc::FALLOC_FL_KEEP_SIZE, 8192 * K, 64 * K),
    ("extend", 0, 5000 * K, 100 * K),
    (
        "punch without keep size",
        libc::FALLOC_FL_PUNCH_HOLE,
        0,
        4096,
    ),
];

fn errno_of(e: &Error) -> i32 {
    e.errno()
}

fn os_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

#[test]
fn every_mode_as_on_the_backing_filesystem() {
    let Some(dir) = common::direct_test_dir("space") else {
        return;
    };
    let mut base = vec![0u8; (4 << 20) as usize];
    base = {
        let p = pattern(7, base.len());
        base.copy_from_slice(&p);
        base
    };
    // The control: a plain file.
    let plain_path = dir.join("plain");
    let plain = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&plain_path)
        .unwrap();
    plain.write_all_at(&base, 0).unwrap();
    // Through the cache (64 MiB: everything stays cached and dirty).
    let cache = Cache::builder()
        .knob("memory", "64MiB")
        .unwrap()
        .calibrate(false)
        .build()
        .unwrap();
    let path = dir.join("cached");
    let file = cache.open(&path, OpenOptions { create: true }).unwrap();
    file.write_at(&base, 0).unwrap();
    for (i, (name, mode, offset, len)) in STEPS.into_iter().enumerate() {
        let piece = pattern(100 + i as u64, 96 * K as usize);
        let at = offset.saturating_sub(16 * K);
        plain.write_all_at(&piece, at).unwrap();
        file.write_at(&piece, at).unwrap();
        // SAFETY: a descriptor `plain` keeps open and plain integers.
        let rc = unsafe { libc::fallocate(plain.as_raw_fd(), mode, offset as i64, len as i64) };
        let expected = if rc == 0 { Ok(()) } else { Err(os_errno()) };
        let got = file.fallocate(mode, offset, len).map_err(|e| errno_of(&e));
        assert_eq!(got, expected, "{name}");
        assert_eq!(
            file.len(),
            plain.metadata().unwrap().len(),
            "{name}: length"
        );
    }
    for (offset, whence, data) in [
        (0, libc::SEEK_DATA, true),
        (0, libc::SEEK_HOLE, false),
        (1 << 30, libc::SEEK_DATA, true),
    ] {
        // SAFETY: as above.
        let pos = unsafe { libc::lseek(plain.as_raw_fd(), offset, whence) };
        let expected = if pos >= 0 {
            Ok(pos as u64)
        } else {
            Err(os_errno())
        };
        let got = file
            .seek_data(offset as u64, data)
            .map_err(|e| errno_of(&e));
        assert_eq!(got, expected, "seek {whence} from {offset}");
    }
    let want = std::fs::read(&plain_path).unwrap();
    common::sync_and_check_model("fallocate", cache, file, &path, &want);
}

#[test]
fn bad_ranges_and_modes_are_refused_like_fallocate() {
    let Some(dir) = common::direct_test_dir("space-bad") else {
        return;
    };
    let cache = Cache::builder().calibrate(false).build().unwrap();
    let file = cache
        .open(dir.join("f"), OpenOptions { create: true })
        .unwrap();
    file.write_at(b"hello", 0).unwrap();
    let errno = |mode, offset, len| file.fallocate(mode, offset, len).map_err(|e| e.errno());
    assert_eq!(errno(0, 0, 0), Err(libc::EINVAL), "an empty range");
    assert_eq!(
        errno(0, u64::MAX - 1, 4096),
        Err(libc::EFBIG),
        "past the largest file"
    );
    assert_eq!(
        errno(0x4000, 0, 4096),
        Err(libc::EOPNOTSUPP),
        "an unknown mode"
    );
    let mut buf = [0u8; 5];
    assert_eq!(file.read_at(&mut buf, 0).unwrap(), 5);
    assert_eq!(&buf, b"hello", "nothing changed");
}
