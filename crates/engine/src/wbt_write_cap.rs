//! The size cap of flusher writes while reads compete (ours, not
//! Linux's; see `Wbt::write_pages_cap` for when it applies): what the
//! device writes within the latency target, with a floor.

use crate::time::NS_PER_SEC;

/// The smallest write cap while reads compete (256 KiB; see
/// [`Wbt::write_pages_cap`]): below it, per-request costs and a greedy
/// reader's larger share eat the writer (a sata-ssd's writers took 1.87×
/// as long as without throttling at 64 KiB, 1.39× at 256 KiB, while its
/// reader still waited far less than without).
pub const MIN_CAPPED_WRITE_PAGES: u64 = 64;
/// The smallest write cap on a device that serves one request at a time
/// (64 KiB; `DeviceConfig::serial`): there a read waits for the whole
/// write in service, so the size the target allows is what bounds it,
/// and a request costs little besides its bytes. On the reference loop
/// device (XFS on a buffered loop, a reader beside an uncached writer)
/// the reader's p99 was 6.7 ms with 256 KiB writes, 1.3 ms with 128 KiB
/// and 0.50 ms with 64 KiB, the writer 285, 245 and 226 MiB/s.
pub const MIN_CAPPED_WRITE_PAGES_SERIAL: u64 = 16;
/// The cap for a device that writes `write_bw_pages_s` pages a second
/// (its best measured) with a target of `min_lat_ns`; `serial`: it serves
/// one request at a time.
pub fn capped_write_pages(min_lat_ns: u64, write_bw_pages_s: u64, serial: bool) -> u64 {
    let pages = write_bw_pages_s as u128 * min_lat_ns as u128 / NS_PER_SEC as u128;
    let floor = match serial {
        true => MIN_CAPPED_WRITE_PAGES_SERIAL,
        false => MIN_CAPPED_WRITE_PAGES,
    };
    (pages.min(u64::MAX as u128) as u64).max(floor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_what_the_target_allows_above_the_floor() {
        // 100 MB/s (24,414 pages/s) and 32 ms: 781 pages, not capped at 512 KiB.
        assert_eq!(capped_write_pages(32_000_000, 24_414, false), 781);
        // 600 MiB/s and 0.1 ms: 15 pages, raised to the floor.
        assert_eq!(
            capped_write_pages(100_000, 153_600, false),
            MIN_CAPPED_WRITE_PAGES
        );
        assert_eq!(
            capped_write_pages(100_000, 153_600, true),
            MIN_CAPPED_WRITE_PAGES_SERIAL
        );
        assert_eq!(capped_write_pages(u64::MAX, u64::MAX, false), u64::MAX);
    }
}
