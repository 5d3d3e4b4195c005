//! Direct writes (O_DIRECT semantics): the data goes to the device without
//! the cache, as a baseline for buffered and uncached writes.
//!
//! 1. Cached pages of the range are written back and waited for, then
//!    dropped (Linux's filemap_write_and_wait_range and
//!    invalidate_inode_pages2_range), so the cache never holds stale data.
//! 2. The range goes to the device in requests of at most max_sectors_kb,
//!    each needing only a tag: O_DIRECT writes are REQ_SYNC | REQ_IDLE,
//!    which wbt does not throttle, and no dirty accounting applies.
//! 3. The writer waits (stall `direct_io`) until all of them complete; the
//!    file grows to the end of the write.
//!
//! Only the simulator issues these: the real runtime takes its data from
//! the cache's frames, and a direct request has none (it fails such a
//! request instead of writing anything).
//!
//! The engine's side is in truncate.rs (step 1 is Linux's mm/truncate.c)
//! and completion.rs; this file holds the write's phases (phase.rs).

pub(crate) mod phase;
