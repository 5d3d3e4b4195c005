//! The page map: the frame of each cached page whose data a runtime may
//! copy without the engine, and, per frame, whether a write may go into
//! it without the engine (its overwritable bit). The fast paths read it —
//! a cache hit, an overwrite of a dirty page — so they never take the
//! engine's lock: the engine's lock is one for every thread, while the
//! map is split into shards (shard.rs) that threads touching different
//! pages rarely share, and the bits are atomics.
//!
//! The frames' bytes are the runtime's (the engine has none), and so are
//! the frame locks that guard them: the map holds frame numbers, and its
//! lookup runs the runtime's frame-lock step while the page's shard is
//! held (`with_frame`). The keeper (keeper.rs) applies the writing side
//! of the protocol from the engine's actions, so no runtime re-implements
//! it; both runtimes keep a map with it, and the simulator's VOPR checks
//! the map against the engine (check.rs).
//!
//! # Protocol
//!
//! 1. Writers. Only the keeper changes the map or the bits, under the
//!    engine's lock, following the engine's actions in the order it
//!    emitted them: `on_action` for each, before the runtime carries it
//!    out. One exception: a deferred copy-in (`WriteFlags::deferred_copy`)
//!    calls `copied_in` after the runtime released its lock; its pages are
//!    locked in the engine (PG_LOCKED) until `Engine::write_end`, so no
//!    action concerns them meanwhile.
//! 2. A page enters once its frame holds its data: the runtime copied a
//!    write's bytes in (`copied_in`), or a read of it through the engine
//!    completed (`read_done`, which maps only the pages the engine holds
//!    valid, at the frames it says). A clean page is mapped only after a
//!    read of it completed: the map may lack cached pages (read ahead, or
//!    moved, rule 3), never holds one the engine does not.
//! 3. A page leaves when the engine drops it (`Action::Unmapped`) or moves
//!    it to another frame (`Action::CopyFrames`, stable pages: its
//!    copy-in maps it again, at the new frame), before the runtime acts
//!    on any later action, so before its old frame can be reused.
//! 4. A frame's bit is set when a write's bytes were copied into it
//!    (`copied_in`): its page is dirty, and no write request has taken it
//!    since.
//! 5. It is cleared when a write request is built from the frame
//!    (`Action::Submit` of a write: every frame of the request; a
//!    write-back the engine holds back, `extending_writes = one-per-file`,
//!    has its pages under writeback before it is handed over, and an
//!    overwrite meanwhile goes with it, as the runtime reads the frames
//!    only then), when the
//!    frame is zeroed for a new page (`Action::ZeroFrames`), when its page
//!    leaves (rule 3), and when a truncation leaves its page partial
//!    (`truncated`: a write past the new end must extend the file through
//!    the engine). A set bit is always on the frame of a mapped page that
//!    the engine holds dirty, or whose write-back it holds back.
//! 6. Lock order: the engine's lock, then a shard, then a frame lock (the
//!    runtime's). The keeper takes shards only, for writing, one at a
//!    time, and no frame lock; the runtime takes the frame locks an
//!    action needs after the keeper's call for that action.
//! 7. A lock-free reader looks the page up with `with_frame`, taking the
//!    frame's read lock in the step it passes, and copies holding it (the
//!    shard may go): the page cannot leave before the reader holds the
//!    frame (rule 3 takes the shard for writing), and the frame cannot be
//!    reused under it, since every reuse first writes the frame whole
//!    under its write lock (zeroing, a read's fill, a copy of frames, a
//!    whole page copied in).
//! 8. A lock-free overwriter looks the page up with `with_frame`, taking
//!    the frame's write lock in its step, then reads the bit holding that
//!    lock, and copies only if it is set, before letting the lock go. It
//!    never writes past the file's length. The runtime reads a write
//!    request's frames (to copy or lend them) only after the keeper
//!    cleared their bits (rule 5) and after taking each frame's lock: an
//!    overwriter that saw the bit set holds the lock and finishes first,
//!    so the request carries its bytes; one that takes the lock later sees
//!    the bit clear and goes through the engine, which dirties the page
//!    again. An overwriter that saw the bit just before its page left
//!    (rule 3) writes into a frame whose next use rewrites it whole
//!    (rule 7): as if it came before the page left.

