//! The report for people: fio-style per job, then the engine.

use std::fmt::Write;
use wb_sim::report::{DeviceReport, EngineReport, JobReport, LatencySummary, RunReport};

fn lat_line(label: &str, l: &LatencySummary) -> String {
    // Microseconds below 10 ms, milliseconds above, as fio does.
    let (unit, div) = if l.max >= 10_000.0 {
        ("msec", 1000.0)
    } else {
        ("usec", 1.0)
    };
    format!(
        "    {label} lat ({unit}): p50={:.3} p90={:.3} p99={:.3} p99.9={:.3} p99.99={:.3} max={:.3}\n",
        l.p50 / div,
        l.p90 / div,
        l.p99 / div,
        l.p99_9 / div,
        l.p99_99 / div,
        l.max / div
    )
}

fn job(out: &mut String, j: &JobReport) {
    let op = if j.kind == "reader" { "read" } else { "write" };
    let _ = writeln!(
        out,
        "{} ({} on {}){}:",
        j.name,
        j.kind,
        j.device,
        if j.cut_off {
            ", cut off by the scenario's duration"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "  {op}: IOPS={:.0}, BW={:.1}MiB/s ({:.1}MiB in {:.2}s){}",
        j.iops,
        j.bw_mib_s,
        j.bytes as f64 / (1024.0 * 1024.0),
        j.elapsed_s,
        if j.errors > 0 {
            format!(", {} errors", j.errors)
        } else {
            String::new()
        }
    );
    out.push_str(&lat_line(op, &j.lat_us));
    if let Some(cached) = j.cached_end_mib {
        let _ = writeln!(out, "    its files cached at the end: {cached:.1}MiB");
    }
    if j.syncs > 0 {
        out.push_str(&lat_line(
            &format!("sync ({} calls)", j.syncs),
            &j.sync_lat_us,
        ));
    }
    // A job of more than one kind of operation: each kind as dbench
    // reports it.
    if j.op_kinds.len() > 1 {
        for k in &j.op_kinds {
            let _ = writeln!(
                out,
                "  {:<6} count={} avg={:.3}ms max={:.3}ms",
                k.kind,
                k.count,
                k.avg_us / 1000.0,
                k.max_us / 1000.0
            );
        }
    }
}

/// The report of a simulated run (`real` false) or a real one.
pub fn render(r: &RunReport, real: bool) -> String {
    let mut out = String::new();
    header(&mut out, r, real);
    for j in &r.jobs {
        job(&mut out, j);
    }
    let e = &r.engine;
    let _ = writeln!(out, "\nengine:");
    if let Some(backend) = &r.io_backend {
        let _ = writeln!(out, "  I/O backend: {backend}");
    }
    let _ = writeln!(
        out,
        "  memory {:.0}MiB, dirty thresh {:.0}MiB, background thresh {:.0}MiB",
        e.memory_mib, e.thresh_mib, e.bg_thresh_mib
    );
    let _ = writeln!(
        out,
        "  peaks: dirty {:.1}MiB, writeback {:.1}MiB, cached {:.1}MiB; dirtied {:.1}MiB, written {:.1}MiB",
        e.dirty_peak_mib, e.writeback_peak_mib, e.cached_peak_mib, e.dirtied_mib, e.written_mib
    );
    stalls(&mut out, e);
    written_by_reason(&mut out, e);
    for d in &e.devices {
        device(&mut out, d);
    }
    let _ = writeln!(
        out,
        "  cached at the end: {:.1}MiB ({:.1}MiB active); activated {:.1}MiB, of which {:.1}MiB on refault",
        e.cached_end_mib, e.active_end_mib, e.activated_mib, e.workingset_activate_mib
    );
    domains(&mut out, e);
    out
}

/// The first line: the scenario, its seed, and how long the run took (a
/// simulated run: how much faster than real time it went).
fn header(out: &mut String, r: &RunReport, real: bool) {
    if real {
        let _ = writeln!(
            out,
            "scenario {} (seed {}): jobs ran for {:.2}s ({:.2}s with set-up)\n",
            r.scenario, r.seed, r.sim_time_s, r.wall_time_s
        );
    } else {
        let speed = if r.wall_time_s > 0.0 {
            r.sim_time_s / r.wall_time_s
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "scenario {} (seed {}): {:.2}s simulated in {:.2}s of wall time ({:.0}x real time)\n",
            r.scenario, r.seed, r.sim_time_s, r.wall_time_s, speed
        );
    }
}

/// The reasons writers stalled for, with how often and how long ("none"
/// if they never did).
fn stalls(out: &mut String, e: &EngineReport) {
    let stalls: Vec<String> = e
        .stalls
        .iter()
        .filter(|s| s.count > 0)
        .map(|s| {
            format!(
                "{} {} (total {:.1}ms, max {:.1}ms)",
                s.reason, s.count, s.total_ms, s.max_ms
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "  stalls: {}",
        if stalls.is_empty() {
            "none".to_string()
        } else {
            stalls.join("; ")
        }
    );
}

/// What was written back, by reason (those that wrote anything).
fn written_by_reason(out: &mut String, e: &EngineReport) {
    let reasons: Vec<String> = e
        .written_by_reason_mib
        .iter()
        .filter(|(_, m)| *m > 0.0)
        .map(|(r, m)| format!("{r} {m:.1}MiB"))
        .collect();
    let _ = writeln!(out, "  written by reason: {}", reasons.join(", "));
}

/// One device: its I/O and wbt, its throttled writers, and its backlog of
/// releases if it had one.
fn device(out: &mut String, d: &DeviceReport) {
    let _ = writeln!(
        out,
        "  device {} ({}): util {}, {} reads ({:.1}MiB), {} writes ({:.1}MiB), in flight peak {}, {}",
        d.name,
        d.model,
        d.utilization.map_or("n/a".to_string(), |u| format!("{:.1}%", u * 100.0)),
        d.reads,
        d.read_mib,
        d.writes,
        d.written_mib,
        d.inflight_peak,
        wbt(d)
    );
    let _ = writeln!(
        out,
        "    writers throttled: {} pauses, total {:.1}ms, max {:.1}ms",
        d.throttle_pauses, d.throttle_total_ms, d.throttle_max_ms
    );
    let b = &d.backlog;
    if b.items_done > 0 || b.max_items > 0 {
        let _ = writeln!(
            out,
            "    backlog: {} files released in {} steps, {} throttles, peak {} items / {:.1}ms of work and {} large files parked (watermarks {:.0}/{:.0}ms), estimates {:.1}us a file + {:.1}us a MiB, {} errors",
            b.items_done,
            b.steps_done,
            b.throttles,
            b.max_items,
            b.max_level_ms,
            b.max_parked,
            b.high_ms,
            b.low_ms,
            b.est_file_us,
            b.est_mib_us,
            b.errors
        );
    }
}

/// A device's wbt: its target and the range its depth moved in, or off.
fn wbt(d: &DeviceReport) -> String {
    if d.wbt_enabled {
        format!(
            "wbt target {:.2}ms, max depth {}..{} ({} down, {} up)",
            d.wbt_target_us / 1000.0,
            d.wbt_max_depth_min,
            d.wbt_max_depth_max,
            d.wbt_scale_downs,
            d.wbt_scale_ups
        )
    } else {
        "wbt off".to_string()
    }
}

/// Per writeback domain, when there is more than one or any wrote uncached.
fn domains(out: &mut String, e: &EngineReport) {
    let show_domains = e.domains.len() > 1
        || e.domains
            .iter()
            .any(|d| d.dontcache_kicks + d.dontcache_works > 0);
    for d in e.domains.iter().filter(|_| show_domains) {
        let share = d
            .dontcache_kick_share
            .map_or("n/a".to_string(), |s| format!("{:.2}", s));
        let _ = writeln!(
            out,
            "  domain {} on {}: dirtied {:.1}MiB, written {:.1}MiB; uncached: {} kicks ({} coalesced), {} works of {:.1}MiB for {:.1}MiB dirty (share {share}), {:.1}MiB dropped behind",
            d.domain,
            d.device,
            d.dirtied_mib,
            d.written_mib,
            d.dontcache_kicks,
            d.dontcache_kicks_coalesced,
            d.dontcache_works,
            d.dontcache_work_mib,
            d.dontcache_dirty_at_work_mib,
            d.dropped_behind_mib
        );
    }
}
