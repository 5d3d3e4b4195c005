//! A trace of what a run did, for Perfetto (ui.perfetto.dev) or
//! chrome://tracing: slices on named tracks (a task's stall, named by its
//! reason, with its arguments) and counters over time (dirty pages,
//! writes in flight on a device), written as Chrome trace-event JSON.
//!
//! Bounded: the recorder keeps the last `capacity` events in a ring and
//! counts what it dropped, so a long run costs at most the ring's memory
//! and the file at most the ring's events (the JSON says how many were
//! dropped, in `otherData.dropped_events`).
//!
//! Times are nanoseconds on the run's clock (virtual in the simulator),
//! written as the format's microseconds.

pub mod engine;

use std::collections::VecDeque;
use std::io::{self, Write};

/// Events whose room is reserved at the start (beyond, the ring grows).
const PREALLOCATED_EVENTS: usize = 1 << 20;

/// Events kept by default: about 100 MB of JSON at most (the widest
/// event, a dirty-throttle pause with the nine figures behind it, takes
/// about 300 bytes; most take 100 to 120).
pub const DEFAULT_CAPACITY: usize = 300_000;

/// A named track (a task, a job), by its index in `Trace::track`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Track(u32);

/// A named counter, by its index in `Trace::series`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Series(u32);

/// A slice's argument: a number, or a word (a writeback reason).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg {
    Int(u64),
    Text(&'static str),
}

impl From<u64> for Arg {
    fn from(v: u64) -> Arg {
        Arg::Int(v)
    }
}

