//! The keeper: the writing side of the page map's protocol (mod.rs,
//! rules 1 to 5), applied from the engine's actions and from the three
//! things a runtime does that the engine does not see done (a copy-in, a
//! read's completion, a truncation's end), so every runtime keeps its map
//! the same way. Every method here runs under the engine's lock (but
//! `copied_in` for a deferred copy: rule 1).

use super::shard::Shards;
use super::PageMap;
use crate::action::{Action, IoDir, IoRequest};
use crate::engine::Engine;
use crate::ids::{FileId, PageIndex, PAGE_SIZE};

impl PageMap {
    /// Applies `action` to the map: pages that left the cache or moved to
    /// other frames leave it (rule 3); frames a write request carries or
    /// that are zeroed lose their bits (rule 5). Call for every action, in
    /// the order the engine emitted them, before carrying it out.
    pub fn on_action(&self, engine: &Engine, action: &Action) {
        match action {
            &Action::Unmapped { file, first, end } => self.unmap(file, first, end),
            &Action::CopyFrames {
                file, first, count, ..
            } => self.unmap(file, first, first + count as u64),
            &Action::ZeroFrames { first, count } => {
                for frame in first..first + count {
                    self.set_bit(frame, false);
                }
            }
            Action::Submit(req) if req.dir == IoDir::Write && !req.direct => {
                self.written_back(engine, req)
            }
            // Reads and direct writes carry no cached page's frame; a
            // copy-in's pages enter once it is done (`copied_in`).
            Action::Submit(_)
            | Action::CopyIn { .. }
            | Action::Wake(_)
            | Action::MakeDurable { .. }
            | Action::SetLength { .. }
            | Action::Evict { .. }
            | Action::Release { .. }
            | Action::StatFs { .. } => {}
        }
    }

    /// The runtime copied bytes `pos..pos + len` of `file` into frames
    /// `frame, frame + 1, ...` (an `Action::CopyIn`, or one page's piece of
    /// it): their pages enter the map, their frames overwritable (rules 2
    /// and 4).
    pub fn copied_in(&self, file: FileId, pos: u64, len: u64, frame: u32) {
        if len == 0 {
            return;
        }
        let (first, last) = (pos / PAGE_SIZE, (pos + len - 1) / PAGE_SIZE);
        for (i, page) in (first..=last).enumerate() {
            let frame = frame + i as u32;
            self.set_bit(frame, true);
            let old = self
                .shards
                .write(Shards::of(file, page))
                .insert((file.0, page), frame);
            // A page changes frames only through CopyFrames, which unmaps it.
            debug_assert!(old.is_none_or(|old| old == frame), "page {page} moved");
        }
    }

    /// A read through the engine of pages `first..end` of `file` is done
    /// (the engine returned `Step::Done` for it): those the engine holds
    /// valid enter the map at the frames it says (rule 2). Pages a writer
    /// is copying into (locked) enter with their copy-in.
    pub fn read_done(&self, engine: &Engine, file: FileId, first: PageIndex, end: PageIndex) {
        for run in engine.page_runs(file, first, end) {
            if !run.valid || run.locked {
                continue;
            }
            for (i, page) in (run.first..run.end).enumerate() {
                self.shards
                    .write(Shards::of(file, page))
                    .insert((file.0, page), run.frame + i as u32);
            }
        }
    }

    /// `file` was cut or grown to `len` bytes (the engine's `set_len` is
    /// done): a last page the length now ends inside loses its bit (rule
    /// 5: a write past the end must extend the file through the engine).
    /// Returns that page's frame and the offset in it where the file ends:
    /// the runtime zeroes the bytes from there (under the frame's write
    /// lock), so they read as zeros if the file grows again.
    pub fn truncated(&self, engine: &Engine, file: FileId, len: u64) -> Option<(u32, usize)> {
        let tail = (len % PAGE_SIZE) as usize;
        if tail == 0 {
            return None;
        }
        let page = len / PAGE_SIZE;
        let run = engine.page_runs(file, page, page + 1).next()?;
        self.set_bit(run.frame, false);
        Some((run.frame, tail))
    }

    /// Pages `first..end` of `file` leave the map; their frames lose their
    /// bits.
    fn unmap(&self, file: FileId, first: PageIndex, end: PageIndex) {
        for page in first..end {
            let removed = self
                .shards
                .write(Shards::of(file, page))
                .remove(&(file.0, page));
            if let Some(frame) = removed {
                self.set_bit(frame, false);
            }
        }
    }

    /// A write request is built from the frames of `req`'s pages: none of
    /// them may be written without the engine from now on.
    fn written_back(&self, engine: &Engine, req: &IoRequest) {
        let end = req.first_page + req.pages as u64;
        for run in engine.page_runs(req.file, req.first_page, end) {
            for frame in run.frame..run.frame + (run.end - run.first) as u32 {
                self.set_bit(frame, false);
            }
        }
    }
}
