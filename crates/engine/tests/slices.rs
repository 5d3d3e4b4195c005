//! Write slices (`wbt_slice_ms`) and a reader the engine serves itself:
//! a read that arrives in a write phase waits for the phase's end, as bfq
//! holds a reader while it serves the writer's slice; other reads go at
//! once, and every hold is bounded by the phase and counted.

mod harness;

use harness::Harness;
use wb_engine::*;

const MIB: u64 = 1 << 20;
const MS: u64 = 1_000_000;

/// A writer writes 256 KiB and a reader of another file on the same
/// device reads a page, every millisecond or so, 400 times. Returns each read's wait (ns) and the device's statistics.
fn reader_beside_a_writer(slice_ms: &str) -> (Vec<u64>, DeviceStats) {
    let mut config = Config::default();
    config.set("memory", "64MiB").unwrap();
    let mut e = Engine::new(config, Instant(0));
    let mut dc = DeviceConfig::default();
    dc.set("wbt_slice_ms", slice_ms).unwrap();
    let dev = e.add_device("d", dc, 100_000);
    let writer = e.add_task();
    let reader = e.add_task();
    // 50 µs a page: a 1 MiB write takes 12.8 ms.
    let mut hs = Harness::new(e, 50_000);
    let w = hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
    let hw = hs.engine.open(w).unwrap();
    let r = hs
        .engine
        .add_file(hs.now, dev, DomainId(0), 256 * MIB)
        .unwrap();
    let hr = hs.engine.open(r).unwrap();
    // The reader first: reads compete when writeback starts.
    hs.run(reader, |e, now| e.read(now, reader, hr, 0, 4096))
        .unwrap();
    let mut waits = Vec::new();
    for k in 1..=400u64 {
        // The writer writes 256 KiB a millisecond, more than the device
        // takes: writeback runs all along, the writer throttled.
        hs.run(writer, |e, now| {
            e.write(now, writer, hw, k * MIB / 4, MIB / 4)
        })
        .unwrap();
        let start = hs.now;
        // Pages 37 x 256 KiB apart (mod 1000): each read a miss, none
        // sequential.
        let at = (k * 37 % 1000) * MIB / 4;
        hs.run(reader, |e, now| e.read(now, reader, hr, at, 4096))
            .unwrap();
        waits.push(hs.now.since_ns(start));
        let next = hs.now + MS;
        hs.idle_until(next);
    }
    hs.engine.check_invariants();
    (waits, hs.engine.stats().devices[0].clone())
}

#[test]
fn a_read_in_a_write_phase_waits_for_its_end_and_is_counted() {
    let (waits, stats) = reader_beside_a_writer("40");
    assert!(stats.wbt_slice_cycles >= 1, "slices ran");
    // A reader that reads all along arrives in each write phase once and
    // waits for the rest of it; its other reads go in quiet phases, where
    // they take the device's 50 µs and not a nanosecond more.
    let held: Vec<u64> = waits.iter().copied().filter(|&w| w > 50_000).collect();
    assert!(held.len() >= 10, "{waits:?}");
    assert_eq!(stats.wbt_slice_read_holds, held.len() as u64, "{waits:?}");
    // Each wait is bounded by the write phase (40 ms), the writes in
    // flight at its end (512 KiB each, 6.4 ms on this device) and the
    // read's own 50 µs.
    let bound = 40 * MS + stats.inflight_peak as u64 * 128 * 50_000 + 50_000;
    for &w in &waits {
        assert!(w <= bound, "a read waited {w} ns: {waits:?} {stats:?}");
    }
    // The counted hold time is the time held: the waits less the read's
    // own device time, the writes still in flight at the phase's end.
    let waited: u64 = held.iter().sum();
    assert!(stats.wbt_slice_read_hold_ns <= waited, "{stats:?}");
    assert!(stats.wbt_slice_read_hold_ns >= waited / 2, "{stats:?}");
}

#[test]
fn without_slices_no_read_is_held() {
    let (waits, stats) = reader_beside_a_writer("0");
    assert_eq!(stats.wbt_slice_cycles, 0);
    assert_eq!(stats.wbt_slice_read_holds, 0);
    assert_eq!(stats.wbt_slice_read_hold_ns, 0);
    assert!(waits.iter().all(|&w| w < 40 * MS), "{waits:?}");
}
