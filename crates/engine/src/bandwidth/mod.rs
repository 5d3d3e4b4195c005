//! Write-bandwidth estimate per writeback context (Linux's
//! wb_update_write_bandwidth): updated every 200 ms from pages written,
//! averaged over a ~3 s period, with a second smoothing stage that only
//! follows the estimate when the raw value confirms the direction
//! (estimate.rs; `Wb::update_bandwidth` and the timers call it).

pub(crate) mod estimate;
