//! `.writeback/stats`: the engine's statistics in vmstat style, one
//! `name value` a line, units in the names, so both people and scripts
//! can read it (`grep ^dirty_bytes`).

use crate::requests::{Opcode, Requests};
use std::fmt::Write;
use wb_engine::{StallReason, Stats, WbReason, PAGE_SIZE};

/// Counts the server shows in `.writeback/stats`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ServerCounts {
    /// Inodes the kernel holds (each keeps an O_PATH descriptor).
    pub inodes: u64,
    /// Open regular-file handles.
    pub open_files: u64,
    /// Of those, handles writing uncached (O_DIRECT or the
    /// `user.writeback.dontcache` attribute).
    pub open_dontcache: u64,
}

/// Renders the statistics: cache-wide lines first, then each device's
/// lines prefixed with `<device>.`, then each writeback domain's.
pub(crate) fn render(stats: &Stats, oldest_dirty_age: Option<std::time::Duration>) -> String {
    let mut out = String::new();
    page_lines(&mut out, stats);
    // How old the oldest dirty data is: at most what a crash of the mount
    // would lose (0 with nothing dirty).
    let age_ms = oldest_dirty_age.map_or(0, |a| u64::try_from(a.as_millis()).unwrap_or(u64::MAX));
    line(&mut out, "dirty_oldest_age_ms", age_ms);
    memory_lines(&mut out, &stats.memory);
    pause_lines(&mut out, stats);
    written_by_reason_lines(&mut out, stats);
    for d in &stats.devices {
        device_lines(&mut out, d);
    }
    for d in &stats.domains {
        domain_lines(&mut out, d);
    }
    out
}

/// The cache-wide page counts, in bytes.
fn page_lines(out: &mut String, stats: &Stats) {
    let clean = stats
        .cached_pages
        .saturating_sub(stats.dirty_pages + stats.writeback_pages);
    let pages = [
        ("memory_bytes", stats.memory_pages),
        ("cached_bytes", stats.cached_pages),
        ("dirty_bytes", stats.dirty_pages),
        ("writeback_bytes", stats.writeback_pages),
        ("reclaimable_bytes", clean),
        ("dirty_threshold_bytes", stats.thresh_pages),
        ("dirty_background_threshold_bytes", stats.bg_thresh_pages),
        ("dirtied_bytes", stats.dirtied_pages),
        ("written_bytes", stats.written_pages),
        ("reclaimed_bytes", stats.reclaimed_pages),
        ("active_bytes", stats.active_pages),
        ("activated_bytes", stats.pgactivate),
        ("deactivated_bytes", stats.pgdeactivate),
        ("workingset_activate_bytes", stats.workingset_activate),
        ("readahead_async_bytes", stats.readahead_async_pages),
        ("dirty_peak_bytes", stats.dirty_peak_pages),
        ("writeback_peak_bytes", stats.writeback_peak_pages),
        ("dontcache_dirty_bytes", stats.dontcache_dirty_pages),
    ];
    for (name, n) in pages {
        line(out, name, n * PAGE_SIZE);
    }
}

/// The cache-wide pauses, per reason: how many, how long in all, the
/// longest.
fn pause_lines(out: &mut String, stats: &Stats) {
    for reason in StallReason::ALL {
        let s = stats.stall(reason);
        line(out, &format!("pause_{reason}_count"), s.count);
        line(out, &format!("pause_{reason}_total_us"), s.total_ns / 1000);
        line(out, &format!("pause_{reason}_max_us"), s.max_ns / 1000);
    }
}

/// The bytes written back, per reason.
fn written_by_reason_lines(out: &mut String, stats: &Stats) {
    for (i, reason) in WbReason::ALL.iter().enumerate() {
        let bytes = stats.written_by_reason[i] * PAGE_SIZE;
        line(out, &format!("written_{}_bytes", reason.name()), bytes);
    }
}

