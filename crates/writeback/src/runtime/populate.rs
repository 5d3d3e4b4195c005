//! Memory ahead of the cache's use.
//!
//! The frames are an anonymous mapping (frames.rs) whose pages the kernel
//! provides on first touch, zeroed, a huge page at a time (MADV_HUGEPAGE).
//! On a virtual machine whose host backs guest memory only when first
//! used, that costs ~2.5–5 ms per 2 MiB here (`perf`: `clear_page_erms`
//! under `do_huge_pmd_anonymous_page`), paid by whichever caller first
//! touches a frame there: on a fresh mount, random 4 KiB read misses
//! took a new huge page every 512 reads, ~10 µs a read on average.
//!
//! The engine hands out frames first fit, so a cache grows from the
//! start of the arena upward (`Engine::frames_used_end`). A thread of its
//! own keeps the frames up to `POPULATE_AHEAD_PAGES` beyond the highest
//! in use populated (`Frames::populate`), a huge page at a time, so that
//! work runs beside the callers, on a CPU they leave idle (a reader
//! waiting for its I/O, a writer paused by the dirty limits), instead of
//! in their way.
//!
//! Bounds: it never populates beyond the budget, and never while the
//! budget is below the frames (the runtime is then giving memory back,
//! `Core::give_back_memory`; the two exclude each other through
//! `Frames::populating`); memory resident ahead of use is at most
//! `POPULATE_AHEAD_PAGES`, work done ahead and never used at most that
//! once. It looks every `POPULATE_POLL`, holding the engine's lock only to
//! read two numbers. An error (a kernel before 5.14: EINVAL; memory
//! refused: ENOMEM) ends the thread; nothing else depends on it.
//!
//! Why the normal priority, not SCHED_IDLE: populating holds the
//! process's mmap lock for reading for a step (a huge page, ~2.5–5 ms
//! here), and any thread mapping memory meanwhile (malloc growing an
//! arena) waits for it; an idle-priority thread preempted in the step on
//! busy CPUs would make that wait as long as the CPUs stay busy. Measured
//! both ways (BENCHMARKS.md), neither was faster.

use super::shared::Shared;
use std::sync::atomic::Ordering;
use std::time::Duration;
use wb_engine::PAGE_SIZE;

/// Populated ahead of the highest frame in use: 32 MiB (16 huge pages),
/// a third of a second of 4 KiB read misses at ~25,000 a second.
pub(crate) const POPULATE_AHEAD_PAGES: u64 = (32 << 20) / PAGE_SIZE;
/// Populated per step: a huge page (the frames' alignment), the unit the
/// kernel backs them in.
pub(crate) const POPULATE_STEP_PAGES: u64 = super::frames::FRAMES_ALIGN as u64 / PAGE_SIZE;
/// How often the thread looks at the cache's use.
pub(crate) const POPULATE_POLL: Duration = Duration::from_millis(5);

/// The populating thread's loop; ends when the cache closes.
pub(crate) fn populate_loop(shared: &Shared) {
    let mut populated = 0u64;
    while !shared.closed.load(Ordering::Acquire) {
        match populate_step(shared, &mut populated) {
            Ok(true) => {}
            Ok(false) => std::thread::sleep(POPULATE_POLL),
            Err(e) => {
                // Said once: the cache goes on, its callers back the
                // frames themselves as before.
                eprintln!("writeback: backing the cache's memory ahead of use stopped: {e}");
                return;
            }
        }
    }
}

/// Populates the next huge page ahead of use if one is due; returns
/// whether it did. `populated`: frames below it are populated or in use.
fn populate_step(shared: &Shared, populated: &mut u64) -> std::io::Result<bool> {
    let done = populate_next(shared, populated);
    shared.populated_pages.store(*populated, Ordering::Release);
    done
}

/// `populate_step`'s work.
fn populate_next(shared: &Shared, populated: &mut u64) -> std::io::Result<bool> {
    let core = shared.lock();
    let engine = &core.engine;
    if engine.memory_pages() < engine.frame_pages() {
        // Memory is being given back, what was populated among it: once
        // the budget is whole again, populate from the frames in use.
        *populated = 0;
        return Ok(false);
    }
    let used_end = engine.frames_used_end();
    let target = (used_end + POPULATE_AHEAD_PAGES).min(engine.memory_pages());
    // Frames in use are backed already, and so is the huge page of the
    // highest of them.
    *populated = (*populated).max(used_end.next_multiple_of(POPULATE_STEP_PAGES));
    if *populated >= target {
        return Ok(false);
    }
    let first = *populated;
    let end = (first + POPULATE_STEP_PAGES).min(target);
    // Taken before the engine's lock goes: a budget lowered after the
    // look above gives memory back only after this step. Never waited
    // for under the engine's lock: the completion thread may hold it for
    // a read's frames (`Shared::back_read_frames`); look again later.
    let Some(populating) = shared.frames.try_populating() else {
        return Ok(false);
    };
    drop(core);
    shared.frames.populate(&populating, first, end)?;
    *populated = end;
    Ok(true)
}
