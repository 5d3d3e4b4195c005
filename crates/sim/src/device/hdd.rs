//! A 7200 rpm SATA disk: one head, an NCQ internal queue scheduled
//! shortest-positioning-time-first with a starvation bound, and a small
//! segmented read cache filled by read-ahead.
//!
//! Timing of a media operation starting at t:
//!   done  = t + overhead + positioning + len / media rate
//!   free  = done + read-ahead bytes / media rate   (reads only)
//! The request completes at `done`; the head stays busy reading ahead until
//! `free`, after which the segment [offset, offset + len + read-ahead) is in
//! the cache and the head rests at its end. Positioning is zero when the
//! command starts exactly where the previous media operation ended,
//! otherwise seek(distance) + a rotational wait uniform in [0, revolution).
//! Cache hits never touch the head: they move over the interface (one at a
//! time, overhead + len / interface rate), even while the head is busy.

use super::common::{
    transfer_ns, BusyClock, KIB, MAX_CAPACITY, MAX_MIB_S, MIB, MIN_CAPACITY, MIN_MIB_S,
    PROBE_READ_BYTES, TIB,
};
use super::params::Params;
use super::{DevRequest, DeviceModel};
use crate::rng::Rng;
use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};
use wb_engine::time::{NS_PER_MS, NS_PER_SEC, NS_PER_US};
use wb_engine::Instant;

#[derive(Clone, Debug)]
struct HddParams {
    capacity: u64,
    media_bytes_s: f64,
    interface_bytes_s: f64,
    /// One revolution: 60 s / rpm.
    rotation_ns: u64,
    settle_ns: u64,
    seek_full_ns: u64,
    overhead_ns: u64,
    starvation_ns: u64,
    readahead_bytes: u64,
    cache_segments: usize,
    /// Declares that it needs stable pages (queue/stable_writes).
    stable_writes: bool,
    inactivation: super::common::Inactivation,
}

impl HddParams {
    fn parse(params: &BTreeMap<String, String>) -> Result<HddParams, String> {
        let mut p = Params::new("hdd", params);
        let ms = NS_PER_MS;
        let parsed = HddParams {
            capacity: p.bytes("capacity", TIB, MIN_CAPACITY, MAX_CAPACITY)?,
            media_bytes_s: p.number("media_mib_s", 150.0, MIN_MIB_S, MAX_MIB_S)? * MIB,
            interface_bytes_s: p.number("interface_mib_s", 300.0, MIN_MIB_S, MAX_MIB_S)? * MIB,
            rotation_ns: (60.0 * NS_PER_SEC as f64 / p.number("rpm", 7200.0, 600.0, 30000.0)?)
                .round() as u64,
            settle_ns: p.duration_ns("settle_ms", ms, ms / 2, 0, 100 * ms)?,
            seek_full_ns: p.duration_ns("seek_full_ms", ms, 14 * ms, 0, 1000 * ms)?,
            overhead_ns: p.duration_ns("overhead_us", NS_PER_US, 50 * NS_PER_US, 0, 100 * ms)?,
            // Drive firmware reorders aggressively for throughput; a queued
            // command is forced through after about 200 ms. (With 50 ms the
            // Axboe 2016 writers lose more to the reader than published; see
            // BENCHMARKS.md for the sensitivity.)
            starvation_ns: p.duration_ns("starvation_ms", ms, 200 * ms, 0, 60 * NS_PER_SEC)?,
            readahead_bytes: p.bytes_in("readahead_kib", KIB, 1024 * KIB, 64 * 1024 * KIB)?,
            cache_segments: p.count("cache_segments", 4, 0, 1024)? as usize,
            stable_writes: p.count("stable_writes", 0, 0, 1)? == 1,
            inactivation: super::common::Inactivation::parse(&mut p)?,
        };
        p.finish()?;
        if parsed.seek_full_ns < parsed.settle_ns {
            let text = params.get("seek_full_ms").map_or("14", |s| s.as_str());
            return Err(format!(
                "hdd: parameter 'seek_full_ms' = '{text}' is below settle_ms (allowed: settle_ms to 1000ms)"
            ));
        }
        Ok(parsed)
    }
}

/// A command in the internal queue, not started yet.
#[derive(Clone, Debug)]
struct Queued {
    req: DevRequest,
    accepted_at: Instant,
}

