//! Direct (O_DIRECT) writes: around the cache, after writing back and
//! dropping what the cache held of the range.

mod harness;

use harness::Harness;
use wb_engine::*;

const MIB: u64 = 1 << 20;

fn setup() -> (Harness, HandleId, TaskId) {
    setup_with(DeviceConfig::default())
}

fn setup_with(device: DeviceConfig) -> (Harness, HandleId, TaskId) {
    let mut config = Config::default();
    config.set("memory", "64MiB").unwrap();
    let mut e = Engine::new(config, Instant(0));
    let dev = e.add_device("d", device, 100_000);
    let task = e.add_task();
    let file = e.add_file(Instant(0), dev, DomainId(0), 0).unwrap();
    let h = e.open(file).unwrap();
    (Harness::new(e, 10_000), h, task)
}

fn direct_requests(hs: &Harness) -> Vec<IoRequest> {
    hs.actions
        .iter()
        .filter_map(|a| match a {
            Action::Submit(r) if r.direct => Some(r.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_direct_write_goes_around_the_cache_and_waits_for_the_device() {
    let (mut hs, h, task) = setup();
    hs.run(task, |e, now| e.write_direct(now, task, h, 0, 2 * MIB))
        .unwrap();
    let reqs = direct_requests(&hs);
    let per_request = DeviceConfig::default().max_request_pages();
    assert_eq!(reqs.len() as u64, 512 / per_request);
    assert!(reqs
        .iter()
        .all(|r| r.class.is_none() && r.dir == IoDir::Write));
    // The caller waited for the device: 512 pages at 10 µs each.
    assert!(hs.now >= Instant(512 * 10_000), "returned at {:?}", hs.now);
    let waits = hs
        .stalls
        .iter()
        .filter(|s| s.reason == StallReason::DirectIo)
        .count();
    assert_eq!(waits, 1);
    let s = hs.engine.stats();
    assert_eq!(
        (s.cached_pages, s.dirtied_pages, s.written_pages),
        (0, 0, 0)
    );
    assert_eq!(s.devices[0].pages_written, 512);
    assert_eq!(hs.engine.file_size(FileId(0)), Some(2 * MIB));
    hs.engine.check_invariants();
}

#[test]
fn cached_pages_of_the_range_are_written_back_then_dropped() {
    let (mut hs, h, task) = setup();
    hs.run(task, |e, now| e.write(now, task, h, 0, MIB))
        .unwrap();
    assert_eq!(hs.engine.stats().dirty_pages, 256);
    hs.run(task, |e, now| e.write_direct(now, task, h, 0, MIB))
        .unwrap();
    let s = hs.engine.stats();
    assert_eq!(s.cached_pages, 0, "the range left the cache");
    assert_eq!(s.written_pages, 256, "the buffered data was written first");
    assert_eq!(s.devices[0].pages_written, 512, "then the direct data");
    let unmapped: u64 = hs.unmapped.iter().map(|&(_, a, b)| b - a).sum();
    assert_eq!(unmapped, 256);
    // The buffered write-back came before the first direct request.
    let first_direct = hs
        .actions
        .iter()
        .position(|a| matches!(a, Action::Submit(r) if r.direct))
        .unwrap();
    let last_buffered = hs
        .actions
        .iter()
        .rposition(|a| matches!(a, Action::Submit(r) if !r.direct))
        .unwrap();
    assert!(last_buffered < first_direct);
    hs.engine.check_invariants();
}

#[test]
fn a_failed_direct_request_fails_the_write() {
    let (mut hs, h, task) = setup();
    hs.fail_writes = Some(IoErrorKind::Io);
    let r = hs.run(task, |e, now| e.write_direct(now, task, h, 0, MIB));
    assert_eq!(r, Err(EngineError::WriteBack(IoErrorKind::Io)));
    assert_eq!(hs.engine.file_size(FileId(0)), Some(0), "nothing grew");
}

#[test]
fn a_flush_that_could_not_finish_at_once_leaves_nothing_behind() {
    // One request at a time: the write-back of the cached megabyte takes
    // several rounds, after the direct write first asked for it.
    let mut device = DeviceConfig::default();
    device.set("nr_requests", "1").unwrap();
    let (mut hs, h, task) = setup_with(device);
    hs.run(task, |e, now| e.write(now, task, h, 0, MIB))
        .unwrap();
    hs.run(task, |e, now| e.write_direct(now, task, h, 0, MIB))
        .unwrap();
    assert_eq!(hs.engine.stats().cached_pages, 0);
    // The invariants include: no finished submission op stays behind.
    hs.engine.check_invariants();
}
