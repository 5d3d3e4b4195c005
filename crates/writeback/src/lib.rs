//! `writeback`: buffered file I/O whose background work never wrecks the
//! latency of foreground work.
//!
//! A [`Cache`] keeps file data in a memory budget of its own and writes it
//! back with Linux's policies (IO-less dirty throttling with per-device
//! shares, blk-wbt, the flusher, fsync/sync), run by the sans-I/O engine
//! `wb-engine` on real threads. Backing files are opened with O_DIRECT, so
//! the engine, not the kernel's page cache, decides what is cached and
//! when it is written.
//!
//! ```
//! use writeback::{Cache, OpenOptions};
//! # let dir = std::env::temp_dir().join(format!("wb-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! # if !writeback::io::supports_direct(&dir) { wb_testkit::skip("no O_DIRECT in the temp dir"); return Ok(()); }
//! let cache = Cache::builder().knob("memory", "64MiB")?.calibrate(false).build()?;
//! let file = cache.open(dir.join("data"), OpenOptions { create: true })?;
//! file.write_at(b"hello, writeback", 0)?;
//! let mut buf = [0u8; 5];
//! assert_eq!(file.read_at(&mut buf, 0)?, 5);
//! assert_eq!(&buf, b"hello");
//! file.sync_data()?; // durable now
//! # drop(file); drop(cache); std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod cache;
mod error;
mod fallocate;
mod file;
pub mod io;
mod runtime;
pub mod telemetry;

pub use cache::{
    Cache, CacheBuilder, Domain, OpenOptions, Writeout, CALIBRATION_BUDGET,
    UNCALIBRATED_READ_LATENCY_NS,
};
pub use error::Error;
pub use file::File;
pub use runtime::caller::{as_caller, MAX_CALLER_TASKS};
pub use runtime::memory_sample::sample_memory;
pub use wb_engine::{DomainStats, IoErrorKind, StallReason, Stats, WriteFlags};
pub use wb_trace::Trace;