/// The media operation on the head.
#[derive(Clone, Debug)]
struct MediaOp {
    req: DevRequest,
    done_at: Instant,
    /// Whether `done_at` has been processed (the request reported done).
    reported: bool,
    /// When the head finishes reading ahead; `done_at` for writes.
    free_at: Instant,
    /// Where the head rests afterwards.
    end_offset: u64,
}

/// What happens next inside the drive. The order breaks ties at equal
/// times: completions before freeing the head, so a slot freed at t is
/// refilled before the head picks its next command at t.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    CacheHitDone,
    MediaDone,
    HeadFree,
}

#[derive(Clone, Debug)]
pub struct Hdd {
    p: HddParams,
    rng: Rng,
    queue_depth: usize,
    /// Submitted, not yet accepted into the internal queue; FIFO.
    host: VecDeque<DevRequest>,
    /// Accepted, waiting for the head; oldest first.
    queued: Vec<Queued>,
    /// Commands in the internal queue, including those in service.
    accepted: usize,
    media: Option<MediaOp>,
    head_offset: u64,
    /// Cache hits on the interface: (done time, id), done times increasing.
    hits: VecDeque<(Instant, u64)>,
    interface_free_at: Instant,
    /// Cached byte ranges [start, end), least recently used first.
    cache: Vec<(u64, u64)>,
    done: Vec<u64>,
    busy: BusyClock,
    /// Bumped by every state change; keys `predicted`.
    version: u64,
    /// Memo of `next_completion` when it had to simulate: (version, answer).
    /// The runner asks after every event, the state changes far less often.
    predicted: Cell<Option<(u64, Option<Instant>)>>,
}

impl Hdd {
    pub fn build(
        params: &BTreeMap<String, String>,
        rng: Rng,
        queue_depth: u32,
    ) -> Result<Hdd, String> {
        Ok(Hdd {
            p: HddParams::parse(params)?,
            rng,
            queue_depth: queue_depth as usize,
            host: VecDeque::new(),
            queued: Vec::new(),
            accepted: 0,
            media: None,
            head_offset: 0,
            hits: VecDeque::new(),
            interface_free_at: Instant::ZERO,
            cache: Vec::new(),
            done: Vec::new(),
            busy: BusyClock::default(),
            version: 0,
            predicted: Cell::new(None),
        })
    }

    /// settle + (full - settle) * sqrt(distance / capacity); zero distance
    /// is no seek at all.
    fn seek_ns(&self, distance: u64) -> u64 {
        if distance == 0 {
            return 0;
        }
        let stroke = (distance as f64 / self.p.capacity as f64).min(1.0).sqrt();
        self.p.settle_ns + ((self.p.seek_full_ns - self.p.settle_ns) as f64 * stroke).round() as u64
    }

    fn in_service(&self) -> bool {
        self.media.is_some() || !self.hits.is_empty()
    }

    fn next_event(&self) -> Option<(Instant, Event)> {
        let hit = self.hits.front().map(|&(at, _)| (at, Event::CacheHitDone));
        let media = self.media.as_ref().map(|op| match op.reported {
            false => (op.done_at, Event::MediaDone),
            true => (op.free_at, Event::HeadFree),
        });
        hit.into_iter().chain(media).min()
    }

    /// Processes the next internal event, then starts what can start then.
    fn step(&mut self) -> Option<(Instant, Event)> {
        let (at, event) = self.next_event()?;
        self.version += 1;
        match event {
            Event::CacheHitDone => {
                if let Some((_, id)) = self.hits.pop_front() {
                    self.finish(id);
                }
            }
            Event::MediaDone => self.media_done(at),
            Event::HeadFree => self.free_head(at),
        }
        self.accept_from_host(at);
        self.start_media(at);
        self.busy.update(at, self.in_service());
        Some((at, event))
    }

    fn finish(&mut self, id: u64) {
        self.done.push(id);
        self.accepted -= 1;
    }

    fn media_done(&mut self, now: Instant) {
        let Some(op) = self.media.as_mut() else {
            return;
        };
        op.reported = true;
        let (id, no_readahead) = (op.req.id, op.free_at == now);
        self.finish(id);
        if no_readahead {
            self.free_head(now);
        }
    }

    /// The head is done (read-ahead included): update the cache, and serve
    /// queued reads the new segment covers.
    fn free_head(&mut self, now: Instant) {
        let Some(op) = self.media.take() else {
            return;
        };
        self.head_offset = op.end_offset;
        if op.req.write {
            // Also done at acceptance; again here because a read-ahead may
            // have cached the old data in between.
            self.invalidate(op.req.offset, op.req.len);
        } else if self.p.cache_segments > 0 {
            self.cache_insert(op.req.offset, op.end_offset);
            self.serve_queued_hits(now);
        }
    }

