//! Whether a filesystem's block device needs stable pages: Linux's
//! `queue/stable_writes` (1 for devices that checksum data in flight, such
//! as zram, DIF/DIX disks or iSCSI with data digests). A runtime fact the
//! engine's `stable_writes = auto` acts on (stable.rs).

use std::path::{Path, PathBuf};

/// What `/sys/dev/block/MAJ:MIN` of `st_dev` declares; a partition has no
/// queue of its own, so its disk's is read. False where there is no block
/// device (tmpfs) or the file cannot be read.
pub(crate) fn stable_writes_required(st_dev: u64) -> bool {
    let sys = PathBuf::from(format!(
        "/sys/dev/block/{}:{}",
        libc::major(st_dev),
        libc::minor(st_dev)
    ));
    declared(&sys)
}

/// `queue/stable_writes` under the device directory `sys`, or under its
/// parent (the disk of a partition).
fn declared(sys: &Path) -> bool {
    [
        sys.join("queue/stable_writes"),
        sys.join("../queue/stable_writes"),
    ]
    .iter()
    .find_map(|path| std::fs::read_to_string(path).ok())
    .is_some_and(|text| text.trim() == "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_queue_flag_of_a_disk_or_of_a_partitions_disk() {
        let root = std::env::temp_dir().join(format!("wb-stable-{}", std::process::id()));
        let disk = root.join("zram0");
        let part = disk.join("zram0p1");
        std::fs::create_dir_all(disk.join("queue")).unwrap();
        std::fs::create_dir_all(&part).unwrap();
        std::fs::write(disk.join("queue/stable_writes"), "1\n").unwrap();
        assert!(declared(&disk));
        assert!(declared(&part), "a partition reads its disk's queue");
        std::fs::write(disk.join("queue/stable_writes"), "0\n").unwrap();
        assert!(!declared(&disk));
        assert!(!declared(&root.join("missing")));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn zram_declares_stable_writes() {
        // zram checksums nothing but compresses pages as they are written:
        // the kernel marks it stable_writes = 1.
        let zram = Path::new("/sys/block/zram0");
        if !zram.exists() {
            wb_testkit::skip("no /sys/block/zram0 (zram module not loaded)");
            return;
        }
        assert!(declared(zram));
    }
}
