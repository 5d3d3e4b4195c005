//! Uncached (DONTCACHE) writes: pages leave the cache once written back,
//! an ordinary access keeps them, kicks coalesce, the flusher is asked for
//! the context's own count (or a bandwidth share of the global one), and
//! the inline mode makes the writer submit its range.

mod harness;

use harness::Harness;
use wb_engine::*;

const MIB: u64 = 1 << 20;

/// An engine with one device that takes `nr_requests` requests at a time.
fn setup(knobs: &[(&str, &str)], nr_requests: u32) -> (Harness, DeviceId, TaskId) {
    harness::setup(knobs, &[("nr_requests", &nr_requests.to_string())])
}

fn new_handle(hs: &mut Harness, dev: DeviceId, domain: DomainId) -> HandleId {
    let file = hs.engine.add_file(hs.now, dev, domain, 0).unwrap();
    hs.engine.open(file).unwrap()
}

fn write(hs: &mut Harness, task: TaskId, h: HandleId, offset: u64, len: u64, flags: WriteFlags) {
    hs.run(task, |e, now| {
        e.write_with(now, task, h, offset, len, flags)
    })
    .unwrap();
}

/// Pages a request carries at most.
fn request_pages() -> u64 {
    DeviceConfig::default().max_request_pages()
}

fn domain(hs: &Harness, i: usize) -> DomainStats {
    hs.engine.stats().domains[i].clone()
}

fn settle(hs: &mut Harness) {
    let until = hs.now + 2_000_000_000;
    hs.idle_until(until);
    hs.engine.check_invariants();
}

#[test]
fn written_back_uncached_pages_leave_the_cache() {
    let (mut hs, dev, task) = setup(&[], 128);
    let h = new_handle(&mut hs, dev, DomainId(0));
    write(&mut hs, task, h, 0, MIB, WriteFlags::DONTCACHE);
    assert_eq!(
        domain(&hs, 0).dontcache.kicks,
        1,
        "the write kicked its flusher"
    );
    settle(&mut hs);
    let s = hs.engine.stats();
    assert_eq!(s.cached_pages, 0);
    assert_eq!(s.dirty_pages, 0);
    assert_eq!(s.written_by(WbReason::Dontcache), 256);
    assert_eq!(domain(&hs, 0).dontcache.dropped_pages, 256);
    let unmapped: u64 = hs.unmapped.iter().map(|&(_, a, b)| b - a).sum();
    assert_eq!(unmapped, 256, "the runtime is told every page left");
}

#[test]
fn buffered_pages_stay_cached() {
    let (mut hs, dev, task) = setup(&[], 128);
    let h = new_handle(&mut hs, dev, DomainId(0));
    write(&mut hs, task, h, 0, MIB, WriteFlags::default());
    hs.run(task, |e, now| e.fsync(now, task, h)).unwrap();
    settle(&mut hs);
    assert_eq!(hs.engine.stats().cached_pages, 256);
    assert_eq!(domain(&hs, 0).dontcache, DontcacheStats::default());
}

#[test]
fn an_ordinary_read_or_write_keeps_the_pages() {
    // One request at a time: after the write, one request's pages are
    // under writeback and the rest are dirty.
    let (mut hs, dev, task) = setup(&[], 1);
    let h = new_handle(&mut hs, dev, DomainId(0));
    let chunk = request_pages();
    write(&mut hs, task, h, 0, MIB, WriteFlags::DONTCACHE);
    assert_eq!(domain(&hs, 0).dontcache_dirty_pages, 256 - chunk);
    assert_eq!(hs.engine.stats().dontcache_dirty_pages, 256 - chunk);
    // Read the first 16 pages (under writeback) and overwrite the last 16
    // (dirty) without the flag: those 32 pages stay.
    hs.run(task, |e, now| e.read(now, task, h, 0, 16 * 4096))
        .unwrap();
    write(
        &mut hs,
        task,
        h,
        MIB - 16 * 4096,
        16 * 4096,
        WriteFlags::default(),
    );
    assert_eq!(domain(&hs, 0).dontcache_dirty_pages, 256 - chunk - 16);
    hs.engine.check_invariants();
    settle(&mut hs);
    assert_eq!(hs.engine.stats().cached_pages, 32);
    assert_eq!(domain(&hs, 0).dontcache.dropped_pages, 256 - 32);
}

#[test]
fn kicks_while_the_bit_is_set_coalesce_and_none_is_lost() {
    let (mut hs, dev, task) = setup(&[], 1);
    let h = new_handle(&mut hs, dev, DomainId(0));
    // The first kick starts a work at once (the bit is cleared as it
    // starts); the second sets the bit again while that work runs; the
    // third finds it set.
    for i in 0..3 {
        write(&mut hs, task, h, i * MIB, MIB, WriteFlags::DONTCACHE);
    }
    let d = domain(&hs, 0);
    assert_eq!((d.dontcache.kicks, d.dontcache.kicks_coalesced), (2, 1));
    settle(&mut hs);
    let d = domain(&hs, 0);
    assert_eq!(d.dontcache.works, 2, "the kick made during the work ran");
    assert_eq!(d.dontcache_dirty_pages, 0);
    assert_eq!(hs.engine.stats().cached_pages, 0);
}

