//! `wb-engine`: a sans-I/O writeback engine.
//!
//! The engine holds a page cache's state and Linux's writeback policies —
//! IO-less dirty throttling with per-device shares, blk-wbt, the flusher,
//! fsync/sync — and never sleeps, reads a clock or does I/O. Runtimes pass
//! time in and carry decisions out (see [`Engine`]).
//!
//! # One buffered write, step by step
//!
//! A write that is throttled, then written back, then synced passes these
//! stages, a file or directory each:
//!
//! 1. `Engine::write` (`write_path/`) starts the task's operation
//!    (`task/`, `Tasks::begin`) and walks the bytes in stretches of pages, each
//!    no longer than the pages the task may dirty before its next throttle
//!    check.
//! 2. `prepare_pages` (`write_path/`) makes a stretch cached and
//!    modifiable: uncached pages get room (`engine.rs`, `reserve`; the page cache's
//!    hand, `page_cache/hand.rs`, `make_room`, takes the inactive
//!    list first: `page_cache/lru.rs`) and frames (`page_cache/frame_space.rs`) and become one run
//!    (`page_cache/change.rs`, `insert`); a partly overwritten page that
//!    is on disk is read first (`read_path.rs`, `submit_read`; stall
//!    `read_io`). A page under writeback is modified in place, waited for
//!    (stall `stable_page`) or copied first (`page_cache/stable.rs`,
//!    `write_over`; `Action::CopyFrames`), as the device's `stable_writes` says.
//! 3. `dirty_pages` (`write_path/`) marks the stretch dirty: the page
//!    cache counts it cache-wide and for the file's writeback context
//!    (`page_cache/dirty.rs`, `PageCache::dirty_pages`; `PageCache::account`,
//!    the one place counts change), the context (`Wb::dirtied`) and the
//!    task count it too, and
//!    `PageCache::copy_in` emits `Action::CopyIn`: the runtime copies the caller's
//!    bytes into the stretch's frames before it acts on anything later. A
//!    write with `WriteFlags::deferred_copy` also locks the stretch's pages
//!    (`page_cache/page_lock.rs`): the runtime copies after releasing its own lock and
//!    calls `write_end` (`completion.rs`); meanwhile the pages are not written back, read or
//!    truncated away.
//!    Before the first stretch the write checks the room on the backing
//!    filesystem (`write_path/`, `write_space`; the rule: `space/`).
//! 4. `maybe_throttle` (`write_path/`; the math: `balance_dirty/`): past the task's
//!    `nr_dirtied_pause` (`throttle_check_point`), `balance_dirty_pages` compares the context's dirty
//!    pages with its share of the limits (`dirty_limits.rs`, `WbDomain::dtc`,
//!    `position_ratio.rs`, `ratelimit.rs`), kicks background writeback over
//!    the background threshold (`dispatch/`, `kick_background`) and returns
//!    `Step::Sleep` with reason `dirty_throttle` and a bound (`task/`,
//!    `stall`). The runtime sleeps and calls `resume` (`task/`), which
//!    counts the stall and goes back to step 2.
//! 5. The flusher writes (`dispatch/`, `pump`): `flusher_pick`
//!    (`dispatch/`; the works: `flusher/`) takes the context's next work — queued, periodic or
//!    background; wbt admits a write of its class (`wbt.rs`, `may_issue`;
//!    at depth 1, slow commits pace background writes: `wbt_pace.rs`);
//!    `flusher_build` (`dispatch/`, `Wb::next_file`) picks the oldest dirtied file and a
//!    chunk of it (past the backing file's end, from its lowest dirty
//!    page: `backing_len/`); `start_writeback` (`page_cache/writeback.rs`) moves the pages to
//!    writeback, bounds the request's bytes by the file's length, and
//!    `issue` takes a request tag and emits `Action::Submit`.
//! 6. The runtime performs the write and calls `io_complete`
//!    (`completion.rs`): the tag is freed, wbt counts the completion (and
//!    a paced write sets when the next may go), the
//!    pages come clean and join the reclaim queue (`page_cache/hand.rs`,
//!    `update_and_queue`), the context's bandwidth and share of completions
//!    are credited (`bandwidth/`, `proportions.rs`), waiting tasks get
//!    `Action::Wake`, and the device is pumped again (step 5).
//! 7. `Engine::fsync` (`sync/`) tags the file's dirty ranges, writes them
//!    as integrity writes ahead of the flusher's (`pump_syncs`), sets a
//!    barrier once all are issued and waits (reason `sync`) for every write
//!    up to it. The writes that landed marked the file unsynced
//!    (`durability/`): the sync emits `Action::MakeDurable`, the runtime
//!    flushes the backing file and reports with `durable_done`, and the
//!    sync returns a write-back error this handle has not seen (errseq) or
//!    a failed flush.
//!
//! An uncached write (`WriteFlags::DONTCACHE`, `dontcache/`; the waits:
//! `write_path/`) takes the
//! same steps, with three differences: the pages it brings in are marked
//! drop-behind (step 2); when it returns it kicks its context's flusher
//! (a coalescing bit; or, with `dontcache_flush = inline`, submits its own
//! range) and waits for completions once its uncached pages reach 50 ms of
//! device writes (step 4); and in step 6 its pages leave the cache as soon
//! as they are clean. A direct write (`Engine::write_direct`, `dispatch/`;
//! its requests and phases: `direct/`) skips the cache: it writes back and drops what the cache held of its
//! range, then goes to the device and waits.
//!
//! Later, an idle file (no handle, nothing dirty or in flight) may be let
//! go when the cache holds too many files, least recently used first,
//! flushed first if unsynced (`engine.rs`; the rules: `evict/`;
//! `Action::Evict`). A file whose
//! last name is gone (`Engine::unlink`, `backlog/`) leaves through its
//! device's backlog instead: the unlink returns once the file is queued
//! (or, when the backlog is full, after a bounded wait, stall `backlog`),
//! and a worker drops its pages and releases its backing file in steps
//! (`Action::Release`, `release_done`).
//!
//! The budget all this works within is the `memory` knob, or, for a
//! runtime that follows memory pressure, what the policy
//! (`memory_pressure/`) makes of the samples of memory the runtime
//! passes (`Engine::note_memory_sample`, `memory_budget/`): a lowered
//! budget drops clean pages at once, oldest first, and has dirty ones
//! written back (reason vmscan) and dropped as they come clean
//! (`completion.rs`, `set_budget_pages`; `engine.rs`, `trim_to_budget`).
//!
//! Throughout, `handle_timeout` (`completion.rs`, `timers/`) runs the clocks: bandwidth
//! estimates, proportion periods, the flusher's periodic wake-up, wbt's
//! windows. `check_invariants` (`control.rs`) checks the state after
//! any step.
//!
//! A runtime with virtual time (the simulator, the engine's tests) drives
//! all this through [`VirtualRuntime`] (`drive.rs`): carry out the actions
//! in order, jump to the next completion or timer, complete, fire timers.
//!
//! # Layout
//!
//! State has owners, each a type with a small API beside it: the page
//! cache (`page_cache/`: files, runs, frames, both lists, shadows, page
//! locks, the budget and every page count), tasks and what they wait for
//! (`task/`), handles (`handle.rs`), durability marks (`durability/`),
//! writeback contexts (`wb/state.rs`), devices (`device/state.rs`),
//! requests in flight (`dispatch/inflight.rs`), free space
//! (`space/`), the file limit (`evict/`), the memory budget
//! (`memory_budget/`), the clocks (`timers/`), ... `Engine` (`engine.rs`)
//! holds the owners; `impl Engine` is left to eight files that carry a
//! path across several of them: `engine.rs` (registration, handles,
//! letting files go, room for pages), `write_path/` (with every wait a
//! writer meets), `read_path.rs`, `dispatch/` (the flusher, its kicks,
//! dispatch, direct writes), `completion.rs` (the runtime's reports, time
//! included), `sync/`, `backlog/` (with unlink, truncation and
//! invalidation) and `control.rs` (knobs, counters, invariants, queries). Owners import only each other, the
//! vocabulary (`action.rs`, `ids.rs`, `time.rs`, `config/`) and pure
//! policies (`wbt.rs`, `proportions.rs`, `memory_pressure/`, ...), never a
//! file that implements `Engine`: no module imports itself through others.
//!
//! One part is a runtime's, kept here so both runtimes share it: the page
//! map (`page_map/`), which a runtime's fast paths (cache hits, overwrites
//! of dirty pages) read without the engine's lock. Its protocol is
//! written there; its keeper applies it from the actions, using only the
//! engine's public queries, as a runtime would; the simulator's VOPR
//! checks it against the engine.