/// One device's lines, prefixed `<device>.`.
fn device_lines(out: &mut String, d: &wb_engine::DeviceStats) {
    let name = &d.name;
    device_io_lines(out, d);
    stable_writes_lines(out, d);
    wbt_lines(out, d);
    line(
        out,
        &format!("{name}.pause_dirty_throttle_count"),
        d.throttle.count,
    );
    line(
        out,
        &format!("{name}.pause_dirty_throttle_total_us"),
        d.throttle.total_ns / 1000,
    );
    line(
        out,
        &format!("{name}.pause_dirty_throttle_max_us"),
        d.throttle.max_ns / 1000,
    );
    backlog_lines(out, name, &d.backlog);
}

/// A device's data (dirty, under writeback, written, read), its write
/// errors, and the space reserved for its dirty data.
fn device_io_lines(out: &mut String, d: &wb_engine::DeviceStats) {
    let name = &d.name;
    line(
        out,
        &format!("{name}.dirty_bytes"),
        d.dirty_pages * PAGE_SIZE,
    );
    line(
        out,
        &format!("{name}.writeback_bytes"),
        d.writeback_pages * PAGE_SIZE,
    );
    line(
        out,
        &format!("{name}.written_bytes"),
        d.pages_written * PAGE_SIZE,
    );
    line(out, &format!("{name}.read_bytes"), d.pages_read * PAGE_SIZE);
    line(out, &format!("{name}.write_errors"), d.write_errors);
    // Space reserved at write time for dirty data (the engine's space/).
    line(
        out,
        &format!("{name}.space_free_bytes"),
        d.space_free_pages * PAGE_SIZE,
    );
    line(
        out,
        &format!("{name}.space_reserved_bytes"),
        d.space_reserved_pages * PAGE_SIZE,
    );
    line(out, &format!("{name}.space_flushes"), d.space_flushes);
    line(out, &format!("{name}.enospc_writes"), d.enospc_writes);
}

/// What writers do with a device's pages under writeback, one flag per
/// mode (values stay integers), whether the device decided (auto), and
/// the bytes held in copies (snapshot).
fn stable_writes_lines(out: &mut String, d: &wb_engine::DeviceStats) {
    let name = &d.name;
    for mode in ["none", "wait", "snapshot"] {
        let on = d.stable_writes.split(' ').next() == Some(mode);
        line(out, &format!("{name}.stable_writes_{mode}"), on as u64);
    }
    let auto = d.stable_writes.ends_with("(auto)");
    line(out, &format!("{name}.stable_writes_auto"), auto as u64);
    line(
        out,
        &format!("{name}.snapshot_bytes"),
        d.snapshot_pages * PAGE_SIZE,
    );
}

/// A device's write bandwidth and its writeback throttling (wbt): the
/// target, the depth's scale step, pacing and slices, commit latency.
fn wbt_lines(out: &mut String, d: &wb_engine::DeviceStats) {
    let name = &d.name;
    line(
        out,
        &format!("{name}.write_bandwidth_bytes_s"),
        d.write_bw_pages_s * PAGE_SIZE,
    );
    line(
        out,
        &format!("{name}.wbt_target_us"),
        d.wbt_target_ns / 1000,
    );
    // Signed: below 0 wbt allows more than its default depth.
    let _ = writeln!(out, "{name}.wbt_scale_step {}", d.wbt_scale_step);
    line(
        out,
        &format!("{name}.wbt_pace_step"),
        d.wbt_pace_step as u64,
    );
    line(out, &format!("{name}.wbt_pace_holds"), d.wbt_pace_holds);
    line(out, &format!("{name}.wbt_slice_cycles"), d.wbt_slice_cycles);
    line(out, &format!("{name}.wbt_slice_holds"), d.wbt_slice_holds);
    line(
        out,
        &format!("{name}.wbt_slice_read_holds"),
        d.wbt_slice_read_holds,
    );
    line(
        out,
        &format!("{name}.wbt_slice_read_hold_ms"),
        d.wbt_slice_read_hold_ns / 1_000_000,
    );
    // What slow commits are judged by (against twice the target).
    line(
        out,
        &format!("{name}.wbt_commit_mean_us"),
        d.wbt_commit_mean_ns / 1000,
    );
}