impl From<&'static str> for Arg {
    fn from(v: &'static str) -> Arg {
        Arg::Text(v)
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Event {
    Slice {
        track: Track,
        name: &'static str,
        start_ns: u64,
        dur_ns: u64,
        /// How many of the ring's `args` are this slice's (the next ones
        /// in order: slices take and give back arguments first in,
        /// first out, so no slice needs an allocation of its own).
        nargs: u8,
    },
    Counter {
        series: Series,
        ts_ns: u64,
        value: i64,
    },
}

/// The recorder.
#[derive(Debug)]
pub struct Trace {
    events: VecDeque<Event>,
    /// The slices' arguments, in the order of their slices.
    args: VecDeque<(&'static str, Arg)>,
    capacity: usize,
    dropped: u64,
    tracks: Vec<String>,
    /// Counter names, by series number.
    series: Vec<String>,
    /// Per series: the last value recorded (a counter is recorded only
    /// when it changes).
    last: Vec<Option<i64>>,
}

impl Trace {
    /// A recorder keeping the last `capacity` events (at least one).
    pub fn new(capacity: usize) -> Trace {
        let capacity = capacity.max(1);
        Trace {
            // The ring at once up to a size (growing copies it each time it
            // doubles; untouched pages cost nothing).
            events: VecDeque::with_capacity(capacity.min(PREALLOCATED_EVENTS)),
            args: VecDeque::new(),
            capacity,
            dropped: 0,
            tracks: Vec::new(),
            series: Vec::new(),
            last: Vec::new(),
        }
    }

    /// The track called `name`, made on first use.
    pub fn track(&mut self, name: &str) -> Track {
        Track(intern(&mut self.tracks, name))
    }

    /// A slice `name` on `track` from `start_ns` to `end_ns`, with
    /// numeric arguments.
    pub fn slice(
        &mut self,
        track: Track,
        name: &'static str,
        start_ns: u64,
        end_ns: u64,
        args: &[(&'static str, Arg)],
    ) {
        debug_assert!(
            (track.0 as usize) < self.tracks.len(),
            "a track of this trace"
        );
        self.args.extend(args.iter().copied());
        self.push(Event::Slice {
            track,
            name,
            start_ns,
            dur_ns: end_ns.saturating_sub(start_ns),
            nargs: u8::try_from(args.len()).expect("at most 255 arguments"),
        });
    }

    /// The counter called `name`, made on first use.
    pub fn series(&mut self, name: &str) -> Series {
        let series = intern(&mut self.series, name);
        self.last.resize(self.series.len(), None);
        Series(series)
    }

    /// Counter `series` is `value` from `ts_ns` on; nothing is recorded
    /// when that is the value it had (sampled counters cost an event only
    /// when they move).
    pub fn counter(&mut self, series: Series, ts_ns: u64, value: i64) {
        let i = series.0 as usize;
        debug_assert!(i < self.series.len(), "a series of this trace");
        if self.last[i] == Some(value) {
            return;
        }
        self.last[i] = Some(value);
        self.push(Event::Counter {
            series,
            ts_ns,
            value,
        });
    }

    fn push(&mut self, event: Event) {
        if self.events.len() == self.capacity {
            if let Some(Event::Slice { nargs, .. }) = self.events.pop_front() {
                self.args.drain(..nargs as usize);
            }
            self.dropped += 1;
        }
        self.events.push_back(event);
    }

    /// Events kept.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Events dropped to stay within the capacity (the oldest go first).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Writes the trace as Chrome trace-event JSON, one event per line.
    pub fn write_json(&self, out: &mut impl Write) -> io::Result<()> {
        writeln!(out, "{{\"displayTimeUnit\":\"ms\",")?;
        writeln!(
            out,
            "\"otherData\":{{\"dropped_events\":{},\"kept_events\":{}}},",
            self.dropped,
            self.events.len()
        )?;
        write!(
            out,
            "\"traceEvents\":[\n{{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_name\",\"args\":{{\"name\":\"writeback\"}}}}"
        )?;
        for (i, name) in self.tracks.iter().enumerate() {
            write!(
                out,
                ",\n{{\"ph\":\"M\",\"pid\":1,\"tid\":{},\"name\":\"thread_name\",\"args\":{{\"name\":{}}}}}",
                i + 1,
                quoted(name)
            )?;
        }
        // Written by hand into a buffer (a trace has hundreds of thousands
        // of events; fmt's machinery and a String per name cost as much
        // as the run being traced).
        let series: Vec<String> = self.series.iter().map(|s| quoted(s)).collect();
        let mut buf: Vec<u8> = Vec::with_capacity(WRITE_CHUNK_BYTES + 1024);
        let mut args = self.args.iter();
        for event in &self.events {
            match event {
                Event::Slice {
                    track,
                    name,
                    start_ns,
                    dur_ns,
                    nargs,
                } => {
                    buf.extend_from_slice(b",\n{\"ph\":\"X\",\"pid\":1,\"tid\":");
                    push_int(&mut buf, track.0 as u64 + 1);
                    buf.extend_from_slice(b",\"name\":");
                    push_str(&mut buf, name);
                    buf.extend_from_slice(b",\"ts\":");
                    push_us(&mut buf, *start_ns);
                    buf.extend_from_slice(b",\"dur\":");
                    push_us(&mut buf, *dur_ns);
                    buf.extend_from_slice(b",\"args\":{");
                    for (i, (key, value)) in args.by_ref().take(*nargs as usize).enumerate() {
                        if i > 0 {
                            buf.push(b',');
                        }
                        push_str(&mut buf, key);
                        buf.push(b':');
                        match value {
                            Arg::Int(v) => push_int(&mut buf, *v),
                            Arg::Text(t) => push_str(&mut buf, t),
                        }
                    }
                    buf.extend_from_slice(b"}}");
                }
                Event::Counter {
                    series: s,
                    ts_ns,
                    value,
                } => {
                    buf.extend_from_slice(b",\n{\"ph\":\"C\",\"pid\":1,\"name\":");
                    buf.extend_from_slice(series[s.0 as usize].as_bytes());
                    buf.extend_from_slice(b",\"ts\":");
                    push_us(&mut buf, *ts_ns);
                    buf.extend_from_slice(b",\"args\":{\"value\":");
                    buf.extend_from_slice(itoa::Buffer::new().format(*value).as_bytes());
                    buf.extend_from_slice(b"}}");
                }
            }
            if buf.len() >= WRITE_CHUNK_BYTES {
                out.write_all(&buf)?;
                buf.clear();
            }
        }
        out.write_all(&buf)?;
        writeln!(out, "\n]}}")
    }
}

/// The index of `name` in `names`, added if missing (names are few: a
/// track per task, two counters per device).
fn intern(names: &mut Vec<String>, name: &str) -> u32 {
    let i = names.iter().position(|n| n == name).unwrap_or_else(|| {
        names.push(name.to_string());
        names.len() - 1
    });
    i as u32
}

/// Bytes of JSON gathered before each write.
const WRITE_CHUNK_BYTES: usize = 64 * 1024;

/// A JSON string.
fn quoted(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// `s` as a JSON string: as it is when nothing in it needs escaping (the
/// names the engine uses), else escaped.
fn push_str(buf: &mut Vec<u8>, s: &str) {
    let plain = s
        .bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\');
    if plain {
        buf.push(b'"');
        buf.extend_from_slice(s.as_bytes());
        buf.push(b'"');
    } else {
        buf.extend_from_slice(quoted(s).as_bytes());
    }
}

fn push_int(buf: &mut Vec<u8>, v: u64) {
    buf.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// Nanoseconds written as microseconds with three decimals (exact).
fn push_us(buf: &mut Vec<u8>, ns: u64) {
    push_int(buf, ns / 1000);
    let frac = ns % 1000;
    buf.extend_from_slice(&[
        b'.',
        b'0' + (frac / 100) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
    ]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(trace: &Trace) -> serde_json::Value {
        let mut out = Vec::new();
        trace.write_json(&mut out).unwrap();
        serde_json::from_slice(&out).expect("valid JSON")
    }

    #[test]
    fn slices_and_counters_come_out_as_trace_events() {
        let mut trace = Trace::new(10);
        let writer = trace.track("writer");
        trace.slice(
            writer,
            "dirty_throttle",
            1_000,
            5_500,
            &[("pause_us", 4.into()), ("why", "background".into())],
        );
        let writes = trace.series("vda.writes_in_flight");
        trace.counter(writes, 2_000, 3);
        let json = parse(&trace);
        let events = json["traceEvents"].as_array().unwrap();
        assert_eq!(events[1]["args"]["name"], "writer");
        assert_eq!(events[2]["ph"], "X");
        assert_eq!(events[2]["name"], "dirty_throttle");
        assert_eq!(events[2]["tid"], 1);
        assert_eq!(events[2]["ts"], 1.0);
        assert_eq!(events[2]["dur"], 4.5);
        assert_eq!(events[2]["args"]["pause_us"], 4);
        assert_eq!(events[2]["args"]["why"], "background");
        assert_eq!(events[3]["ph"], "C");
        assert_eq!(events[3]["args"]["value"], 3);
        assert_eq!(json["otherData"]["dropped_events"], 0);
    }

    #[test]
    fn the_ring_keeps_the_last_events_and_counts_the_rest() {
        let mut trace = Trace::new(3);
        let n = trace.series("n");
        for i in 0..10 {
            trace.counter(n, i, i as i64);
        }
        assert_eq!((trace.len(), trace.dropped()), (3, 7));
        let json = parse(&trace);
        let values: Vec<u64> = json["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "C")
            .map(|e| e["args"]["value"].as_u64().unwrap())
            .collect();
        assert_eq!(values, [7, 8, 9]);
        assert_eq!(json["otherData"]["dropped_events"], 7);
    }

    #[test]
    fn slices_dropped_from_the_ring_take_their_arguments_along() {
        let mut trace = Trace::new(2);
        let t = trace.track("t");
        for i in 0..5u64 {
            let args: Vec<(&'static str, Arg)> =
                (0..i).map(|k| ("k", Arg::Int(i * 10 + k))).collect();
            trace.slice(t, "s", i, i + 1, &args);
        }
        assert_eq!(trace.args.len(), 3 + 4);
        let json = parse(&trace);
        let args: Vec<&serde_json::Value> = json["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| &e["args"])
            .collect();
        assert_eq!(args.len(), 2);
        assert_eq!(args[0]["k"], 32, "the last of slice 3's three");
        assert_eq!(args[1]["k"], 43, "the last of slice 4's four");
    }

    #[test]
    fn a_counter_is_recorded_only_when_it_moves() {
        let mut trace = Trace::new(10);
        let n = trace.series("n");
        for (t, v) in [(0, 5), (1, 5), (2, -1), (3, -1), (4, 5)] {
            trace.counter(n, t, v);
        }
        let json = parse(&trace);
        let values: Vec<i64> = json["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "C")
            .map(|e| e["args"]["value"].as_i64().unwrap())
            .collect();
        assert_eq!(values, [5, -1, 5]);
    }

    #[test]
    fn names_are_escaped() {
        let mut trace = Trace::new(4);
        let t = trace.track("job \"a\"\n");
        trace.slice(t, "sync \\ \"b\"", 0, 1, &[("why", "é\t".into())]);
        let json = parse(&trace);
        assert_eq!(json["traceEvents"][1]["args"]["name"], "job \"a\"\n");
        assert_eq!(json["traceEvents"][2]["name"], "sync \\ \"b\"");
        assert_eq!(json["traceEvents"][2]["args"]["why"], "é\t");
    }

    #[test]
    fn times_are_exact_microseconds() {
        let mut buf = Vec::new();
        for ns in [0, 7, 1_000, 1_234_567, 999_999_999_999] {
            push_us(&mut buf, ns);
            buf.push(b' ');
        }
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "0.000 0.007 1.000 1234.567 999999999.999 "
        );
    }
}