mod check;
mod keeper;
mod shard;

use crate::ids::{FileId, PageIndex};
use shard::{Shards, SHARDS};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Cached pages by (file, page), and one overwritable bit per frame.
pub struct PageMap {
    shards: Shards,
    /// By frame: see `Overwritable`.
    bits: Vec<Overwritable>,
    /// How many bits are set: changed with them, by the keeper alone, so
    /// a check need not count the frames.
    bits_set: AtomicUsize,
    /// The check's table of the engine's pages by frame (check.rs), kept
    /// between checks.
    check_table: Mutex<check::FrameTable>,
}

/// A frame's overwritable bit (rules 4, 5): its page is dirty and no
/// write request has taken it since, so bytes written into the frame now
/// will be written back without telling the engine. Read it holding the
/// frame's write lock (rule 8); only the keeper sets or clears it.
#[derive(Debug, Default)]
pub struct Overwritable(AtomicBool);

impl Overwritable {
    /// Whether the frame may be written without the engine.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    fn set(&self, on: bool) {
        self.0.store(on, Ordering::Release);
    }
}

impl PageMap {
    /// An empty map for a cache of `frames` frames (`Engine::frame_pages`).
    pub fn new(frames: u64) -> PageMap {
        let frames = usize::try_from(frames).expect("frames fit in memory");
        PageMap {
            shards: Shards::new(),
            bits: (0..frames).map(|_| Overwritable::default()).collect(),
            bits_set: AtomicUsize::new(0),
            check_table: Mutex::new(check::FrameTable::default()),
        }
    }

    /// Runs `step` with the frame of `page` of `file` and its overwritable
    /// bit, holding the page's shard for reading, if the page is mapped;
    /// what `step` returns. `step` takes the frame's lock (rules 7 and 8)
    /// and nothing else; the frame stays the page's while that lock is
    /// held, after the shard is let go.
    pub fn with_frame<'a, R>(
        &'a self,
        file: FileId,
        page: PageIndex,
        step: impl FnOnce(u32, &'a Overwritable) -> R,
    ) -> Option<R> {
        let shard = self.shards.read(Shards::of(file, page));
        let &frame = shard.get(&(file.0, page))?;
        // Held across the step: see rule 7.
        let out = step(frame, self.bit(frame));
        drop(shard);
        Some(out)
    }

    /// The frame the map holds for `page` of `file` (a snapshot: without
    /// the engine's lock it may be stale by the time it returns).
    pub fn frame(&self, file: FileId, page: PageIndex) -> Option<u32> {
        let shard = self.shards.read(Shards::of(file, page));
        shard.get(&(file.0, page)).copied()
    }

    /// Whether `frame`'s overwritable bit is set.
    pub fn overwritable(&self, frame: u32) -> bool {
        self.bit(frame).get()
    }

    /// Every mapped page as (file, page, frame), in order (for checks and
    /// tests: it takes every shard in turn).
    pub fn pages(&self) -> Vec<(FileId, PageIndex, u32)> {
        let mut pages = Vec::new();
        for i in 0..SHARDS {
            let shard = self.shards.read(i);
            pages.extend(shard.iter().map(|(&(f, p), &frame)| (FileId(f), p, frame)));
        }
        pages.sort_unstable();
        pages
    }

    /// Number of mapped pages.
    pub fn len(&self) -> usize {
        (0..SHARDS).map(|i| self.shards.read(i).len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sets or clears `frame`'s bit, counting set bits (the keeper's, under
    /// the engine's lock: one writer, so a load and a store suffice).
    fn set_bit(&self, frame: u32, on: bool) {
        let bit = self.bit(frame);
        if bit.get() != on {
            bit.set(on);
            match on {
                true => self.bits_set.fetch_add(1, Ordering::Relaxed),
                false => self.bits_set.fetch_sub(1, Ordering::Relaxed),
            };
        }
    }

    fn bit(&self, frame: u32) -> &Overwritable {
        let bit = self.bits.get(frame as usize);
        bit.unwrap_or_else(|| panic!("frame {frame} beyond the cache's {}", self.bits.len()))
    }
}

#[cfg(test)]
mod tests;
