//! Feature `tracing`: every wait the library imposes on a caller (an
//! engine `Stall`: dirty throttle, stable page, memory, read, sync, …) is
//! a `wb.stall` span at INFO level around the wait, on the caller's
//! thread, with fields `reason` (`StallReason::name`), `file` (the
//! engine's file id, `Engine::stall_file`; -1 for a cache-wide sync)
//! and `duration_ns` (recorded when the wait ends). A subscriber that
//! times spans sees the wait as the span's life; one that only reads
//! fields has the duration as a field. Without a subscriber, a span costs
//! one check of a global flag.

use std::time::Duration;
use wb_engine::{FileId, StallReason};

/// The span of a wait about to begin.
pub(crate) fn stall_span(reason: StallReason, file: Option<FileId>) -> tracing::Span {
    let file = file.map_or(-1, |f| f.index() as i64);
    tracing::info_span!(
        target: "writeback::stall",
        "wb.stall",
        reason = reason.name(),
        file,
        duration_ns = tracing::field::Empty
    )
}

/// The wait of `span` ended after `waited`.
pub(crate) fn stall_ended(span: &tracing::Span, waited: Duration) {
    span.record(
        "duration_ns",
        u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX),
    );
}
