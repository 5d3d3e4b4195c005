//! Flash devices (sata-ssd, nvme, usb-stick): one implementation, three
//! sets of defaults.
//!
//! A command holds one of `channels` flash channels from start to
//! completion. It first spends its access latency on the channel (in
//! parallel with the other channels: this is where flash gets its IOPS),
//! then moves its data over the device's single host link at the read or
//! write rate, one transfer at a time, in the order the latencies end. So an
//! isolated command costs latency + len / rate, small random commands run
//! `channels` at a time, and the aggregate bandwidth never exceeds the rate
//! (a write rate of 450 MiB/s stays 450 MiB/s with 4 channels busy).
//! Commands start in submission order (no reordering): the host queue and
//! the internal queue together form one FIFO with min(queue_depth,
//! channels) servers.

use super::common::{
    transfer_ns, BusyClock, GIB, MAX_CAPACITY, MAX_MIB_S, MIB, MIN_CAPACITY, MIN_MIB_S,
    PROBE_READ_BYTES, TIB,
};
use super::params::Params;
use super::{DevRequest, DeviceModel};
use crate::rng::Rng;
use std::collections::{BTreeMap, VecDeque};
use wb_engine::time::{NS_PER_MS, NS_PER_SEC, NS_PER_US};
use wb_engine::Instant;

/// Defaults of one flash model.
struct Preset {
    kind: &'static str,
    capacity: u64,
    read_us: u64,
    write_us: u64,
    read_mib_s: f64,
    write_mib_s: f64,
    channels: u64,
    spike_prob: f64,
    spike_ms: u64,
}

const PRESETS: [Preset; 3] = [
    Preset {
        kind: "sata-ssd",
        capacity: 512 * GIB,
        read_us: 90,
        write_us: 40,
        read_mib_s: 520.0,
        write_mib_s: 450.0,
        channels: 4,
        spike_prob: 0.0,
        spike_ms: 50,
    },
    Preset {
        kind: "nvme",
        capacity: TIB,
        read_us: 80,
        write_us: 20,
        read_mib_s: 3000.0,
        write_mib_s: 2000.0,
        channels: 16,
        spike_prob: 0.0,
        spike_ms: 50,
    },
    Preset {
        kind: "usb-stick",
        capacity: 64 * GIB,
        read_us: 900,
        write_us: 2000,
        read_mib_s: 30.0,
        write_mib_s: 10.0,
        channels: 1,
        spike_prob: 0.02,
        spike_ms: 50,
    },
];

/// Mean of the multiplicative latency jitter: latency * (1 + Exp(jitter)).
const DEFAULT_JITTER: f64 = 0.05;

#[derive(Clone, Debug)]
struct FlashParams {
    capacity: u64,
    read_ns: u64,
    write_ns: u64,
    read_bytes_s: f64,
    write_bytes_s: f64,
    channels: usize,
    jitter: f64,
    spike_prob: f64,
    spike_ns: u64,
    /// Declares that it needs stable pages (queue/stable_writes).
    stable_writes: bool,
    inactivation: super::common::Inactivation,
}

impl FlashParams {
    fn parse(preset: &Preset, params: &BTreeMap<String, String>) -> Result<FlashParams, String> {
        let mut p = Params::new(preset.kind, params);
        let max_latency_ns = NS_PER_SEC;
        let parsed = FlashParams {
            capacity: p.bytes("capacity", preset.capacity, MIN_CAPACITY, MAX_CAPACITY)?,
            read_ns: p.duration_ns(
                "read_us",
                NS_PER_US,
                preset.read_us * NS_PER_US,
                0,
                max_latency_ns,
            )?,
            write_ns: p.duration_ns(
                "write_us",
                NS_PER_US,
                preset.write_us * NS_PER_US,
                0,
                max_latency_ns,
            )?,
            read_bytes_s: p.number("read_mib_s", preset.read_mib_s, MIN_MIB_S, MAX_MIB_S)? * MIB,
            write_bytes_s: p.number("write_mib_s", preset.write_mib_s, MIN_MIB_S, MAX_MIB_S)? * MIB,
            channels: p.count("channels", preset.channels, 1, 1024)? as usize,
            jitter: p.number("jitter", DEFAULT_JITTER, 0.0, 10.0)?,
            spike_prob: p.number("spike_prob", preset.spike_prob, 0.0, 1.0)?,
            spike_ns: p.duration_ns(
                "spike_ms",
                NS_PER_MS,
                preset.spike_ms * NS_PER_MS,
                0,
                60 * NS_PER_SEC,
            )?,
            stable_writes: p.count("stable_writes", 0, 0, 1)? == 1,
            inactivation: super::common::Inactivation::parse(&mut p)?,
        };
        p.finish()?;
        Ok(parsed)
    }
}

