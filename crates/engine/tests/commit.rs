//! A commit (an fsync of a few pages) is never held by wbt, as a read is
//! not: on a device that wbt has scaled down to one write at a time, the
//! commit's write goes out beside the flusher's write in flight instead
//! of waiting for it.

mod harness;

use harness::Harness;
use wb_engine::*;

const MIB: u64 = 1 << 20;

/// Whether the commit's write was submitted while the flusher's write was
/// in flight, on a device scaled to depth 1; `commit_bytes` is how much
/// the committing task wrote before its fsync.
fn commit_goes_beside_the_flusher(commit_bytes: u64) -> bool {
    let mut config = Config::default();
    config.set("memory", "64MiB").unwrap();
    let mut e = Engine::new(config, Instant(0));
    let mut dc = DeviceConfig::default();
    dc.set("queue_depth", "1").unwrap();
    let dev = e.add_device("d", dc, 100_000);
    let copy = e.add_task();
    let db = e.add_task();
    // 20 µs a page: a 1 MiB write takes 5 ms.
    let mut hs = Harness::new(e, 20_000);
    let a = hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
    let b = hs.engine.add_file(hs.now, dev, DomainId(0), 0).unwrap();
    let ha = hs.engine.open(a).unwrap();
    let hb = hs.engine.open(b).unwrap();
    // A copy writes on, while another process's reads are slow (20 ms):
    // wbt scales down to one write at a time.
    for i in 0..1000 {
        hs.run(copy, |e, now| e.write(now, copy, ha, i * MIB, MIB))
            .unwrap();
        let now = hs.now;
        hs.engine
            .note_foreign_reads(now, dev, 10, 20_000_000)
            .unwrap();
        hs.idle_until(now + 2_000_000);
        if hs.engine.stats().devices[0].wbt_max_depth == 1 && !hs.inflight.is_empty() {
            break;
        }
    }
    let stats = hs.engine.stats();
    assert_eq!(stats.devices[0].wbt_max_depth, 1, "scaled down");
    assert!(!hs.inflight.is_empty(), "the flusher has a write in flight");
    let in_flight = hs.inflight.len();
    hs.run(db, |e, now| e.write(now, db, hb, 0, commit_bytes))
        .unwrap();
    let before = hs.actions.len();
    let now = hs.now;
    let step = hs.engine.fsync(now, db, hb).unwrap();
    assert!(
        matches!(step, Step::Sleep(_)),
        "the fsync waits for its write"
    );
    hs.drain();
    let submitted = hs.actions[before..]
        .iter()
        .any(|a| matches!(a, Action::Submit(r) if r.file == b && r.dir == IoDir::Write));
    hs.engine.check_invariants();
    submitted && hs.inflight.len() > in_flight
}

#[test]
fn a_commit_goes_out_beside_the_flusher_s_write() {
    assert!(commit_goes_beside_the_flusher(8 << 10));
}

#[test]
fn a_larger_fsync_waits_for_its_turn() {
    assert!(!commit_goes_beside_the_flusher(256 << 10));
}
