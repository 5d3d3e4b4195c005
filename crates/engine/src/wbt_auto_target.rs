//! The automatic latency target (`wbt_lat_usec = -1`, ours): from what
//! the device does, not from its rotational flag.

use crate::time::NS_PER_MS;

/// Bounds for the automatic latency target (see [`auto_target_ns`]). The
/// floor keeps a read that waited behind even one write from counting as
/// slow on the fastest devices.
pub const AUTO_TARGET_MIN_NS: u64 = 100 * crate::time::NS_PER_US;
pub const AUTO_TARGET_MAX_NS: u64 = 75 * NS_PER_MS;
/// The automatic target is the device's idle read latency times this
/// fraction (4/3).
pub const AUTO_TARGET_IDLE_NUM: u64 = 4;
pub const AUTO_TARGET_IDLE_DEN: u64 = 3;

/// The automatic latency target (`wbt_lat_usec = -1`).
///
/// Linux picks 2 ms for "non-rotational" and 75 ms for "rotational" devices,
/// from a flag that virtual and networked disks often get wrong. We use what
/// the device actually does: four thirds of its idle 4 KiB read latency
/// (median), kept within [100 µs, 75 ms]. When even the fastest read of a
/// window took a third again its idle time, reads are queueing behind
/// writes. (With four times, an NVMe reading in 84 µs let reads take
/// 0.5 ms behind writes, and its reader's p99 was worse than with no
/// throttling at all; with a 1 ms floor, a disk answering in 25 µs kept its
/// readers' p99 at that floor. With one and a half times, the NVMe's
/// 128 KiB readahead reads, 122 µs when idle, passed a 126 µs target
/// unless they waited behind a whole write, so they often did: reader p99
/// 248 µs against 130 µs unthrottled. At 4/3 every other scenario's
/// figures are unchanged: BENCHMARKS.md.)
pub fn auto_target_ns(idle_read_latency_ns: u64) -> u64 {
    (idle_read_latency_ns.saturating_mul(AUTO_TARGET_IDLE_NUM) / AUTO_TARGET_IDLE_DEN)
        .clamp(AUTO_TARGET_MIN_NS, AUTO_TARGET_MAX_NS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_SEC;

    #[test]
    fn auto_target() {
        assert_eq!(auto_target_ns(10_000), 100_000, "floor");
        assert_eq!(auto_target_ns(150_000), 200_000);
        assert_eq!(auto_target_ns(9 * NS_PER_MS), 12 * NS_PER_MS);
        assert_eq!(auto_target_ns(NS_PER_SEC), 75 * NS_PER_MS);
    }
}
