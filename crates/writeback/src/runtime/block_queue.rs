//! What a filesystem's block device declares in its queue (sysfs), runtime
//! facts the engine acts on:
//! - `queue/stable_writes`: whether it needs stable pages (1 for devices
//!   that checksum data in flight, such as zram, DIF/DIX disks or iSCSI
//!   with data digests), for `stable_writes = auto` (stable.rs);
//! - `queue/read_ahead_kb`: the device's readahead window, the engine
//!   device's `read_ahead_kb` unless set (readahead.rs);
//! - `queue/max_sectors_kb`: the largest request the device takes, the
//!   engine device's `max_sectors_kb` unless set (the size of its
//!   readahead, writeback and direct requests, as Linux builds bios);
//! - `device/queue_depth` (SCSI and ATA disks: the command queue's depth)
//!   or else `queue/nr_requests`: the engine device's `queue_depth` and
//!   `nr_requests` unless set. This is Linux's blk_queue_depth, which wbt
//!   scales from: a loop device takes 128 requests, not the engine's
//!   default 32, and writing alone wbt may raise its depth to 3/4 of that;
//! - `loop/dio` (loop devices only): 0 means the loop runs each request
//!   to its end in one worker (drivers/block/loop.c, buffered I/O on its
//!   backing file), one at a time and in order: the engine device is
//!   `serial` unless set.

use std::path::{Path, PathBuf};

/// What `/sys/dev/block/MAJ:MIN` of `st_dev` declares; a partition has no
/// queue of its own, so its disk's is read. False where there is no block
/// device (tmpfs) or the file cannot be read.
pub(crate) fn stable_writes_required(st_dev: u64) -> bool {
    declared(&sys_dir(st_dev))
}

/// The device's `queue/read_ahead_kb`; None where there is no block
/// device or no such file.
pub(crate) fn read_ahead_kb(st_dev: u64) -> Option<u32> {
    queue_value(&sys_dir(st_dev), "read_ahead_kb")?.parse().ok()
}

/// The device's `queue/max_sectors_kb`; None where there is no block
/// device or no such file.
pub(crate) fn max_sectors_kb(st_dev: u64) -> Option<u32> {
    queue_value(&sys_dir(st_dev), "max_sectors_kb")?
        .parse()
        .ok()
}

/// The device's request queue depth as Linux's blk_queue_depth gives it:
/// the disk's `device/queue_depth` where the driver declares one, else
/// `queue/nr_requests`; None where there is no block device.
pub(crate) fn queue_depth(st_dev: u64) -> Option<u32> {
    queue_depth_at(&sys_dir(st_dev))
}

fn queue_depth_at(sys: &Path) -> Option<u32> {
    device_value(sys, "queue_depth")
        .or_else(|| queue_value(sys, "nr_requests"))?
        .parse()
        .ok()
}

/// The device's `queue/nr_requests` (tags the block layer hands out);
/// None where there is no block device.
pub(crate) fn nr_requests(st_dev: u64) -> Option<u32> {
    queue_value(&sys_dir(st_dev), "nr_requests")?.parse().ok()
}

/// Whether the device serves one request at a time, in order: known for
/// loop devices (`loop/dio` = 0); None for any other device.
pub(crate) fn serial(st_dev: u64) -> Option<bool> {
    serial_at(&sys_dir(st_dev))
}

fn serial_at(sys: &Path) -> Option<bool> {
    disk_value(sys, "loop", "dio").map(|dio| dio == "0")
}

fn sys_dir(st_dev: u64) -> PathBuf {
    PathBuf::from(format!(
        "/sys/dev/block/{}:{}",
        libc::major(st_dev),
        libc::minor(st_dev)
    ))
}

/// `queue/stable_writes` under the device directory `sys`, or under its
/// parent (the disk of a partition).
fn declared(sys: &Path) -> bool {
    queue_value(sys, "stable_writes").is_some_and(|text| text == "1")
}

/// `queue/NAME` under the device directory `sys`, or under its parent
/// (a partition has no queue of its own), trimmed.
fn queue_value(sys: &Path, name: &str) -> Option<String> {
    disk_value(sys, "queue", name)
}

/// `device/NAME` (what the driver declares) of the disk at `sys`, trimmed.
fn device_value(sys: &Path, name: &str) -> Option<String> {
    disk_value(sys, "device", name)
}

/// `DIR/NAME` under the device directory `sys` or its parent, trimmed.
fn disk_value(sys: &Path, dir: &str, name: &str) -> Option<String> {
    [
        sys.join(dir).join(name),
        sys.join("..").join(dir).join(name),
    ]
    .iter()
    .find_map(|path| std::fs::read_to_string(path).ok())
    .map(|text| text.trim().to_string())
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
        std::fs::write(disk.join("queue/read_ahead_kb"), "8192\n").unwrap();
        assert_eq!(queue_value(&part, "read_ahead_kb").as_deref(), Some("8192"));
        assert_eq!(queue_depth_at(&part), None, "no nr_requests yet");
        std::fs::write(disk.join("queue/nr_requests"), "128\n").unwrap();
        assert_eq!(
            queue_depth_at(&part),
            Some(128),
            "nr_requests without a driver's depth"
        );
        std::fs::create_dir_all(disk.join("device")).unwrap();
        std::fs::write(disk.join("device/queue_depth"), "32\n").unwrap();
        assert_eq!(queue_depth_at(&part), Some(32), "the driver's depth first");
        assert_eq!(serial_at(&part), None, "not a loop device");
        std::fs::create_dir_all(disk.join("loop")).unwrap();
        std::fs::write(disk.join("loop/dio"), "0\n").unwrap();
        assert_eq!(serial_at(&part), Some(true), "a buffered loop device");
        std::fs::write(disk.join("loop/dio"), "1\n").unwrap();
        assert_eq!(
            serial_at(&part),
            Some(false),
            "a loop device with direct I/O"
        );
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
