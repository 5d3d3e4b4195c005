//! Feature `tracing`: each wait the library imposes on a caller is a
//! `wb.stall` span with its reason, file and duration, seen here by a
//! minimal subscriber that keeps every span's fields.

mod common;

use common::pattern;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};
use writeback::OpenOptions;

/// A span's name and fields (values as text).
#[derive(Clone, Debug, Default)]
struct Seen {
    name: &'static str,
    fields: BTreeMap<&'static str, String>,
}

impl Visit for Seen {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.fields.insert(field.name(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.fields.insert(field.name(), value.to_string());
    }
}

/// Keeps every span it is told of, by id.
#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Seen>>>,
}

impl Collector {
    fn with_span<R>(&self, id: &Id, f: impl FnOnce(&mut Seen) -> R) -> Option<R> {
        let mut spans = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        let i = usize::try_from(id.into_u64() - 1).ok()?;
        spans.get_mut(i).map(f)
    }
}

impl Subscriber for Collector {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let mut seen = Seen {
            name: attrs.metadata().name(),
            ..Seen::default()
        };
        attrs.record(&mut seen);
        let mut spans = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        spans.push(seen);
        // Ids are 1-based positions (0 is not an id).
        Id::from_u64(spans.len() as u64)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        self.with_span(span, |seen| values.record(seen));
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn each_wait_is_a_span_with_its_reason_file_and_duration() {
    let Some(dir) = common::direct_test_dir("stall-spans") else {
        return;
    };
    let collector = Collector::default();
    let spans = collector.spans.clone();
    let cache = common::small_cache_without_background_writeback();
    let before = cache.stats().stall(writeback::StallReason::Sync).count;
    tracing::subscriber::with_default(collector, || {
        let file = cache
            .open(dir.join("f"), OpenOptions { create: true })
            .expect("open");
        file.write_at(&pattern(3, 2 << 20), 0).expect("write");
        file.sync_data().expect("sync");
    });
    let sync_waits = cache.stats().stall(writeback::StallReason::Sync).count - before;
    let spans = spans.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let stalls: Vec<&Seen> = spans.iter().filter(|s| s.name == "wb.stall").collect();
    let syncs: Vec<&&Seen> = stalls
        .iter()
        .filter(|s| s.fields.get("reason").map(String::as_str) == Some("sync"))
        .collect();
    assert!(sync_waits >= 1, "sync_data waited");
    assert_eq!(
        syncs.len() as u64,
        sync_waits,
        "one span a wait: {stalls:?}"
    );
    for s in syncs {
        // The fsync of a handle names its file (the engine's first id).
        let file: i64 = s.fields["file"].parse().expect("a file id");
        assert!(file >= 0, "{s:?}");
        let ns: u64 = s.fields["duration_ns"].parse().expect("a duration");
        assert!(ns > 0 && ns < 60_000_000_000, "{s:?}");
    }
    drop(cache);
    let _ = std::fs::remove_dir_all(&dir);
}
