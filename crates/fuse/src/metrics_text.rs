//! `.writeback/metrics`: the figures of `.writeback/stats` in the
//! Prometheus text exposition format 0.0.4, from the same snapshot (the
//! cache's families are the library's, `writeback::telemetry`), followed
//! by the server's own: what the kernel holds open and its requests by
//! opcode, counted and timed in a histogram.

use crate::requests::{Opcode, Requests};
use crate::stats_text::ServerCounts;
use writeback::telemetry::{self, Family, Histogram, Kind, Value};

/// The whole file: the cache's families, then the server's.
/// `families`: the cache's (`Cache::metric_families`).
pub(crate) fn render(
    mut families: Vec<Family>,
    counts: &ServerCounts,
    requests: &Requests,
) -> String {
    families.extend(server_families(counts, requests));
    telemetry::render_prometheus(&families)
}

/// The server's families.
fn server_families(counts: &ServerCounts, requests: &Requests) -> Vec<Family> {
    let gauges = [
        ("wb_fuse_inodes", "Inodes the kernel holds.", counts.inodes),
        (
            "wb_fuse_open_files",
            "Open regular-file handles.",
            counts.open_files,
        ),
        (
            "wb_fuse_open_dontcache_files",
            "Open handles writing uncached (O_DIRECT or user.writeback.dontcache).",
            counts.open_dontcache,
        ),
    ];
    let mut out: Vec<Family> = gauges
        .into_iter()
        .map(|(name, help, v)| Family::single(name, help, Kind::Gauge, Value::Int(v)))
        .collect();
    out.push(Family::single(
        "wb_fuse_requests_over_uring_total",
        "Requests that came over io_uring.",
        Kind::Counter,
        Value::Int(requests.over_uring()),
    ));
    let mut count = Family::new(
        "wb_fuse_requests_total",
        "Requests served, by opcode.",
        Kind::Counter,
    );
    let mut duration = Family::new(
        "wb_fuse_request_duration_seconds",
        "Time serving requests took (reply not included), by opcode.",
        Kind::Histogram,
    );
    for op in Opcode::ALL {
        let s = requests.served(op);
        let h = Histogram {
            buckets: s.buckets,
            sum_ns: s.total_ns,
        };
        let labels = vec![("opcode", op.name().to_string())];
        // The buckets' sum: the counter and the histogram agree even when
        // a request finished between the loads.
        count = count.with(labels.clone(), Value::Int(h.count()));
        duration = duration.with(labels, Value::Histogram(h));
    }
    out.push(count);
    out.push(duration);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_by_opcode_with_their_histogram() {
        let requests = Requests::default();
        drop(requests.start(Opcode::Read));
        let counts = ServerCounts {
            inodes: 2,
            ..Default::default()
        };
        let cache = telemetry::families(&wb_engine::Stats::default(), None);
        let text = render(cache, &counts, &requests);
        assert!(
            text.contains("\n# TYPE wb_fuse_requests_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("\nwb_fuse_requests_total{opcode=\"read\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("\nwb_fuse_requests_total{opcode=\"write\"} 0\n"),
            "{text}"
        );
        assert!(text.contains("\nwb_fuse_inodes 2\n"), "{text}");
        assert!(
            text.contains(
                "\nwb_fuse_request_duration_seconds_bucket{opcode=\"read\",le=\"+Inf\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("\nwb_fuse_request_duration_seconds_count{opcode=\"read\"} 1\n"),
            "{text}"
        );
    }
}