/// Kara's case: domain B dirties 4 MiB buffered, then domain A (root)
/// writes 2 MiB uncached, on one device.
fn kara(knobs: &[(&str, &str)]) -> Harness {
    let (mut hs, dev, task) = setup(knobs, 1);
    let b_domain = hs.engine.add_domain("b");
    let a = new_handle(&mut hs, dev, DomainId(0));
    let b = new_handle(&mut hs, dev, b_domain);
    write(&mut hs, task, b, 0, 4 * MIB, WriteFlags::default());
    write(&mut hs, task, a, 0, 2 * MIB, WriteFlags::DONTCACHE);
    hs
}

#[test]
fn per_domain_counter_asks_for_the_domains_own_pages() {
    let mut hs = kara(&[]);
    let d = domain(&hs, 0);
    assert_eq!(d.dontcache.works, 1);
    assert_eq!(d.dontcache.work_pages, d.dontcache.dirty_at_work);
    assert_eq!(d.dontcache.work_pages, 512, "all of A's uncached pages");
    settle(&mut hs);
}

#[test]
fn global_split_counter_asks_for_a_bandwidth_share() {
    let mut hs = kara(&[("dontcache_counter", "global-split")]);
    // Both contexts start with the same bandwidth estimate: A is asked
    // for half of the (all A's) global count.
    let d = domain(&hs, 0);
    assert_eq!(d.dontcache.works, 1);
    assert_eq!(d.dontcache.dirty_at_work, 512);
    assert_eq!(d.dontcache.work_pages, 256);
    settle(&mut hs);
}

#[test]
fn inline_flush_makes_the_writer_submit_its_range() {
    let (mut hs, dev, task) = setup(&[("dontcache_flush", "inline")], 1);
    let h = new_handle(&mut hs, dev, DomainId(0));
    write(&mut hs, task, h, 0, MIB, WriteFlags::DONTCACHE);
    // One request at a time: the writer waited for the device to take
    // the second half of its megabyte.
    let waits: Vec<_> = hs
        .stalls
        .iter()
        .filter(|s| s.reason == StallReason::DontcacheFlush)
        .collect();
    assert_eq!(waits.len(), 1);
    let s = hs.engine.stats();
    assert_eq!(s.stall(StallReason::DontcacheFlush).count, 1);
    assert_eq!(s.domains[0].dontcache.kicks, 0, "no kick inline");
    assert_eq!(
        s.dirty_pages, 0,
        "everything submitted when the write returns"
    );
    settle(&mut hs);
    let s = hs.engine.stats();
    assert_eq!(s.written_by(WbReason::Dontcache), 256);
    assert_eq!(s.cached_pages, 0);
}

#[test]
fn bad_dontcache_knob_values_change_nothing() {
    let (mut hs, _, _) = setup(&[], 1);
    for (knob, value) in [("dontcache_flush", "sometimes"), ("dontcache_counter", "")] {
        let before = hs.engine.config().clone();
        match hs.engine.set_knob(knob, value) {
            Err(KnobError::Invalid { knob: k, .. }) => assert_eq!(k, knob),
            other => panic!("{knob}={value:?}: {other:?}"),
        }
        assert_eq!(hs.engine.config(), &before);
    }
    hs.engine.set_knob("dontcache_flush", "inline").unwrap();
    assert_eq!(hs.engine.config().get("dontcache_flush").unwrap(), "inline");
}

