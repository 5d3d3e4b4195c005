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

use std::collections::VecDeque;
use std::io::{self, Write};

/// Events kept by default: about 60 MiB of JSON at most.
pub const DEFAULT_CAPACITY: usize = 500_000;

/// A named track (a task, a job), by its index in `Trace::track`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Track(u32);

/// A named counter, by its index in `Trace::series`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Series(u32);

#[derive(Clone, Debug, PartialEq)]
enum Event {
    Slice {
        track: Track,
        name: &'static str,
        start_ns: u64,
        dur_ns: u64,
        args: Vec<(&'static str, u64)>,
    },
    Counter {
        series: Series,
        ts_ns: u64,
        value: u64,
    },
}

/// The recorder.
#[derive(Debug)]
pub struct Trace {
    events: VecDeque<Event>,
    capacity: usize,
    dropped: u64,
    tracks: Vec<String>,
    /// Counter names, by series number.
    series: Vec<String>,
}

impl Trace {
    /// A recorder keeping the last `capacity` events (at least one).
    pub fn new(capacity: usize) -> Trace {
        let capacity = capacity.max(1);
        Trace {
            events: VecDeque::with_capacity(capacity.min(1 << 16)),
            capacity,
            dropped: 0,
            tracks: Vec::new(),
            series: Vec::new(),
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
        args: &[(&'static str, u64)],
    ) {
        debug_assert!(
            (track.0 as usize) < self.tracks.len(),
            "a track of this trace"
        );
        self.push(Event::Slice {
            track,
            name,
            start_ns,
            dur_ns: end_ns.saturating_sub(start_ns),
            args: args.to_vec(),
        });
    }

    /// The counter called `name`, made on first use.
    pub fn series(&mut self, name: &str) -> Series {
        Series(intern(&mut self.series, name))
    }

    /// Counter `series` is `value` from `ts_ns` on.
    pub fn counter(&mut self, series: Series, ts_ns: u64, value: u64) {
        debug_assert!(
            (series.0 as usize) < self.series.len(),
            "a series of this trace"
        );
        self.push(Event::Counter {
            series,
            ts_ns,
            value,
        });
    }

    fn push(&mut self, event: Event) {
        if self.events.len() == self.capacity {
            self.events.pop_front();
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
        let series: Vec<String> = self.series.iter().map(|s| quoted(s)).collect();
        for event in &self.events {
            match event {
                Event::Slice {
                    track,
                    name,
                    start_ns,
                    dur_ns,
                    args,
                } => {
                    write!(
                        out,
                        ",\n{{\"ph\":\"X\",\"pid\":1,\"tid\":{},\"name\":{},\"ts\":{},\"dur\":{},\"args\":{{",
                        track.0 + 1,
                        quoted(name),
                        Us(*start_ns),
                        Us(*dur_ns)
                    )?;
                    for (i, (key, value)) in args.iter().enumerate() {
                        let sep = if i == 0 { "" } else { "," };
                        write!(out, "{sep}{}:{value}", quoted(key))?;
                    }
                    write!(out, "}}}}")?;
                }
                Event::Counter {
                    series: s,
                    ts_ns,
                    value,
                } => write!(
                    out,
                    ",\n{{\"ph\":\"C\",\"pid\":1,\"name\":{},\"ts\":{},\"args\":{{\"value\":{value}}}}}",
                    series[s.0 as usize],
                    Us(*ts_ns)
                )?,
            }
        }
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

/// A JSON string.
fn quoted(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// Nanoseconds written as microseconds with three decimals (exact).
struct Us(u64);

impl std::fmt::Display for Us {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
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
        trace.slice(writer, "dirty_throttle", 1_000, 5_500, &[("pause_us", 4)]);
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
        assert_eq!(events[3]["ph"], "C");
        assert_eq!(events[3]["args"]["value"], 3);
        assert_eq!(json["otherData"]["dropped_events"], 0);
    }

    #[test]
    fn the_ring_keeps_the_last_events_and_counts_the_rest() {
        let mut trace = Trace::new(3);
        let n = trace.series("n");
        for i in 0..10 {
            trace.counter(n, i, i);
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
    fn names_are_escaped() {
        let mut trace = Trace::new(4);
        let t = trace.track("job \"a\"\n");
        trace.slice(t, "sync", 0, 1, &[]);
        assert_eq!(
            parse(&trace)["traceEvents"][1]["args"]["name"],
            "job \"a\"\n"
        );
    }
}
