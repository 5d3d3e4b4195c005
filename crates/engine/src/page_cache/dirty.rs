//! A write's side of the cache: the pages it dirties, counted once
//! (`dirty_pages`), and the copies of the caller's bytes into their
//! frames (`copy_in`). The write path (write_path/) calls them per
//! stretch of pages, after making the stretch cached.

use super::{PageCache, PageFlags, PG_DIRTY, PG_DROPBEHIND, PG_REFERENCED};
use crate::action::Action;
use crate::config::Lru;
use crate::ids::{FileId, PageIndex, TaskId, PAGE_SIZE};
use crate::time::Instant;
use std::collections::VecDeque;

/// What dirtying a stretch of pages changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dirtied {
    /// Pages that were not dirty and are now.
    pub newly: u64,
    /// The file had no dirty page before: it was first dirtied now.
    pub file_was_clean: bool,
    /// The file's writeback context had pages dirty or under writeback
    /// before (its bandwidth estimate restarts when it had none).
    pub had_io: bool,
}

impl PageCache {
    /// The marks a write sets on its pages and those it takes off:
    /// dirty, and under CLOCK referenced (a write is not an access with
    /// two lists, lru.rs; under CLOCK it gives the page its second
    /// chance). An ordinary write takes the drop-behind mark off; an
    /// uncached one leaves it.
    #[inline]
    pub fn write_marks(&self, dontcache: bool) -> (PageFlags, PageFlags) {
        let used = match self.lru {
            Lru::Clock => PG_REFERENCED,
            Lru::ActiveInactive => 0,
        };
        let clear = if dontcache { 0 } else { PG_DROPBEHIND };
        (PG_DIRTY | used, clear)
    }

    /// Marks cached pages `first..end` of `file` with a write's marks
    /// (`write_marks`) and accounts those that were not dirty; a file
    /// dirtied for the first time is dirtied `now`.
    pub fn dirty_pages(
        &mut self,
        now: Instant,
        file: FileId,
        (first, end): (PageIndex, PageIndex),
        (set, clear): (PageFlags, PageFlags),
    ) -> Dirtied {
        let f = &mut self.files[file.index()];
        let before = f.counts();
        let had_io = self.wb_pages[f.wb.index()].has_io();
        f.update(first, end, |fl| (fl | set) & !clear);
        self.account(file, before);
        let f = &mut self.files[file.index()];
        let newly = f.counts().dirty - before.dirty;
        let file_was_clean = newly > 0 && f.dirtied_when.is_none();
        if file_was_clean {
            f.dirtied_when = Some(now);
        }
        Dirtied {
            newly,
            file_was_clean,
            had_io,
        }
    }

    /// Asks the runtime to copy `task`'s bytes `from..to` (file offsets)
    /// of `file` into the frames of their pages, one action per run.
    pub fn copy_in(
        &self,
        task: TaskId,
        file: FileId,
        (from, to): (u64, u64),
        out: &mut VecDeque<Action>,
    ) {
        let mut pos = from;
        while pos < to {
            let page = pos / PAGE_SIZE;
            let (start, run) = self.files[file.index()]
                .run_at(page)
                .expect("pages to copy into are cached");
            let len = ((start + run.len) * PAGE_SIZE).min(to) - pos;
            out.push_back(Action::CopyIn {
                task,
                file,
                pos,
                len,
                frame: run.frame + (page - start) as u32,
            });
            pos += len;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::WbId;

    #[test]
    fn pages_are_counted_dirty_once_and_copied_into_per_run() {
        let (mut cache, file) = super::super::one_file_cache();
        let mut out = VecDeque::new();
        cache.insert_pages(file, 0, 4, 0, true, &mut out);
        let marks = cache.write_marks(false);
        assert_eq!(marks, (PG_DIRTY | PG_REFERENCED, PG_DROPBEHIND));
        let now = Instant(5);
        let first = cache.dirty_pages(now, file, (0, 2), marks);
        let want = Dirtied {
            newly: 2,
            file_was_clean: true,
            had_io: false,
        };
        assert_eq!(first, want);
        // Two of the four were dirty: two more, the file and its context
        // dirty already.
        let again = cache.dirty_pages(Instant(9), file, (0, 4), marks);
        let want = Dirtied {
            newly: 2,
            file_was_clean: false,
            had_io: true,
        };
        assert_eq!(again, want);
        assert_eq!(cache.files[0].dirtied_when, Some(now));
        assert_eq!((cache.nr_dirty, cache.wb(WbId(0)).dirty), (4, 4));
        // Bytes 100..5000 span pages 0 and 1 of one run: one copy.
        out.clear();
        cache.copy_in(TaskId(3), file, (100, 5000), &mut out);
        assert_eq!(out.len(), 1);
        assert!(matches!(
            out[0],
            Action::CopyIn {
                pos: 100,
                len: 4900,
                ..
            }
        ));
    }
}