mod action;
mod backing_len;
mod backlog;
mod balance_dirty;
mod bandwidth;
mod completion;
mod config;
mod control;
mod device;
mod direct;
mod dirty_limits;
mod dirty_throttle_2007;
mod dispatch;
mod dontcache;
mod drive;
mod durability;
mod engine;
mod error;
mod evict;
mod flusher;
mod handle;
mod ids;
mod memory_budget;
mod memory_pressure;
mod page_cache;
pub mod page_map;
mod position_ratio;
mod proportions;
mod ratelimit;
mod read_path;
mod readahead;
mod rq_depth;
mod space;
mod stats;
mod sync;
mod task;
pub mod time;
mod timers;
pub mod units;
mod wb;
mod wbt;
mod wbt_auto_target;
mod wbt_pace;
mod wbt_slice;
mod wbt_window;
mod wbt_write_cap;
mod write_latency;
mod write_path;

pub use action::{
    Action, IoDir, IoErrorKind, IoRequest, ReleaseStep, Stall, StallReason, Step, ThrottleDetail,
    WbReason, WbtClass, EVENT_WAIT_MAX_NS, MAX_PAUSE_NS,
};
pub use backlog::{BacklogStats, FLUSH_ALL_MAX_ITEMS, RELEASE_STEP_BYTES};
pub use config::{
    BacklogThrottle, Config, DeviceConfig, DirtyThrottle, DontcacheCounter, DontcacheFlush,
    ExtendingWrites, KnobError, Lru, StableWrites, DEFAULT_MEMORY_MIN_BYTES, MAX_MEMORY_BYTES,
    MIN_MEMORY_BYTES,
};
pub use dirty_throttle_2007::{ratelimit_pages_2007, CONGESTION_WAIT_NS};
pub use dontcache::stats::DontcacheStats;
pub use dontcache::written_rate::WRITTEN_RATE_SLOT_NS;
pub use drive::{NextEvent, VirtualRuntime};
pub use engine::Engine;
pub use error::EngineError;
pub use ids::{DeviceId, DomainId, FileId, HandleId, IoId, PageIndex, TaskId, WbId, PAGE_SIZE};
pub use memory_budget::start::{
    limit_cap_bytes, start_budget, StartBudget, StartSource, LIMIT_HEADROOM_MIN_BYTES,
    LIMIT_SHARE_PERCENT, MEM_AVAILABLE_SHARE_PERCENT, START_BUDGET_MIN_BYTES,
};
pub use memory_budget::stats::{BudgetReason, MemoryBudgetStats};
pub use memory_pressure::sample::{
    CgroupMemory, LimitFile, MemorySample, PressureView, PsiTotals, MAX_CGROUP_LEVELS,
};
pub use memory_pressure::{
    reserve_bytes, BudgetChange, CacheMemory, MemoryPressure, DEMAND_MIN_RESERVE_DIVISOR,
    GROW_HOLD_NS, GROW_PERMILLE_PER_S, PRESSURE_SHRINK_PERCENT, PSI_CALM_PERMILLE,
    PSI_FULL_SHRINK_PERMILLE, PSI_SOME_SHRINK_PERMILLE, RESERVE_MIN_BYTES, RESERVE_PERCENT,
};
pub use page_cache::PageRun;
pub use page_map::{Overwritable, PageMap};
pub use stats::counters::{
    DeviceGauges, DeviceStats, DomainStats, Gauges, StallStats, Stats, STALL_BUCKETS,
};
pub use time::Instant;
pub use wbt::{auto_target_ns, COMMIT_WRITE_MAX_PAGES};
pub use wbt_pace::MAX_PACE_STEP;
pub use write_path::flags::WriteFlags;
