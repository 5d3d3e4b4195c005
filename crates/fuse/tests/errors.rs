//! Errors through a mount: a failed write-back reaches every handle of the
//! file once (errseq) and loses nothing; a full backing filesystem fails
//! the write(2) with ENOSPC and loses nothing acknowledged.
//!
//! Each test mounts in this process (common/mod.rs): root and /dev/fuse
//! needed, one test at a time, always unmounted.

#[macro_use]
mod common;
use common::*;
use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

#[test]
fn a_write_back_error_reaches_every_handle_once_and_nothing_is_lost() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("wb-errors");
    let mount = Mount::start_with(&root.dir("backing"), &root.dir("mnt"), |o| {
        o.fault_seam = true;
    });
    let path = mount.mnt.join("f");
    let mut data = vec![0u8; 1 << 20];
    pattern(5, &mut data);
    let open_rw = || {
        fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .expect("open")
    };
    let (mut a, b, c) = (open_rw(), open_rw(), open_rw());
    a.write_all(&data).expect("write");
    let arm = |value: &[u8]| set_xattr(&path, c"user.writeback.fail_writes", value);
    assert_eq!(
        arm(b"lots").unwrap_err().raw_os_error(),
        Some(libc::EINVAL),
        "a value that does not parse"
    );
    arm(b"1000 eio").expect("arm the fault seam");
    let eio = |r: std::io::Result<()>| r.err().and_then(|e| e.raw_os_error()) == Some(libc::EIO);
    assert!(eio(a.sync_data()), "the handle that wrote hears of it");
    arm(b"0").expect("disarm");
    // The pages stayed dirty: the next fsync writes them; every other
    // handle still hears of the error, once.
    assert!(eio(b.sync_data()), "a second handle hears of it");
    assert!(eio(c.sync_all()), "a third too");
    a.sync_data().expect("the error was reported to a already");
    b.sync_data().expect("and to b");
    c.sync_all().expect("and to c");
    drop((a, b, c));
    let stats = fs::read_to_string(mount.mnt.join(".writeback/stats")).expect("read stats");
    let write_errors: Vec<u64> = stats
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(name, _)| name.ends_with(".write_errors"))
        .filter_map(|(_, v)| v.parse().ok())
        .collect();
    assert!(
        !write_errors.is_empty() && write_errors.iter().sum::<u64>() > 0,
        "{stats}"
    );
    stop_ok(mount);
    let back = fs::read(root.0.join("backing/f")).expect("read back");
    assert!(back == data, "the data is all there after the errors");
}

/// A tmpfs of `size` mounted on `dir` for a test; unmounted on drop.
struct SmallFs(PathBuf);

impl SmallFs {
    fn mount(dir: PathBuf, size: &str) -> SmallFs {
        fs::create_dir_all(&dir).expect("mkdir");
        run(Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir));
        SmallFs(dir)
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        umount_bounded(&self.0);
    }
}

#[test]
fn a_full_backing_filesystem_fails_the_write_and_loses_nothing_acknowledged() {
    require!(false);
    let _serial = serial();
    let root = TempRoot::new("full");
    let small = SmallFs::mount(root.0.join("backing"), "16m");
    let mount = Mount::start(&small.0, &root.dir("mnt"));
    let mut data = vec![0u8; 1 << 20];
    pattern(5, &mut data);
    let mut f = fs::File::create(mount.mnt.join("big")).expect("create");
    let mut acked = 0u64;
    let err = loop {
        match f.write_all(&data) {
            Ok(()) => acked += data.len() as u64,
            Err(e) => break e,
        }
        assert!(acked <= 64 << 20, "a 16 MiB filesystem takes no 64 MiB");
    };
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    assert!(
        acked >= 8 << 20,
        "most of the filesystem was usable: {acked} bytes"
    );
    drop(f);
    let enospc = stat_line(
        &mount.mnt,
        &format!("{}.enospc_writes", device_of(&mount.mnt)),
    );
    assert!(enospc.is_some_and(|n| n >= 1), "{enospc:?}");
    let backing = mount.backing.clone();
    // Ok: the write-back at the unmount did not fail (`wb mount` would
    // have said "writing back failed" and exited 1).
    stop_ok(mount);
    // Every byte write() acknowledged is in the backing file.
    let on_disk = fs::read(backing.join("big")).expect("read backing");
    assert!(on_disk.len() as u64 >= acked, "{} < {acked}", on_disk.len());
    for chunk in on_disk[..acked as usize].chunks(1 << 20) {
        assert!(chunk == &data[..chunk.len()], "acknowledged data intact");
    }
    drop(small);
}
