//! The real runtime: the engine on real threads and real I/O. It holds no
//! policy. Callers run engine operations under one lock. After each
//! engine call, the caller drains the engine's actions in the order it
//! emitted them (`Core::drain`): what needs no I/O is done under the
//! lock, the rest becomes an ordered list of steps. Once the lock is
//! released, one executor carries the steps out in that order
//! (executor.rs): it submits I/O, unparks woken threads, sets lengths,
//! flushes, and reports results back to the engine. Callers sleep when
//! the engine says so, bounded by its deadline. A completion thread feeds
//! backend completions to the engine. A timer thread calls the engine at
//! its deadlines (threads.rs). Another thread backs the frames the cache will use next
//! with memory (populate.rs). With `follow_memory_pressure`, another
//! samples the memory where the process runs for the engine, which sets
//! the budget, and gives back what the cache freed (memory_follow.rs,
//! memory_sample.rs).

pub(crate) mod block_queue;
pub(crate) mod caller;
pub(crate) mod clock;
pub(crate) mod core;
pub(crate) mod diskstats;
pub(crate) mod drain;
pub(crate) mod executor;
pub(crate) mod frames;
pub(crate) mod length_lock;
pub(crate) mod memory_follow;
pub(crate) mod memory_sample;
pub(crate) mod open_files;
pub(crate) mod populate;
pub(crate) mod shared;
pub(crate) mod statfs;
pub(crate) mod threads;
pub(crate) mod times;
pub(crate) mod trace;
pub(crate) mod tuning;
