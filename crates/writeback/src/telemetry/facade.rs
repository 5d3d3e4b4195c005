//! Feature `metrics`: the cache's families through the `metrics` facade,
//! to whatever recorder the program installed (none: every call is a
//! no-op). See the design in telemetry/mod.rs.
//!
//! - Counters and gauges: [`publish`] sets them from one snapshot, with
//!   the names and labels of the text format (`Counter::absolute`,
//!   `Gauge::set`). The runtime's timer thread calls it every
//!   [`PUBLISH_EVERY`], outside the cache's lock; `Cache::publish_metrics`
//!   calls it at once. A counter in seconds (its value not an integer) is
//!   left out: the facade's counters count.
//! - The pause histogram: [`record_pause`] where a caller's wait ends.

use super::{Family, Kind, Value};
use std::sync::Once;
use std::time::Duration;
use wb_engine::StallReason;

/// How often the timer thread publishes a snapshot: as fresh as a scrape
/// every second, and one `Engine::stats` a second is nothing beside the
/// engine's own work.
pub const PUBLISH_EVERY: Duration = Duration::from_secs(1);

/// Name of the facade's pause histogram (the text's is the same).
pub const PAUSE_HISTOGRAM: &str = "wb_pause_duration_seconds";

/// Sets every counter and gauge of `families` in the installed recorder.
pub(crate) fn publish(families: &[Family]) {
    describe(families);
    for f in families {
        for s in &f.series {
            let labels: Vec<metrics::Label> = s
                .labels
                .iter()
                .map(|(k, v)| metrics::Label::new(*k, v.clone()))
                .collect();
            match (f.kind, &s.value) {
                (Kind::Counter, Value::Int(v)) => metrics::counter!(f.name, labels).absolute(*v),
                (Kind::Gauge, v) => {
                    if let Some(v) = v.as_f64() {
                        metrics::gauge!(f.name, labels).set(v);
                    }
                }
                // Counters in seconds, and histograms (recorded as they
                // happen, `record_pause`).
                _ => {}
            }
        }
    }
}

/// Describes each family once per process (a recorder installed later
/// misses the descriptions, not the values).
fn describe(families: &[Family]) {
    static DESCRIBED: Once = Once::new();
    DESCRIBED.call_once(|| {
        for f in families {
            match f.kind {
                Kind::Counter => metrics::describe_counter!(f.name, f.help),
                Kind::Gauge => metrics::describe_gauge!(f.name, f.help),
                Kind::Histogram => metrics::describe_histogram!(f.name, f.help),
            }
        }
    });
}

/// A caller's wait of `waited` for `reason` ended.
pub(crate) fn record_pause(reason: StallReason, waited: Duration) {
    metrics::histogram!(PAUSE_HISTOGRAM, "reason" => reason.name()).record(waited.as_secs_f64());
}
