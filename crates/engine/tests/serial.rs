//! A device that serves one request at a time, in order (`serial`, such as
//! a buffered loop device): while another process reads from it, the
//! flusher's writes go one at a time and no bigger than the device writes
//! within the latency target, down to 64 KiB (256 KiB elsewhere).

mod harness;

use harness::Harness;
use wb_engine::*;

const MIB: u64 = 1 << 20;

/// The largest flusher write (pages) and the most writes in flight while
/// 64 MiB are written through a 64 MiB cache to a device of one slot that
/// writes 100,000 pages/s, a reader elsewhere reading from it all along
/// (fast reads: wbt does not scale down, only the reads' presence acts).
fn writes_beside_a_reader(serial: bool) -> (u32, u32) {
    let mut config = Config::default();
    config.set("memory", "64MiB").unwrap();
    let mut e = Engine::new(config, Instant(0));
    let mut dc = DeviceConfig::default();
    dc.set("max_sectors_kb", "1024").unwrap();
    dc.set("serial", if serial { "1" } else { "0" }).unwrap();
    // Idle reads of 100 µs: an automatic target of 133 µs, in which the
    // device writes 13 pages.
    let dev = e.add_device("d", dc, 100_000);
    let task = e.add_task();
    let mut hs = Harness::new(e, 10_000);
    let file = hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
    let h = hs.engine.open(file).unwrap();
    // Ten 50 µs reads since the last report, every time we look.
    let read = |hs: &mut Harness| {
        let now = hs.now;
        hs.engine.note_foreign_reads(now, dev, 10, 500_000).unwrap();
    };
    read(&mut hs);
    for i in 0..64 {
        hs.run(task, |e, now| e.write(now, task, h, i * MIB, MIB))
            .unwrap();
        read(&mut hs);
    }
    // Until everything is written: the flusher's periodic writeback.
    let deadline = hs.now + 60_000_000_000;
    let unclean = |hs: &Harness| {
        let stats = hs.engine.stats();
        stats.dirty_pages + stats.writeback_pages
    };
    while unclean(&hs) > 0 {
        assert!(hs.now < deadline, "still dirty after 60 s");
        let until = hs.now + 20_000_000;
        hs.idle_until(until);
        read(&mut hs);
    }
    assert_eq!(hs.written_pages, 64 * MIB / PAGE_SIZE);
    hs.engine.check_invariants();
    let largest = hs
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Submit(r) if r.dir == IoDir::Write => Some(r.pages),
            _ => None,
        })
        .max()
        .expect("writes were submitted");
    let device = &hs.engine.stats().devices[0];
    (largest, device.inflight_peak)
}

#[test]
fn a_serial_device_gets_one_small_write_at_a_time_beside_a_reader() {
    assert_eq!(writes_beside_a_reader(true), (16, 1));
}

#[test]
fn other_devices_keep_their_depth_and_the_larger_floor() {
    let (largest, inflight_peak) = writes_beside_a_reader(false);
    assert_eq!(largest, 64);
    assert!(inflight_peak > 1, "{inflight_peak} in flight at most");
}