/// A command in its latency phase, on a channel.
#[derive(Clone, Debug)]
struct Accessing {
    ready_at: Instant,
    /// Start order, to break ties between equal `ready_at`.
    seq: u64,
    req: DevRequest,
}

#[derive(Clone, Debug)]
pub struct Flash {
    kind: &'static str,
    p: FlashParams,
    rng: Rng,
    /// Commands that may hold a channel at once: min(queue_depth, channels).
    slots: usize,
    /// Submitted, not started; FIFO.
    host: VecDeque<DevRequest>,
    accessing: Vec<Accessing>,
    /// Latency over, waiting for the link; FIFO.
    link_queue: VecDeque<DevRequest>,
    /// The transfer on the link: (done time, id).
    link: Option<(Instant, u64)>,
    done: Vec<u64>,
    busy: BusyClock,
    next_seq: u64,
}

/// Builds the flash model `kind`, or None if `kind` is not a flash model.
pub fn build(
    kind: &str,
    params: &BTreeMap<String, String>,
    rng: Rng,
    queue_depth: u32,
) -> Option<Result<Flash, String>> {
    let preset = PRESETS.iter().find(|preset| preset.kind == kind)?;
    Some(FlashParams::parse(preset, params).map(|p| Flash {
        kind: preset.kind,
        slots: p.channels.min(queue_depth as usize),
        p,
        rng,
        host: VecDeque::new(),
        accessing: Vec::new(),
        link_queue: VecDeque::new(),
        link: None,
        done: Vec::new(),
        busy: BusyClock::default(),
        next_seq: 0,
    }))
}

/// What happens next inside the device. Link completions sort first so that
/// a channel freed at time t is reusable by commands started at t.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    LinkDone,
    AccessDone,
}

impl Flash {
    fn rate_bytes_s(&self, req: &DevRequest) -> f64 {
        if req.write {
            self.p.write_bytes_s
        } else {
            self.p.read_bytes_s
        }
    }

    /// Access latency of one command: base * (1 + Exp(jitter)), plus for
    /// writes with probability spike_prob an Exp(spike) stall (garbage
    /// collection, erase). Draws only what the parameters use.
    fn access_ns(&mut self, write: bool) -> u64 {
        let base_ns = if write {
            self.p.write_ns
        } else {
            self.p.read_ns
        } as f64;
        let mut ns = base_ns;
        if self.p.jitter > 0.0 {
            ns *= 1.0 + self.rng.exponential(self.p.jitter);
        }
        if write && self.p.spike_prob > 0.0 && self.rng.next_f64() < self.p.spike_prob {
            ns += self.rng.exponential(self.p.spike_ns as f64);
        }
        ns.round() as u64
    }

    fn occupied(&self) -> usize {
        self.accessing.len() + self.link_queue.len() + usize::from(self.link.is_some())
    }

    fn next_event(&self) -> Option<(Instant, Event)> {
        let link = self.link.map(|(at, _)| (at, Event::LinkDone));
        let access = self
            .first_access()
            .map(|i| (self.accessing[i].ready_at, Event::AccessDone));
        link.into_iter().chain(access).min()
    }

    /// Index of the command whose latency ends first (ties: started first).
    fn first_access(&self) -> Option<usize> {
        let key = |i: usize| (self.accessing[i].ready_at, self.accessing[i].seq);
        (0..self.accessing.len()).min_by_key(|&i| key(i))
    }

