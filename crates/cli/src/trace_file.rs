//! `--trace FILE` and `--trace-events N`, as `wb sim` and `wb run` take
//! them: the file is made before the run (a path that cannot be written
//! fails at once, exit 2), the trace written after it, with a word on
//! stderr when the ring dropped events.

use crate::{EXIT_BAD_INPUT, EXIT_FAILURE};
use clap::Args;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct TraceArgs {
    /// Write a trace of the run to FILE (Chrome trace-event JSON: open it at
    /// ui.perfetto.dev or chrome://tracing): each job's stalls as slices named
    /// by their reason, each device's reads and writes in flight, the cache's
    /// dirty and writeback pages. Keeps the last --trace-events events.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Most events a trace keeps (the oldest are dropped first; the file
    /// says how many were).
    #[arg(long, value_name = "N", default_value_t = wb_trace::DEFAULT_CAPACITY as u64,
          value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub trace_events: u64,
}

/// A trace file made, waiting for its trace.
pub struct TraceFile {
    out: BufWriter<std::fs::File>,
    /// The command, for messages ("wb sim").
    command: &'static str,
}

impl TraceArgs {
    /// The trace file, if one was asked for; Err: the exit code, after
    /// saying why on stderr.
    pub fn create(&self, command: &'static str) -> Result<Option<TraceFile>, ExitCode> {
        let Some(path) = &self.trace else {
            return Ok(None);
        };
        match std::fs::File::create(path) {
            Ok(file) => Ok(Some(TraceFile {
                out: BufWriter::new(file),
                command,
            })),
            Err(e) => {
                eprintln!(
                    "{command}: cannot write the trace to {}: {e}",
                    path.display()
                );
                Err(ExitCode::from(EXIT_BAD_INPUT))
            }
        }
    }

    /// Events the recorder keeps.
    pub fn events(&self) -> usize {
        self.trace_events as usize
    }
}

impl TraceFile {
    /// Writes `trace`; Err: the exit code, after saying why on stderr.
    pub fn write(mut self, trace: &wb_trace::Trace) -> Result<(), ExitCode> {
        let written = trace
            .write_json(&mut self.out)
            .and_then(|()| self.out.flush());
        if let Err(e) = written {
            eprintln!("{}: writing the trace failed: {e}", self.command);
            return Err(ExitCode::from(EXIT_FAILURE));
        }
        if trace.dropped() > 0 {
            eprintln!(
                "{}: the trace kept the last {} events, {} earlier ones were dropped (--trace-events)",
                self.command,
                trace.len(),
                trace.dropped()
            );
        }
        Ok(())
    }
}
