//! ENOSPC on a small filesystem (a tmpfs of 8 MiB, which supports O_DIRECT
//! on this kernel): a write the filesystem has no room for fails at
//! write(); space taken behind the cache's back makes a write fail there
//! or its sync; earlier synced data stays intact, and after space is freed
//! the same cache keeps working. Needs root (mount); skipped otherwise.

use std::path::PathBuf;
use std::process::Command;
use writeback::{Cache, Error, IoErrorKind, OpenOptions};

struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn small_fs() -> Option<Mount> {
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("enospc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=8m", "tmpfs"])
        .arg(&dir)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        wb_testkit::skip("cannot mount a tmpfs (not root?)");
        let _ = std::fs::remove_dir(&dir);
        return None;
    }
    let mount = Mount(dir);
    if !writeback::io::supports_direct(&mount.0) {
        wb_testkit::skip("this kernel's tmpfs has no O_DIRECT");
        return None;
    }
    Some(mount)
}

#[test]
fn enospc_is_reported_and_the_cache_recovers() {
    let Some(fs) = small_fs() else { return };
    let cache = Cache::builder()
        .knob("memory", "64MiB")
        .unwrap()
        .calibrate(false)
        .build()
        .unwrap();
    let keep = cache
        .open(fs.0.join("keep"), OpenOptions { create: true })
        .unwrap();
    let precious = vec![0x5Au8; 2 << 20];
    keep.write_at(&precious, 0).unwrap();
    keep.sync_data().unwrap();

    // Too big for what is left: refused at write(), after the cache
    // wrote back what was dirty to learn the real free space; nothing of
    // it is written.
    let big = cache
        .open(fs.0.join("big"), OpenOptions { create: true })
        .unwrap();
    match big.write_at(&vec![0xA5u8; 10 << 20], 0) {
        Err(Error::NoSpace(m)) => assert!(m.starts_with("no space left on the device"), "{m}"),
        other => panic!("expected ENOSPC from the write, got {other:?}"),
    }
    assert_eq!(big.len(), 0, "nothing of the refused write");
    let dev = &cache.stats().devices[0];
    assert_eq!((dev.enospc_writes, dev.space_flushes), (1, 1));
    // What fits is taken, and written.
    big.write_at(&vec![0xA5u8; 2 << 20], 0).unwrap();
    big.sync_data().unwrap();
    assert!(
        std::fs::read(fs.0.join("keep")).unwrap() == precious,
        "synced data intact"
    );

    // Space taken behind the cache's back (its report may be up to a
    // second old): a write is refused, or taken and its write-back fails;
    // either way nothing acknowledged is lost and failed pages stay dirty.
    let filler = fs.0.join("filler");
    let mut chunk = 0;
    while std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&filler)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &[1u8; 64 << 10]))
        .is_ok()
    {
        chunk += 1;
        assert!(chunk < 1024, "the small filesystem fills");
    }
    match big.write_at(&vec![0x5Bu8; 1 << 20], 2 << 20) {
        Err(Error::NoSpace(_)) => {}
        Ok(()) => {
            match big.sync_data() {
                Err(Error::WriteBack(IoErrorKind::NoSpace)) => {}
                other => panic!("expected ENOSPC from the sync, got {other:?}"),
            }
            assert!(
                cache.stats().dirty_pages > 0,
                "pages that failed are not marked clean"
            );
        }
        Err(other) => panic!("expected ENOSPC, got {other:?}"),
    }

    // Free space by shrinking the big file and removing the filler; what
    // is left fits and syncs.
    std::fs::remove_file(&filler).unwrap();
    big.set_len(1 << 20).unwrap();
    big.sync_data().unwrap();
    keep.write_at(b"still working", 0).unwrap();
    keep.sync_data().unwrap();
    let on_disk = std::fs::read(fs.0.join("keep")).unwrap();
    assert_eq!(&on_disk[..13], b"still working");
    assert_eq!(std::fs::metadata(fs.0.join("big")).unwrap().len(), 1 << 20);
    drop(big);
    drop(keep);
    drop(cache);
}