    /// Moves host-queue commands into the internal queue while it has room,
    /// in submission order.
    fn accept_from_host(&mut self, now: Instant) {
        while self.accepted < self.queue_depth {
            let Some(req) = self.host.pop_front() else {
                return;
            };
            self.accepted += 1;
            if req.write {
                self.invalidate(req.offset, req.len);
            } else if self.cache_lookup(&req) {
                self.start_hit(now, req);
                continue;
            }
            self.queued.push(Queued {
                req,
                accepted_at: now,
            });
        }
    }

    fn serve_queued_hits(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.queued.len() {
            let req = self.queued[i].req;
            if !req.write && self.cache_lookup(&req) {
                self.queued.remove(i);
                self.start_hit(now, req);
            } else {
                i += 1;
            }
        }
    }

    /// A cache hit uses only the interface, one transfer at a time.
    fn start_hit(&mut self, now: Instant, req: DevRequest) {
        let start = now.max(self.interface_free_at);
        let done_at = start + self.p.overhead_ns + transfer_ns(req.len, self.p.interface_bytes_s);
        self.interface_free_at = done_at;
        self.hits.push_back((done_at, req.id));
    }

    /// Starts the next media operation if the head is idle.
    fn start_media(&mut self, now: Instant) {
        if self.media.is_some() || self.queued.is_empty() {
            return;
        }
        let req = self.queued.remove(self.pick(now)).req;
        let distance = req.offset.abs_diff(self.head_offset);
        let positioning_ns = match distance {
            0 => 0,
            _ => self.seek_ns(distance) + self.rng.below(self.p.rotation_ns),
        };
        let done_at =
            now + self.p.overhead_ns + positioning_ns + transfer_ns(req.len, self.p.media_bytes_s);
        let end = req.offset + req.len;
        let readahead = match req.write || self.p.cache_segments == 0 {
            true => 0,
            false => self
                .p
                .readahead_bytes
                .min(self.p.capacity.saturating_sub(end)),
        };
        self.media = Some(MediaOp {
            req,
            done_at,
            reported: false,
            free_at: done_at + transfer_ns(readahead, self.p.media_bytes_s),
            end_offset: end + readahead,
        });
    }

    /// The oldest command that waited longer than the starvation bound,
    /// else the one with the shortest seek from the head (ties: oldest).
    /// Rotation is unknown in advance and not part of the estimate.
    fn pick(&self, now: Instant) -> usize {
        let starving = |q: &Queued| now.since_ns(q.accepted_at) > self.p.starvation_ns;
        if let Some(i) = self.queued.iter().position(starving) {
            return i;
        }
        let seek = |i: usize| self.seek_ns(self.queued[i].req.offset.abs_diff(self.head_offset));
        (0..self.queued.len())
            .min_by_key(|&i| (seek(i), i))
            .unwrap_or(0)
    }

    /// Whether a read lies inside a cached segment; refreshes its recency.
    fn cache_lookup(&mut self, req: &DevRequest) -> bool {
        let end = req.offset + req.len;
        let found = self
            .cache
            .iter()
            .position(|&(s, e)| s <= req.offset && end <= e);
        if let Some(i) = found {
            let segment = self.cache.remove(i);
            self.cache.push(segment);
        }
        found.is_some()
    }

    fn cache_insert(&mut self, start: u64, end: u64) {
        // Segments inside the new one would only waste slots.
        self.cache.retain(|&(s, e)| !(start <= s && e <= end));
        self.cache.push((start, end));
        if self.cache.len() > self.p.cache_segments {
            self.cache.remove(0);
        }
    }

    fn invalidate(&mut self, offset: u64, len: u64) {
        let end = offset + len;
        self.cache.retain(|&(s, e)| !(s < end && offset < e));
    }

    /// The first completion of a copy run forward (memoised per version).
    fn simulated_next_completion(&self) -> Option<Instant> {
        if let Some((version, answer)) = self.predicted.get() {
            if version == self.version {
                return answer;
            }
        }
        let mut copy = self.clone();
        let answer = loop {
            match copy.step() {
                None => break None,
                Some((_, Event::HeadFree)) => continue,
                Some((at, _)) => break Some(at),
            }
        };
        self.predicted.set(Some((self.version, answer)));
        answer
    }

