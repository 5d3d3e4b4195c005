//! File data through a mount: what programs write is what they and a new
//! mount read back (fio's verify, dd and cmp, on a plain disk and on a
//! stable-pages device), mappings stay coherent with read() and write(),
//! and every fallocate mode does what it does on the backing filesystem.
//!
//! Each test mounts in this process (common/mod.rs): root and /dev/fuse
//! needed (fio for two tests), one test at a time, always unmounted.

#[macro_use]
mod common;
use common::*;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs fio's crc32c verify workload (4 sequential and 4 random writers of
/// 32 MiB each) in `mnt`, with `extra` options; fails on any fio error.
fn fio_verify(state: &Path, mnt: &Path, extra: &[&str]) {
    let out = run(Command::new("fio")
        .current_dir(state)
        .arg(format!("--directory={}", mnt.display()))
        .args([
            "--size=32m",
            "--numjobs=4",
            "--ioengine=psync",
            "--verify=crc32c",
            "--verify_fatal=1",
            "--randrepeat=1",
            "--output-format=json",
        ])
        .args(extra)
        .args([
            "--name=seq",
            "--rw=write",
            "--bs=128k",
            "--name=rand",
            "--rw=randwrite",
            "--bs=16k",
        ]));
    let errors: Vec<_> = out
        .lines()
        .filter(|l| l.trim_start().starts_with("\"error\""))
        .filter(|l| !l.contains(": 0"))
        .map(str::to_string)
        .collect();
    assert!(errors.is_empty(), "fio reported errors: {errors:?}\n{out}");
    assert_eq!(out.matches("\"jobname\"").count(), 8, "{out}");
}

#[test]
fn fio_verify_crc32c() {
    require!(true);
    let _serial = serial();
    let root = TempRoot::new("fio");
    let backing = root.dir("backing");
    let mnt = root.dir("mnt");
    let state = root.dir("fio-state");
    let mount = Mount::start(&backing, &mnt);
    // Write with fsync every 8 writes, verifying as it goes.
    fio_verify(&state, &mount.mnt, &["--fsync=8"]);
    // O_DIRECT writers write uncached; the data must be as good.
    fio_verify(&state, &mount.mnt, &["--direct=1"]);
    // A verify pass on the same mount (from the cache) ...
    fio_verify(&state, &mount.mnt, &["--verify_only"]);
    stop_ok(mount);
    // ... and one on a new mount: everything came back from BACKING_DIR.
    let mount = Mount::start(&backing, &mnt);
    fio_verify(&state, &mount.mnt, &["--verify_only"]);
    stop_ok(mount);
}

/// ext4 on zram0, set up by scripts/zram-ext4.sh; taken down on drop.
struct ZramExt4 {
    mnt: PathBuf,
}

const ZRAM_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/zram-ext4.sh");