#[test]
fn domain_names_are_checked_and_slots_bounded() {
    let (mut hs, _, _) = setup(&[], 1);
    let e = &mut hs.engine;
    assert_eq!(e.domain("root").unwrap(), DomainId(0));
    let batch = e.domain("/batch.slice/job 1").unwrap();
    assert_eq!(
        e.domain("/batch.slice/job 1").unwrap(),
        batch,
        "found again"
    );
    assert_eq!(e.domain_name(batch), Some("/batch.slice/job 1"));
    for bad in ["", "a\nb", &"x".repeat(257)] {
        match e.domain(bad) {
            Err(EngineError::BadDomainName { name, .. }) => assert_eq!(name, bad),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    let mut made = 2;
    let full = loop {
        match e.domain(&format!("d{made}")) {
            Ok(_) => made += 1,
            Err(err) => break err,
        }
    };
    assert!(
        matches!(full, EngineError::TooManyDomains { .. }),
        "{full:?}"
    );
    assert_eq!(made, 1024, "every slot was usable");
    assert_eq!(
        e.domain("root").unwrap(),
        DomainId(0),
        "old names still resolve"
    );
}

#[test]
fn an_uncached_writer_is_paced_at_what_the_device_writes() {
    // One request at a time, 10 µs a page: the device writes 100,000
    // pages/s (~390 MiB/s), far less than the writer could dirty. 1 GiB
    // of memory: the uncached limit (50 ms of that, ~20 MiB) lies far
    // below the dirty limits, so only the uncached throttle acts.
    let (mut hs, dev, task) = setup(&[("memory", "1GiB")], 1);
    let h = new_handle(&mut hs, dev, DomainId(0));
    let writes = 400u64;
    let mut stalls_before_rate = None;
    for i in 0..writes {
        write(&mut hs, task, h, i * MIB, MIB, WriteFlags::DONTCACHE);
        if stalls_before_rate.is_none() && hs.now.as_ns() >= WRITTEN_RATE_SLOT_NS {
            stalls_before_rate = Some(hs.stalls.len());
        }
    }
    let first = stalls_before_rate.expect("the run outlasts a rate slot");
    // Until a rate is measured only the limit holds the writer back: it
    // waits for completions, never for the pace.
    assert!(hs.stalls[..first].iter().all(|s| s.wakeable));
    // Afterwards it is paced, so the room above the setpoint stays, and
    // it never waits at the limit for a completion again.
    let later = &hs.stalls[first..];
    let paced = later.iter().filter(|s| !s.wakeable).count();
    let at_limit = later.iter().filter(|s| s.wakeable).count();
    assert!(
        paced as u64 >= writes / 2,
        "{paced} paced stalls, {at_limit} at the limit"
    );
    assert_eq!(at_limit, 0, "{paced} paced stalls");
    // ...and it still gets at least 90 % of what the device writes.
    let device_pages_s = 1_000_000_000 / 10_000;
    let writer_pages_s = writes * 256 * 1_000_000_000 / hs.now.as_ns();
    assert!(
        writer_pages_s * 10 >= device_pages_s * 9,
        "writer {writer_pages_s} pages/s, device {device_pages_s}"
    );
    assert!(
        hs.stalls
            .iter()
            .all(|s| s.reason == StallReason::DirtyThrottle),
        "only throttle stalls"
    );
    settle(&mut hs);
    assert_eq!(hs.engine.stats().cached_pages, 0);
}

/// A DONTCACHE writer of 400 MiB on a device serving 16 requests at once,
/// each page in 160 µs (100,000 pages/s, a 1 MiB request in 41 ms), whose
/// queue takes `queue_depth`: the writer's pages per second and its
/// non-wakeable (pace) stalls.
fn deep_slow_device_writer(queue_depth: u32) -> (u64, usize) {
    let mut config = Config::default();
    config.set("memory", "1GiB").unwrap();
    let mut e = Engine::new(config, Instant(0));
    let mut dc = DeviceConfig::default();
    dc.set("nr_requests", "64").unwrap();
    dc.set("queue_depth", &queue_depth.to_string()).unwrap();
    dc.set("max_sectors_kb", "1024").unwrap();
    let dev = e.add_device("d", dc, 100_000);
    let task = e.add_task();
    let mut hs = Harness::new(e, 160_000);
    hs.device_slots = vec![Instant(0); 16];
    let h = new_handle(&mut hs, dev, DomainId(0));
    let writes = 400u64;
    for i in 0..writes {
        write(&mut hs, task, h, i * MIB, MIB, WriteFlags::DONTCACHE);
    }
    let paced = hs.stalls.iter().filter(|s| !s.wakeable).count();
    let writer_pages_s = writes * 256 * 1_000_000_000 / hs.now.as_ns();
    settle(&mut hs);
    assert_eq!(hs.engine.stats().cached_pages, 0);
    (writer_pages_s, paced)
}

#[test]
fn a_paced_writer_keeps_a_deep_slow_device_busy() {
    // The device needs ~16 MiB in flight, close to the uncached window
    // (50 ms of writes, ~19.5 MiB). The writer is paced between the
    // stretches of its writes; the flusher must go on writing what it
    // dirtied meanwhile. (Kicking at a pace stall only while nothing was
    // in flight, to spare small requests, let the device idle here: the
    // writer fell to 0.22x the device's rate, from 0.67x.) With a queue
    // depth of 32, wbt lets a DONTCACHE work (normal class) have 12
    // requests in flight when writing alone (3/4 of the depth, halved):
    // 12 of the 16 slots, so ~0.75x at most.
    let device_pages_s = 100_000;
    let (writer_pages_s, paced) = deep_slow_device_writer(32);
    assert!(paced >= 200, "{paced} paced stalls");
    assert!(
        writer_pages_s * 10 >= device_pages_s * 6,
        "writer {writer_pages_s} pages/s, device {device_pages_s}"
    );
}

#[test]
fn the_uncached_limit_covers_a_deep_devices_latency() {
    // With a queue deep enough for wbt to leave the device's 16 slots
    // free, the uncached limit decides: a window of 50 ms of writes held
    // the writer at 0.92x the device's rate; twice the device's latency
    // for a full request (41 ms) lets it run at 0.95x and more.
    let device_pages_s = 100_000;
    let (writer_pages_s, _) = deep_slow_device_writer(64);
    assert!(
        writer_pages_s * 100 >= device_pages_s * 95,
        "writer {writer_pages_s} pages/s, device {device_pages_s}"
    );
}