    /// Processes the next internal event; returns it.
    fn step(&mut self) -> Option<(Instant, Event)> {
        let (at, event) = self.next_event()?;
        match event {
            Event::LinkDone => {
                if let Some((_, id)) = self.link.take() {
                    self.done.push(id);
                }
            }
            Event::AccessDone => {
                if let Some(i) = self.first_access() {
                    let cmd = self.accessing.remove(i);
                    self.link_queue.push_back(cmd.req);
                }
            }
        }
        self.start_link(at);
        self.start_commands(at);
        self.busy.update(at, self.occupied() > 0);
        Some((at, event))
    }

    fn start_link(&mut self, now: Instant) {
        if self.link.is_some() {
            return;
        }
        if let Some(req) = self.link_queue.pop_front() {
            let done_at = now + transfer_ns(req.len, self.rate_bytes_s(&req));
            self.link = Some((done_at, req.id));
        }
    }

    /// Starts host-queue commands on free channels, in submission order.
    fn start_commands(&mut self, now: Instant) {
        while self.occupied() < self.slots {
            let Some(req) = self.host.pop_front() else {
                return;
            };
            let ready_at = now + self.access_ns(req.write);
            let seq = self.next_seq;
            self.next_seq += 1;
            self.accessing.push(Accessing { ready_at, seq, req });
        }
    }

    fn advance(&mut self, now: Instant) {
        while matches!(self.next_event(), Some((at, _)) if at <= now) {
            self.step();
        }
    }
}

impl DeviceModel for Flash {
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn capacity(&self) -> u64 {
        self.p.capacity
    }

    fn submit(&mut self, now: Instant, req: DevRequest) {
        self.advance(now);
        self.host.push_back(req);
        self.start_commands(now);
        self.busy.update(now, self.occupied() > 0);
    }

    /// Exact: the link is FIFO, so nothing can overtake the transfer on the
    /// link, and with the link idle the first latency to end is next.
    fn next_completion(&self) -> Option<Instant> {
        if let Some((at, _)) = self.link {
            return Some(at);
        }
        let first = &self.accessing[self.first_access()?];
        Some(first.ready_at + transfer_ns(first.req.len, self.rate_bytes_s(&first.req)))
    }

    fn complete_into(&mut self, now: Instant, done: &mut Vec<u64>) {
        self.advance(now);
        done.append(&mut self.done);
    }

    /// Median of read * (1 + Exp(jitter)) + 4 KiB / read rate; the median of
    /// an exponential with mean m is m ln 2. Exact for an idle device.
    fn stable_writes_required(&self) -> bool {
        self.p.stable_writes
    }

    fn inactivation(&self) -> super::common::Inactivation {
        self.p.inactivation
    }

    fn idle_read_latency_ns(&self) -> u64 {
        let access_ns = self.p.read_ns as f64 * (1.0 + self.p.jitter * std::f64::consts::LN_2);
        access_ns.round() as u64 + transfer_ns(PROBE_READ_BYTES, self.p.read_bytes_s)
    }

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

    fn flash(kind: &str, pairs: &[(&str, &str)], queue_depth: u32) -> Flash {
        let params = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        match build(kind, &params, Rng::new(3), queue_depth) {
            Some(Ok(dev)) => dev,
            other => panic!("cannot build {kind}: {:?}", other.map(|r| r.err())),
        }
    }

    fn req(id: u64, write: bool, offset: u64, len: u64) -> DevRequest {
        DevRequest {
            id,
            write,
            offset,
            len,
        }
    }

    /// Completes everything; returns (id, completion time) in order.
    fn drain(dev: &mut Flash) -> Vec<(u64, Instant)> {
        let mut out = Vec::new();
        while let Some(at) = dev.next_completion() {
            out.extend(dev.complete(at).into_iter().map(|id| (id, at)));
        }
        out
    }