/// The budget: where it stands (`memory_bytes` is the budget now), why
/// (one flag per reason), what moved it, what the last sample of the
/// memory where the mount runs showed.
fn memory_lines(out: &mut String, m: &wb_engine::MemoryBudgetStats) {
    let v = &m.view;
    let values = [
        ("memory_follows_pressure", m.follows_pressure as u64),
        ("memory_ceiling_bytes", m.ceiling_pages * PAGE_SIZE),
        ("memory_min_bytes", m.floor_pages * PAGE_SIZE),
        ("memory_shrinks", m.shrinks),
        ("memory_grows", m.grows),
        ("memory_shrunk_bytes", m.shrunk_pages * PAGE_SIZE),
        ("memory_grown_bytes", m.grown_pages * PAGE_SIZE),
        ("memory_given_back_bytes", m.given_back_pages * PAGE_SIZE),
        ("memory_available_bytes", v.available_bytes),
        ("memory_reserve_bytes", v.reserve_bytes),
        ("memory_limit_bytes", v.limit_bytes),
        ("memory_limit_is_cgroup", v.cgroup_binds as u64),
        ("memory_demand_bytes", v.demand_bytes),
        ("memory_psi_some_permille", v.some_permille),
        ("memory_psi_full_permille", v.full_permille),
    ];
    for (name, value) in values {
        line(out, name, value);
    }
    for reason in wb_engine::BudgetReason::ALL {
        line(
            out,
            &format!("memory_reason_{}", reason.name()),
            (m.reason == reason) as u64,
        );
    }
}

/// A device's backlog of deferred releases (removed files being freed).
fn backlog_lines(out: &mut String, device: &str, b: &wb_engine::BacklogStats) {
    let values = [
        ("items", b.items),
        ("items_done", b.items_done),
        ("steps_done", b.steps_done),
        ("max_items", b.max_items),
        ("max_parked", b.max_parked),
        ("throttles", b.throttles),
        ("errors", b.errors),
        ("level_us", b.level_ns / 1000),
        ("high_us", b.high_ns / 1000),
        ("low_us", b.low_ns / 1000),
    ];
    for (name, value) in values {
        line(out, &format!("{device}.backlog_{name}"), value);
    }
}

/// One writeback domain's lines, prefixed `domain:<name>:<device>.`
/// (spaces in a cgroup name become `_`, so a line stays `name value`).
fn domain_lines(out: &mut String, d: &wb_engine::DomainStats) {
    let prefix = format!("domain:{}:{}", d.domain.replace(' ', "_"), d.device);
    let values = [
        ("dirty_bytes", d.dirty_pages * PAGE_SIZE),
        ("writeback_bytes", d.writeback_pages * PAGE_SIZE),
        ("dontcache_dirty_bytes", d.dontcache_dirty_pages * PAGE_SIZE),
        ("dirtied_bytes", d.dirtied_pages * PAGE_SIZE),
        ("written_bytes", d.written_pages * PAGE_SIZE),
        ("dontcache_kicks", d.dontcache.kicks),
        ("dontcache_works", d.dontcache.works),
        (
            "dontcache_dropped_bytes",
            d.dontcache.dropped_pages * PAGE_SIZE,
        ),
    ];
    for (name, value) in values {
        line(out, &format!("{prefix}.{name}"), value);
    }
    for reason in StallReason::ALL {
        let s = d.stalls[reason.index()];
        line(out, &format!("{prefix}.pause_{reason}_count"), s.count);
        line(
            out,
            &format!("{prefix}.pause_{reason}_total_us"),
            s.total_ns / 1000,
        );
        stall_histogram(out, &format!("{prefix}.pause_{reason}"), &s);
    }
}

/// A stall histogram in log2 buckets of µs, the buckets that have any:
/// `NAME_lt_1024us 5` counts the stalls of [512, 1024) µs (`_lt_1us`
/// those under a µs), the last bucket is `NAME_ge_8388608us`.
fn stall_histogram(out: &mut String, name: &str, s: &wb_engine::StallStats) {
    for (k, &n) in s.buckets.iter().enumerate().filter(|(_, &n)| n > 0) {
        match wb_engine::StallStats::bucket_end_us(k) {
            Some(end) => line(out, &format!("{name}_lt_{end}us"), n),
            None => line(out, &format!("{name}_ge_{}us", 1u64 << (k - 1)), n),
        }
    }
}

