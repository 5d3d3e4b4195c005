//! The real runtime: the engine on real threads and real I/O. It holds no
//! policy: callers run engine operations under one lock and sleep when the
//! engine says so (on a condition variable, with the engine's bound); a
//! completion thread feeds backend completions to the engine; a timer
//! thread calls the engine at its deadlines; another backs the frames
//! the cache will use next with memory (populate.rs); with
//! `follow_memory_pressure`, another samples the memory where the process
//! runs for the engine, which sets the budget, and gives back what the
//! cache freed (memory_follow.rs, memory_sample.rs).

pub(crate) mod block_queue;
pub(crate) mod caller;
pub(crate) mod clock;
pub(crate) mod core;
pub(crate) mod diskstats;
pub(crate) mod frames;
pub(crate) mod length_lock;
pub(crate) mod memory_follow;
pub(crate) mod memory_sample;
pub(crate) mod open_files;
pub(crate) mod page_map;
pub(crate) mod populate;
pub(crate) mod shared;
pub(crate) mod statfs;
pub(crate) mod times;
pub(crate) mod trace;
pub(crate) mod tuning;