    #[test]
    fn isolated_command_costs_latency_plus_transfer() {
        let mut dev = flash("sata-ssd", &[("jitter", "0")], 32);
        let t0 = Instant(1_000);
        dev.submit(t0, req(1, true, 0, 64 * 1024));
        let expected = t0 + 40 * NS_PER_US + transfer_ns(64 * 1024, 450.0 * MIB);
        assert_eq!(drain(&mut dev), vec![(1, expected)]);
        dev.submit(Instant(NS_PER_SEC), req(2, false, 0, 4096));
        let expected = Instant(NS_PER_SEC) + 90 * NS_PER_US + transfer_ns(4096, 520.0 * MIB);
        assert_eq!(drain(&mut dev), vec![(2, expected)]);
    }

    #[test]
    fn channels_run_in_parallel_and_share_the_link() {
        let mut dev = flash("nvme", &[("jitter", "0")], 64);
        let xfer = transfer_ns(4096, 3000.0 * MIB);
        let t0 = Instant(0);
        for id in 0..17 {
            dev.submit(t0, req(id, false, id * 4096, 4096));
        }
        let got = drain(&mut dev);
        // The 16 channels finish their latency together, then the link
        // moves one 4 KiB block after another.
        for (i, &(id, at)) in got.iter().take(16).enumerate() {
            assert_eq!(
                (id, at),
                (i as u64, t0 + 80 * NS_PER_US + (i as u64 + 1) * xfer)
            );
        }
        // The 17th waits for a free channel.
        let first_free = t0 + 80 * NS_PER_US + xfer;
        assert_eq!(got[16], (16, first_free + 80 * NS_PER_US + xfer));
    }

    #[test]
    fn aggregate_bandwidth_is_the_link_rate() {
        let mut dev = flash("sata-ssd", &[], 32);
        let len = 512 * 1024;
        for id in 0..100 {
            dev.submit(Instant(0), req(id, true, id * len, len));
        }
        let last = drain(&mut dev)
            .last()
            .map(|&(_, at)| at)
            .unwrap_or_default();
        let mib_s = 100.0 * len as f64 / MIB / last.as_secs_f64();
        assert!((440.0..=450.0).contains(&mib_s), "{mib_s} MiB/s");
    }

    #[test]
    fn queue_depth_one_serialises() {
        let mut dev = flash("nvme", &[("jitter", "0")], 1);
        dev.submit(Instant(0), req(1, false, 0, 4096));
        dev.submit(Instant(0), req(2, false, 8192, 4096));
        let one = 80 * NS_PER_US + transfer_ns(4096, 3000.0 * MIB);
        assert_eq!(
            drain(&mut dev),
            vec![(1, Instant(one)), (2, Instant(2 * one))]
        );
    }

    #[test]
    fn usb_write_spikes_happen_at_about_spike_prob() {
        let mut dev = flash("usb-stick", &[("jitter", "0"), ("spike_prob", "0.1")], 1);
        let plain_ns = 2000 * NS_PER_US + transfer_ns(4096, 10.0 * MIB);
        let mut spikes = 0;
        let mut now = Instant(0);
        for id in 0..2000 {
            dev.submit(now, req(id, true, 0, 4096));
            let done = drain(&mut dev)[0].1;
            spikes += usize::from(done.since_ns(now) > plain_ns);
            now = done;
        }
        assert!(
            (150..=250).contains(&spikes),
            "{spikes} spikes in 2000 writes"
        );
    }

    #[test]
    fn busy_time_is_the_union_of_service() {
        let mut dev = flash("nvme", &[("jitter", "0")], 32);
        let one = 80 * NS_PER_US + transfer_ns(4096, 3000.0 * MIB);
        dev.submit(Instant(1_000), req(1, false, 0, 4096));
        dev.submit(Instant(1_000), req(2, false, 4096, 4096));
        let two_end = one + transfer_ns(4096, 3000.0 * MIB);
        // Not advanced yet: accounted on a copy.
        assert_eq!(dev.busy_ns(Instant(NS_PER_SEC)), two_end);
        drain(&mut dev);
        dev.submit(Instant(NS_PER_SEC), req(3, false, 0, 4096));
        assert_eq!(dev.busy_ns(Instant(NS_PER_SEC + 10)), two_end + 10);
        drain(&mut dev);
        assert_eq!(dev.busy_ns(Instant(2 * NS_PER_SEC)), two_end + one);
    }
}