/// The server's own lines: what the kernel holds open through it, and
/// the requests it sent, in all, over io_uring, and by opcode (every opcode, served or
/// not: how many, the time spent serving them, the longest).
pub(crate) fn render_server(counts: &ServerCounts, requests: &Requests) -> String {
    let mut out = String::new();
    line(&mut out, "fuse_inodes", counts.inodes);
    line(&mut out, "fuse_open_files", counts.open_files);
    line(&mut out, "fuse_open_dontcache_files", counts.open_dontcache);
    let served = Opcode::ALL.map(|op| requests.served(op));
    line(
        &mut out,
        "fuse_requests_count",
        served.iter().map(|s| s.count).sum(),
    );
    line(
        &mut out,
        "fuse_requests_over_uring_count",
        requests.over_uring(),
    );
    for (op, s) in Opcode::ALL.iter().zip(served) {
        let name = op.name();
        line(&mut out, &format!("fuse_request_{name}_count"), s.count);
        line(
            &mut out,
            &format!("fuse_request_{name}_total_us"),
            s.total_ns / 1000,
        );
        line(
            &mut out,
            &format!("fuse_request_{name}_max_us"),
            s.max_ns / 1000,
        );
    }
    out
}

fn line(out: &mut String, name: &str, value: u64) {
    // Writing to a String cannot fail.
    let _ = writeln!(out, "{name} {value}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_name_and_one_integer_per_line() {
        let mut stats = Stats {
            dirty_pages: 3,
            ..Stats::default()
        };
        stats.devices.push(wb_engine::DeviceStats {
            name: "vda".into(),
            stable_writes: "snapshot (auto)".into(),
            wbt_commit_mean_ns: 312_400,
            ..Default::default()
        });
        let text = render(&stats, Some(std::time::Duration::from_millis(1500)));
        assert!(text.contains("vda.wbt_commit_mean_us 312\n"), "{text}");
        assert!(text.contains("dirty_bytes 12288\n"), "{text}");
        assert!(text.contains("dirty_oldest_age_ms 1500\n"), "{text}");
        assert!(text.contains("vda.dirty_bytes 0\n"), "{text}");
        assert!(text.contains("pause_dirty_throttle_count 0\n"), "{text}");
        assert!(text.contains("vda.stable_writes_snapshot 1\n"), "{text}");
        assert!(text.contains("vda.stable_writes_none 0\n"), "{text}");
        assert!(text.contains("vda.stable_writes_auto 1\n"), "{text}");
        assert!(text.contains("vda.backlog_items_done 0\n"), "{text}");
        assert!(text.contains("memory_reason_start 1\n"), "{text}");
        assert!(text.contains("memory_reason_pressure 0\n"), "{text}");
        assert!(text.contains("memory_given_back_bytes 0\n"), "{text}");
        for l in text.lines() {
            let (name, value) = l.split_once(' ').expect("name value");
            assert!(!name.is_empty() && value.parse::<u64>().is_ok(), "{l}");
        }
    }

    #[test]
    fn a_domains_stalls_come_with_their_log2_histogram() {
        let mut d = wb_engine::DomainStats {
            device: "vda".into(),
            domain: "root".into(),
            ..Default::default()
        };
        let throttle = &mut d.stalls[StallReason::DirtyThrottle.index()];
        for ns in [600_000, 700_000, 2_000_000, 3_600_000_000_000] {
            throttle.record(ns);
        }
        let mut text = String::new();
        domain_lines(&mut text, &d);
        let p = "domain:root:vda.pause_dirty_throttle";
        assert!(text.contains(&format!("{p}_count 4\n")), "{text}");
        assert!(text.contains(&format!("{p}_lt_1024us 2\n")), "{text}");
        // 2 ms = 2000 µs: [1024, 2048).
        assert!(text.contains(&format!("{p}_lt_2048us 1\n")), "{text}");
        assert!(text.contains(&format!("{p}_ge_8388608us 1\n")), "{text}");
        // Reasons without stalls have no histogram lines.
        assert!(!text.contains("pause_wbt_lt_"), "{text}");
    }
}
