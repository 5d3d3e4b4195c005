//! Asynchronous readahead (Linux's page_cache_async_ra, simplified); the
//! read path (read_path.rs) carries it out.
//!
//! - A read that misses reads its pages and, for a sequential reader, the
//!   rest of a `read_ahead_kb` window, and waits (read_path.rs,
//!   `readahead_pages`).
//! - Each sequential read (a task's read that starts where its last one
//!   ended, or at the start of the file) whose pages are all cached or
//!   being read, by a task whose readahead has read a window of the file
//!   (Linux reads ahead asynchronously only from a page its readahead
//!   marked: a reader of pages that were written, not read, such as a
//!   dbench client reading back its last write, never reads ahead), looks, before it is served, at what is cached or being
//!   read ahead of where it ends: once that is less than
//!   half a window (Linux's async_size), the next whole window is read
//!   from the first missing page, without waiting: the device reads ahead
//!   while the reader copies, so a steady reader does not wait for reads.
//!   Linux starts it when the reader reaches a marked page of the current
//!   window; looking at every sequential read costs one page-tree search
//!   and keeps the same distance. Before, not after: making room may
//!   reclaim clean pages, and a read is served only from the pages that
//!   are still there (a runtime copies them once the engine says done).
//! - The window is `read_ahead_kb`, or twice the reader's reads if larger.
//! - Bounded: at most one window ahead, in requests of at most
//!   `max_sectors_kb`; only pages that are free or clean and reclaimable
//!   now are used (no writeback is started and nobody waits for memory
//!   to read ahead), and nothing while the cache is over a lowered budget.

/// The readahead window for reads of `read_pages` pages: `read_ahead_kb`,
/// or twice the read if that is larger (Linux grows its window to the
/// reads it sees).
pub fn window_pages(read_ahead_kb: u32, read_pages: u64) -> u64 {
    (read_ahead_kb as u64 / 4).max(2 * read_pages)
}