impl ZramExt4 {
    /// Err with the reason where zram0 cannot be had.
    fn up(mnt: &Path) -> Result<ZramExt4, String> {
        if !Path::new("/sys/block/zram0").exists() {
            return Err("no /sys/block/zram0 (zram module not loaded)".into());
        }
        let out = Command::new(ZRAM_SCRIPT)
            .args(["up", mnt.to_str().expect("UTF-8 path"), "512M"])
            .output()
            .expect("run scripts/zram-ext4.sh");
        match out.status.code() {
            Some(0) => Ok(ZramExt4 {
                mnt: mnt.to_path_buf(),
            }),
            Some(3) => Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
            _ => panic!(
                "scripts/zram-ext4.sh up failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }
}

impl Drop for ZramExt4 {
    fn drop(&mut self) {
        // The script's umount fails while busy: unmounted here first.
        umount_bounded(&self.mnt);
        let _ = Command::new(ZRAM_SCRIPT)
            .arg("down")
            .arg(&self.mnt)
            .status();
    }
}

#[test]
fn on_zram_auto_snapshots_and_fio_verifies() {
    require!(true);
    let _serial = serial();
    let root = TempRoot::new("zram");
    let zram = match ZramExt4::up(&root.0.join("zram")) {
        Ok(z) => z,
        Err(reason) => {
            wb_testkit::skip(&reason);
            return;
        }
    };
    let backing = zram.mnt.join("backing");
    fs::create_dir_all(&backing).expect("create the backing directory");
    let mnt = root.dir("mnt");
    let state = root.dir("fio-state");
    let mount = Mount::start(&backing, &mnt);
    // zram declares stable_writes = 1: auto picks snapshot, and says so.
    let serving = mount.session().description();
    assert!(
        serving.contains("device zram0, stable_writes snapshot (auto)"),
        "{serving}"
    );
    let stats = fs::read_to_string(mnt.join(".writeback/stats")).expect("read the stats");
    assert!(
        stats.contains("zram0.stable_writes_snapshot 1\n"),
        "{stats}"
    );
    assert!(stats.contains("zram0.stable_writes_auto 1\n"), "{stats}");
    fio_verify(&state, &mount.mnt, &["--fsync=8"]);
    fio_verify(&state, &mount.mnt, &["--verify_only"]);
    stop_ok(mount);
    let mount = Mount::start(&backing, &mnt);
    fio_verify(&state, &mount.mnt, &["--verify_only"]);
    stop_ok(mount);
    drop(zram);
}

#[test]
fn dd_two_gib_then_cmp() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("dd");
    let source = root.0.join("source");
    make_source(&source, 2048);
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"));
    let target = mount.mnt.join("big");
    run(Command::new("dd")
        .arg(format!("if={}", source.display()))
        .arg(format!("of={}", target.display()))
        .args(["bs=1M", "status=none"]));
    assert_eq!(fs::metadata(&target).expect("stat").len(), 2 << 30);
    run(Command::new("cmp").arg(&source).arg(&target));
    let backing = mount.backing.clone();
    stop_ok(mount);
    run(Command::new("cmp").arg(&source).arg(backing.join("big")));
}

/// A shared, writable mapping of a whole file (test helper).
struct Mapping {
    addr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(file: &fs::File, len: usize) -> std::io::Result<Mapping> {
        use std::os::fd::AsRawFd;
        // SAFETY: a new mapping chosen by the kernel (addr NULL), of a file
        // descriptor that is open for this call; the result is checked.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapping {
            addr: addr.cast(),
            len,
        })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `addr` maps `len` bytes for as long as `self` lives; the
        // file is at least `len` long, so every byte is backed.
        unsafe { std::slice::from_raw_parts(self.addr, self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.addr, self.len) }
    }

    fn msync(&self) {
        // SAFETY: the whole mapping, which is live.
        let rc = unsafe { libc::msync(self.addr.cast(), self.len, libc::MS_SYNC) };
        assert_eq!(rc, 0, "msync: {}", std::io::Error::last_os_error());
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped; no reference outlives self.
        unsafe { libc::munmap(self.addr.cast(), self.len) };
    }
}

fn read_at(path: &Path, offset: u64, len: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let f = fs::File::open(path).expect("open for reading");
    let mut buf = vec![0u8; len];
    f.read_exact_at(&mut buf, offset).expect("read");
    buf
}

#[test]
fn mapped_files_stay_coherent_with_reads_and_writes() {
    use std::os::unix::fs::FileExt;
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("mmap");
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"));
    let path = mount.mnt.join("mapped");
    fs::write(&path, vec![b'a'; 16384]).expect("write");
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .expect("open");
    let mut map = Mapping::new(&file, 16384).expect("mmap of a file on the mount");
    assert!(
        map.bytes().iter().all(|&b| b == b'a'),
        "sees what write() wrote"
    );

    // write() through another descriptor: the mapping sees it.
    let other = fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open");
    other.write_all_at(&[b'b'; 4096], 4096).expect("pwrite");
    assert!(
        map.bytes()[4096..8192].iter().all(|&b| b == b'b'),
        "sees a later write()"
    );

    // Stores through the mapping, synced: read() and the backing file see them.
    map.bytes_mut()[8192..8200].copy_from_slice(b"cccccccc");
    map.msync();
    assert_eq!(read_at(&path, 8192, 8), b"cccccccc");
    assert_eq!(read_at(&mount.backing.join("mapped"), 8192, 8), b"cccccccc");

    // Stores not synced yet: a read() writes the mapped range back first.
    map.bytes_mut()[12288..12296].copy_from_slice(b"dddddddd");
    assert_eq!(read_at(&path, 12288, 8), b"dddddddd");
    drop(map);
    drop(file);
    drop(other);
    let backing = mount.backing.clone();
    stop_ok(mount);
    let data = fs::read(backing.join("mapped")).expect("read backing");
    assert_eq!(&data[4096..4100], b"bbbb");
    assert_eq!(&data[8192..8200], b"cccccccc");
    assert_eq!(&data[12288..12296], b"dddddddd");
}

