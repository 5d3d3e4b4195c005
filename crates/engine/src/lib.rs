//! `wb-engine`: a sans-I/O writeback engine.
//!
//! The engine holds a page cache's state and Linux's writeback policies —
//! IO-less dirty throttling with per-device shares, blk-wbt, the flusher,
//! fsync/sync — and never sleeps, reads a clock or does I/O. Runtimes pass
//! time in and carry decisions out (see [`Engine`]).

mod action;
mod balance_dirty;
mod bandwidth;
mod config;
mod dirty_limits;
mod dirty_throttle;
mod engine;
mod error;
mod evict;
mod flusher;
mod frame_notes;
mod ids;
mod invariants;
mod page_cache;
mod position_ratio;
mod proportions;
mod ratelimit;
mod read_path;
mod reclaim;
mod rq_depth;
mod stats;
mod sync;
pub mod time;
mod truncate;
pub mod units;
mod unmap_log;
mod wbt;
mod write_path;
mod writeback;

pub use action::{Action, IoDir, IoErrorKind, IoRequest, Stall, StallReason, Step};
pub use balance_dirty::MAX_PAUSE_NS;
pub use config::{Config, DeviceConfig, DirtyThrottle, KnobError, StableWrites};
pub use dirty_throttle::CONGESTION_WAIT_NS;
pub use engine::{Engine, EVENT_WAIT_MAX_NS};
pub use error::EngineError;
pub use flusher::WbReason;
pub use ids::{DeviceId, DomainId, FileId, HandleId, IoId, PageIndex, TaskId, WbId, PAGE_SIZE};
pub use stats::{DeviceStats, StallStats, Stats};
pub use time::Instant;
pub use wbt::{auto_target_ns, WbtClass};
