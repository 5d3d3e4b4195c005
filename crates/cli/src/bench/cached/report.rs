//! The report: ops/s per configuration, engine against kernel and two
//! threads against one; what was written back meanwhile.

use super::{name, Measurement, Op, Side, BACKGROUND_RATIO, MEMORY};
use crate::bench::doc::Doc;
use crate::bench::table::{self, Table};
use serde_json::json;

/// What was written back (or read, or reclaimed) during the runs, summed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Writeback {
    pub engine_written_pages: u64,
    pub engine_reclaimed: u64,
    pub engine_device_reads: u64,
    /// Pages the kernel wrote machine-wide during the pwrite runs; None
    /// if /proc/vmstat could not be read.
    pub kernel_written_pages: Option<u64>,
}

impl Writeback {
    pub const NONE: Writeback = Writeback {
        engine_written_pages: 0,
        engine_reclaimed: 0,
        engine_device_reads: 0,
        kernel_written_pages: Some(0),
    };

    /// Both summed (unknown once either is).
    pub fn plus(&self, other: &Writeback) -> Writeback {
        Writeback {
            engine_written_pages: self.engine_written_pages + other.engine_written_pages,
            engine_reclaimed: self.engine_reclaimed + other.engine_reclaimed,
            engine_device_reads: self.engine_device_reads + other.engine_device_reads,
            kernel_written_pages: self
                .kernel_written_pages
                .zip(other.kernel_written_pages)
                .map(|(a, b)| a + b),
        }
    }
}

/// The lines that say whether writeback ran during the runs (it should not).
pub fn checks(w: &Writeback) -> Vec<String> {
    let page = wb_engine::PAGE_SIZE;
    vec![
        format!(
            "engine: {} MiB written back during the runs (expected 0: a fully dirty file stays \
             under the 40% background threshold), {} pages reclaimed, {} pages read from the device",
            (w.engine_written_pages * page) >> 20,
            w.engine_reclaimed,
            w.engine_device_reads
        ),
        match w.kernel_written_pages {
            Some(p) => format!(
                "kernel: {} MiB written machine-wide during the pwrite runs (/proc/vmstat nr_written; \
                 expected about 0: 64 MiB is under the kernel's background threshold)",
                (p * page) >> 20
            ),
            None => "kernel: /proc/vmstat unreadable, writeback during the pwrite runs unknown"
                .into(),
        },
    ]
}

pub fn to_json(results: &[Measurement]) -> serde_json::Value {
    let list: Vec<_> = results
        .iter()
        .map(|m| json!({"name": name(m.side, m.op), "threads": m.threads, "ops_s": m.ops_s}))
        .collect();
    json!({ "results": list })
}

pub fn render(results: &[Measurement], seconds: u64, repeat: usize, checks: &[String]) -> Doc {
    let find = |side: Side, op: Op, threads: usize| {
        results
            .iter()
            .find(|m| m.side == side && m.op == op && m.threads == threads)
            .map(|m| m.ops_s)
    };
    let mut t = Table::new(&["name", "threads", "ops/s", "engine/kernel", "2 threads/1"]);
    for op in [Op::Read, Op::Write] {
        for side in [Side::Kernel, Side::Engine, Side::EngineTraced] {
            for threads in [1, 2] {
                let ops = find(side, op, threads);
                if ops.is_none() && side == Side::EngineTraced {
                    continue;
                }
                t.row(vec![
                    name(side, op).into(),
                    threads.to_string(),
                    ops.map_or("-".into(), table::rate),
                    match side {
                        Side::Engine => table::ratio(ops, find(Side::Kernel, op, threads)),
                        // Traced: against the engine untraced.
                        Side::EngineTraced => table::ratio(ops, find(Side::Engine, op, threads)),
                        Side::Kernel => String::new(),
                    },
                    if threads == 2 {
                        table::ratio(ops, find(side, op, 1))
                    } else {
                        String::new()
                    },
                ]);
            }
        }
    }
    let mut out = Doc::from(format!(
        "4 KiB ops at random offsets of a fully cached 64 MiB file, {seconds} s each, \
         median of {repeat} run{} \
         (engine: memory {MEMORY}, background threshold raised to {BACKGROUND_RATIO}% so no \
         writeback runs).\n\n",
        if repeat == 1 { "" } else { "s" }
    ));
    out.table(t);
    out.push('\n');
    if results.iter().any(|m| m.side == Side::EngineTraced) {
        out.push_str("engine-*-traced rows: the ratio is to the engine without a trace.\n");
    }
    for c in checks {
        out.push_str(c);
        out.push('\n');
    }
    out
}