/// fallocate(2) on `f`: Ok or the errno.
fn fallocate(f: &fs::File, mode: i32, offset: u64, len: u64) -> Result<(), i32> {
    use std::os::fd::AsRawFd;
    // SAFETY: a descriptor `f` keeps open for the call and plain integers.
    let rc = unsafe { libc::fallocate(f.as_raw_fd(), mode, offset as i64, len as i64) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

/// lseek(2) with SEEK_DATA or SEEK_HOLE: the offset or the errno.
fn seek(f: &fs::File, offset: i64, whence: i32) -> Result<i64, i32> {
    use std::os::fd::AsRawFd;
    // SAFETY: as in `fallocate`.
    let pos = unsafe { libc::lseek(f.as_raw_fd(), offset, whence) };
    if pos >= 0 {
        Ok(pos)
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

/// Every fallocate mode, with writes between them (some still dirty when
/// the next fallocate comes), then SEEK_DATA / SEEK_HOLE: what each call
/// returned and what the file holds.
fn fallocate_script(path: &Path) -> (Vec<String>, Vec<u8>) {
    use std::os::unix::fs::FileExt;
    const K: u64 = 1024;
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .expect("open");
    let mut data = vec![0u8; (4 << 20) as usize];
    pattern(7, &mut data);
    f.write_all_at(&data, 0).expect("write 4 MiB");
    let mut seen = Vec::new();
    // The kernel's FUSE client passes on KEEP_SIZE, PUNCH_HOLE and
    // ZERO_RANGE only (fuse_file_fallocate); the library does the others
    // (crates/writeback/tests/space.rs).
    let steps: [(&str, i32, u64, u64); 7] = [
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
        ("keep size", libc::FALLOC_FL_KEEP_SIZE, 8192 * K, 64 * K),
        ("extend", 0, 5000 * K, 100 * K),
        (
            "punch without keep size",
            libc::FALLOC_FL_PUNCH_HOLE,
            0,
            4096,
        ),
    ];
    for (i, (name, mode, offset, len)) in steps.into_iter().enumerate() {
        // Dirty data in and around the range, not yet written back.
        let mut piece = vec![0u8; 96 * K as usize];
        pattern(100 + i as u64, &mut piece);
        f.write_all_at(&piece, offset.saturating_sub(16 * K))
            .expect("write");
        seen.push(format!(
            "{name}: {:?}, length {}",
            fallocate(&f, mode, offset, len),
            f.metadata().expect("stat").len()
        ));
    }
    seen.push(format!("data from 0: {:?}", seek(&f, 0, libc::SEEK_DATA)));
    seen.push(format!("hole from 0: {:?}", seek(&f, 0, libc::SEEK_HOLE)));
    seen.push(format!(
        "data past the end: {:?}",
        seek(&f, 1 << 30, libc::SEEK_DATA)
    ));
    let mut content = Vec::new();
    fs::File::open(path)
        .expect("reopen")
        .read_to_end(&mut content)
        .expect("read back");
    (seen, content)
}

#[test]
fn every_fallocate_mode_as_on_the_backing_filesystem() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("fallocate");
    let direct = root.dir("direct").join("f");
    let (expected, expected_content) = fallocate_script(&direct);
    let mount = Mount::start(&root.dir("backing"), &root.dir("mnt"));
    let (seen, content) = fallocate_script(&mount.mnt.join("f"));
    assert_eq!(seen, expected);
    let f = fs::OpenOptions::new()
        .write(true)
        .open(mount.mnt.join("f"))
        .expect("open");
    for mode in [libc::FALLOC_FL_COLLAPSE_RANGE, libc::FALLOC_FL_INSERT_RANGE] {
        assert_eq!(
            fallocate(&f, mode, 0, 4096),
            Err(libc::EOPNOTSUPP),
            "FUSE refuses {mode:#x}"
        );
    }
    drop(f);
    assert!(content == expected_content, "the contents differ");
    let backing = mount.backing.clone();
    stop_ok(mount);
    assert!(fs::read(backing.join("f")).expect("read backing") == expected_content);
}
