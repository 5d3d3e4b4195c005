//! Asynchronous readahead (Linux's page_cache_async_ra, simplified).
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

use crate::engine::Engine;
use crate::ids::{FileId, PageIndex, TaskId, PAGE_SIZE};
use crate::page_cache::PG_READING;
use crate::time::Instant;

impl Engine {
    /// Whether a read of `first..` by `task` is sequential: it starts at
    /// the beginning of the file or where the task's last read ended.
    pub(crate) fn sequential_read(&self, task: TaskId, file: FileId, first: PageIndex) -> bool {
        first == 0 || self.tasks[task.index()].last_read == Some((file, first))
    }

    /// Before a read of `len` bytes at `offset`: when it is sequential,
    /// its pages are all cached or being read and the task's readahead
    /// has read a window of this file (`Task::ra_file`, where Linux would
    /// find its PG_readahead mark), reads ahead of it
    /// (`readahead_async`). A read with pages missing reads ahead
    /// synchronously instead (read_path.rs).
    pub(crate) fn readahead_before_read(
        &mut self,
        now: Instant,
        task: TaskId,
        file: FileId,
        offset: u64,
        len: u64,
    ) {
        let f = &self.cache.files[file.index()];
        let end = (offset + len).min(f.size);
        if offset >= end {
            return;
        }
        let (first, last) = (offset / PAGE_SIZE, end.div_ceil(PAGE_SIZE));
        if self.tasks[task.index()].ra_file == Some(file)
            && self.sequential_read(task, file, first)
            && f.first_hole(first, last).is_none()
        {
            self.readahead_async(now, file, first, last);
        }
    }

    /// For a sequential read of `first..last`: when less than half a
    /// window ahead of it is cached or being read, start reading the next
    /// window from the first missing page. The window is `read_ahead_kb`,
    /// or twice the read if that is larger (Linux grows its window to the
    /// reads it sees).
    pub(crate) fn readahead_async(
        &mut self,
        now: Instant,
        file: FileId,
        first: PageIndex,
        last: PageIndex,
    ) {
        if self.cache.over_budget {
            return;
        }
        let f = &self.cache.files[file.index()];
        let dev = &self.devices[f.device.index()].config;
        let window = (dev.read_ahead_kb as u64 / 4).max(2 * (last - first));
        let max_request = dev.max_request_pages();
        let file_pages = f.size.div_ceil(PAGE_SIZE);
        let Some(hole) = f.first_hole(last, (last + window).min(file_pages)) else {
            return;
        };
        if hole - last >= window / 2 {
            return;
        }
        let end = (hole + window).min(file_pages);
        let mut p = hole;
        while p < end {
            let f = &self.cache.files[file.index()];
            let Some(hole) = f.first_hole(p, end) else {
                return;
            };
            let want = (end - hole).min(max_request);
            let free = self.cache.free_pages();
            if free < want {
                self.cache.shrink(want - free, &mut self.actions);
            }
            let room = self.cache.free_pages().min(want);
            let pages = self.cache.files[file.index()].hole_len(hole, room);
            if pages == 0 {
                return;
            }
            self.cache
                .insert_pages(file, hole, pages, PG_READING, false, &mut self.actions);
            self.submit_read(now, file, hole, pages);
            self.stats.readahead_async_pages += pages;
            p = hole + pages;
        }
    }
}