    fn advance(&mut self, now: Instant) {
        while matches!(self.next_event(), Some((at, _)) if at <= now) {
            self.step();
        }
    }
}

impl DeviceModel for Hdd {
    fn kind(&self) -> &'static str {
        "hdd"
    }

    fn capacity(&self) -> u64 {
        self.p.capacity
    }

    fn submit(&mut self, now: Instant, req: DevRequest) {
        debug_assert!(
            req.offset + req.len <= self.p.capacity,
            "{req:?} beyond capacity"
        );
        self.advance(now);
        self.version += 1;
        self.host.push_back(req);
        self.accept_from_host(now);
        self.start_media(now);
        self.busy.update(now, self.in_service());
    }

    /// When the head is reading ahead, the next command it picks may
    /// complete before anything pending: that choice (and its rotational
    /// wait) is made at the head-free time, so simulate a copy to it.
    fn next_completion(&self) -> Option<Instant> {
        match self.next_event()? {
            (_, Event::HeadFree) => self.simulated_next_completion(),
            (at, _) => Some(at),
        }
    }

    fn complete_into(&mut self, now: Instant, done: &mut Vec<u64>) {
        self.advance(now);
        done.append(&mut self.done);
    }

    /// overhead + seek(median distance) + half a revolution + 4 KiB at the
    /// media rate. The distance between two uniform positions |U1 - U2| has
    /// P(|U1-U2| <= x) = 1 - (1-x)^2, so its median is 1 - 1/sqrt(2)
    /// (0.2929 of capacity) and seek = settle + (full - settle) *
    /// sqrt(0.2929). The rotational wait is uniform, median half a turn.
    /// Defaults: 0.05 + 7.806 + 4.167 + 0.026 = 12.049 ms.
    fn stable_writes_required(&self) -> bool {
        self.p.stable_writes
    }

    fn inactivation(&self) -> super::common::Inactivation {
        self.p.inactivation
    }

    fn idle_read_latency_ns(&self) -> u64 {
        let median_distance = 1.0 - std::f64::consts::FRAC_1_SQRT_2;
        let seek_ns = self.p.settle_ns as f64
            + (self.p.seek_full_ns - self.p.settle_ns) as f64 * median_distance.sqrt();
        self.p.overhead_ns
            + seek_ns.round() as u64
            + self.p.rotation_ns / 2
            + transfer_ns(PROBE_READ_BYTES, self.p.media_bytes_s)
    }

    /// Busy = the head working (read-ahead included) or a cache hit moving.
    fn busy_ns(&self, now: Instant) -> u64 {
        if matches!(self.next_event(), Some((at, _)) if at <= now) {
            // Events up to `now` not processed yet: account on a copy.
            let mut copy = self.clone();
            copy.advance(now);
            return copy.busy.total_ns(now);
        }
        self.busy.total_ns(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OVERHEAD_NS: u64 = 50 * NS_PER_US;
    const MEDIA: f64 = 150.0 * MIB;
    const INTERFACE: f64 = 300.0 * MIB;

    fn hdd(pairs: &[(&str, &str)], queue_depth: u32) -> Hdd {
        let params = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        match Hdd::build(&params, Rng::new(11), queue_depth) {
            Ok(dev) => dev,
            Err(e) => panic!("{e}"),
        }
    }

    fn read(id: u64, offset: u64, len: u64) -> DevRequest {
        DevRequest {
            id,
            write: false,
            offset,
            len,
        }
    }

    fn write(id: u64, offset: u64, len: u64) -> DevRequest {
        DevRequest {
            id,
            write: true,
            offset,
            len,
        }
    }

    /// Completes everything; returns (id, completion time) in order.
    fn drain(dev: &mut Hdd) -> Vec<(u64, Instant)> {
        let mut out = Vec::new();
        while let Some(at) = dev.next_completion() {
            out.extend(dev.complete(at).into_iter().map(|id| (id, at)));
        }
        out
    }

    fn ids(done: &[(u64, Instant)]) -> Vec<u64> {
        done.iter().map(|&(id, _)| id).collect()
    }

    #[test]
    fn read_at_head_costs_overhead_plus_transfer() {
        let mut dev = hdd(&[], 32);
        dev.submit(Instant(1_000), read(1, 0, 4096));
        let expected = Instant(1_000) + OVERHEAD_NS + transfer_ns(4096, MEDIA);
        assert_eq!(drain(&mut dev), vec![(1, expected)]);
    }

    #[test]
    fn sequential_writes_reach_media_rate() {
        let mut dev = hdd(&[], 32);
        let len = 512 * KIB;
        for id in 0..400 {
            dev.submit(Instant(0), write(id, id * len, len));
        }
        let done = drain(&mut dev);
        assert_eq!(ids(&done), (0..400).collect::<Vec<_>>());
        let last = done[399].1;
        let mib_s = 400.0 * len as f64 / MIB / last.as_secs_f64();
        assert!((0.98 * 150.0..=150.0).contains(&mib_s), "{mib_s} MiB/s");
    }

    #[test]
    fn cache_hit_completes_while_a_long_write_is_in_service() {
        let mut dev = hdd(&[], 32);
        dev.submit(Instant(0), read(1, 0, 64 * KIB));
        drain(&mut dev);
        // 100 ms later the read-ahead has long finished.
        let t = Instant(100 * NS_PER_MS);
        dev.submit(t, write(2, 500 * 1024 * MIB as u64, 64 * MIB as u64));
        let hit_at = t + NS_PER_MS;
        dev.submit(hit_at, read(3, 64 * KIB, 64 * KIB));
        let expected = hit_at + OVERHEAD_NS + transfer_ns(64 * KIB, INTERFACE);
        assert_eq!(dev.next_completion(), Some(expected));
        assert_eq!(dev.complete(expected), vec![3]);
        // The write is still going: 64 MiB alone take over 400 ms.
        let write_done = dev.next_completion().unwrap_or_default();
        assert!(write_done > t + 400 * NS_PER_MS, "{write_done}");
    }

    #[test]
    fn write_invalidates_overlapping_segment_only() {
        let mut dev = hdd(&[], 32);
        dev.submit(Instant(0), read(1, 0, 64 * KIB));
        drain(&mut dev);
        let hit_ns = OVERHEAD_NS + transfer_ns(4 * KIB, INTERFACE);
        // A write elsewhere leaves the segment alone.
        dev.submit(Instant(NS_PER_SEC), write(2, 100 * MIB as u64, 4 * KIB));
        drain(&mut dev);
        let t = Instant(2 * NS_PER_SEC);
        dev.submit(t, read(3, 64 * KIB, 4 * KIB));
        assert_eq!(drain(&mut dev), vec![(3, t + hit_ns)]);
        // A write inside the segment drops it: the same read goes to media.
        dev.submit(Instant(3 * NS_PER_SEC), write(4, 128 * KIB, 4 * KIB));
        drain(&mut dev);
        let t = Instant(4 * NS_PER_SEC);
        dev.submit(t, read(5, 64 * KIB, 4 * KIB));
        let done = drain(&mut dev);
        assert_eq!(done.len(), 1);
        assert!(
            done[0].1.since_ns(t) >= OVERHEAD_NS + 500 * NS_PER_US,
            "{:?}",
            done
        );
    }

    /// A write at 0, then reads far, near, middling and next to it; returns
    /// the order the device served them in.
    fn serve_scattered(queue_depth: u32) -> Vec<u64> {
        let mut dev = hdd(&[], queue_depth);
        let gib = 1024 * MIB as u64;
        dev.submit(Instant(0), write(0, 0, MIB as u64));
        dev.submit(Instant(1), read(1, 800 * gib, 4 * KIB));
        dev.submit(Instant(2), read(2, 10 * gib, 4 * KIB));
        dev.submit(Instant(3), read(3, 400 * gib, 4 * KIB));
        dev.submit(Instant(4), read(4, 2 * MIB as u64, 4 * KIB));
        ids(&drain(&mut dev))
    }

    #[test]
    fn sptf_picks_the_nearest_command() {
        assert_eq!(serve_scattered(32), vec![0, 4, 2, 3, 1]);
    }

    #[test]
    fn host_queue_is_fifo_when_the_internal_queue_is_full() {
        assert_eq!(serve_scattered(1), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn starved_read_is_served_within_the_bound() {
        // Queue depth 8: the writes ahead of the read are served well within
        // the bound, so the read is the only starving command. (With more
        // than starvation_ms of work queued, everything starves and the
        // drive degrades to oldest-first.)
        let mut dev = hdd(&[("starvation_ms", "50")], 8);
        let len = 512 * KIB;
        let far = 512 * 1024 * MIB as u64;
        for id in 0..7 {
            dev.submit(Instant(0), write(id, id * len, len));
        }
        dev.submit(Instant(0), read(1_000, far, 4 * KIB));
        // Keep the queue full of sequential writes until the read is done.
        let mut next = 7;
        let read_done = loop {
            let at = dev.next_completion().unwrap_or_default();
            let done = dev.complete(at);
            if done.contains(&1_000) {
                break at;
            }
            for _ in done {
                dev.submit(at, write(next, next * len, len));
                next += 1;
            }
        };
        let write_ns = OVERHEAD_NS + transfer_ns(len, MEDIA);
        let read_max_ns =
            OVERHEAD_NS + 14 * NS_PER_MS + 60 * NS_PER_SEC / 7200 + transfer_ns(4 * KIB, MEDIA);
        // Starved past the bound (SPTF preferred the writes) ...
        assert!(read_done > Instant(50 * NS_PER_MS), "{read_done}");
        // ... then taken at the next head decision.
        assert!(
            read_done <= Instant(50 * NS_PER_MS + write_ns + read_max_ns),
            "{read_done}"
        );
    }

    #[test]
    fn idle_read_latency_matches_simulated_random_reads() {
        let mut dev = hdd(&[], 32);
        let mut rng = Rng::new(5);
        let blocks = dev.capacity() / 4096;
        let mut total_ns = 0;
        for i in 0..200 {
            // 100 ms apart: the drive is idle, read-ahead finished.
            let t = Instant(i * 100 * NS_PER_MS);
            dev.submit(t, read(i, rng.below(blocks) * 4096, 4096));
            total_ns += drain(&mut dev)[0].1.since_ns(t);
        }
        let mean_ns = total_ns as f64 / 200.0;
        let model_ns = dev.idle_read_latency_ns() as f64;
        assert!(
            (mean_ns / model_ns - 1.0).abs() < 0.3,
            "mean {mean_ns} vs {model_ns}"
        );
        assert!((model_ns - 12_049_000.0).abs() < 1_000.0, "{model_ns}");
    }

    #[test]
    fn busy_time_includes_read_ahead() {
        let mut dev = hdd(&[], 32);
        dev.submit(Instant(1_000), read(1, 0, 4096));
        let read_ns = OVERHEAD_NS + transfer_ns(4096, MEDIA);
        let head_ns = read_ns + transfer_ns(MIB as u64, MEDIA);
        // Not advanced yet: accounted on a copy, mid-service and after.
        assert_eq!(dev.busy_ns(Instant(1_000 + 10_000)), 10_000);
        assert_eq!(dev.busy_ns(Instant(NS_PER_SEC)), head_ns);
        drain(&mut dev);
        dev.submit(Instant(NS_PER_SEC), write(2, MIB as u64 + 4096, 4096));
        drain(&mut dev);
        assert_eq!(dev.busy_ns(Instant(2 * NS_PER_SEC)), head_ns + read_ns);
    }

    #[test]
    fn sequential_reads_after_read_ahead_are_hits() {
        let mut dev = hdd(&[], 32);
        let len = 128 * KIB;
        let mut now = Instant(0);
        let mut latencies = Vec::new();
        for id in 0..9 {
            dev.submit(now, read(id, id * len, len));
            let at = drain(&mut dev)[0].1;
            latencies.push(at.since_ns(now));
            now = at + 20 * NS_PER_MS;
        }
        let hit_ns = OVERHEAD_NS + transfer_ns(len, INTERFACE);
        assert_eq!(latencies[0], OVERHEAD_NS + transfer_ns(len, MEDIA));
        assert!(
            latencies[1..].iter().all(|&ns| ns == hit_ns),
            "{latencies:?}"
        );
    }

    #[test]
    fn bad_parameters_are_rejected() {
        let params = |k: &str, v: &str| [(k.to_string(), v.to_string())].into_iter().collect();
        let err = Hdd::build(&params("seek_ms", "3"), Rng::new(0), 32)
            .err()
            .unwrap_or_default();
        assert!(
            err.contains("unknown parameter 'seek_ms'") && err.contains("seek_full_ms"),
            "{err}"
        );
        let err = Hdd::build(&params("rpm", "fast"), Rng::new(0), 32)
            .err()
            .unwrap_or_default();
        assert!(
            err.contains("'rpm'") && err.contains("'fast'") && err.contains("600 to 30000"),
            "{err}"
        );
        let err = Hdd::build(&params("seek_full_ms", "0.1"), Rng::new(0), 32)
            .err()
            .unwrap_or_default();
        assert!(err.contains("'seek_full_ms'"), "{err}");
        assert!(Hdd::build(&params("settle_ms", "800us"), Rng::new(0), 32).is_ok());
    }
}
