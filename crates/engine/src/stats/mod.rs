//! Counters the engine keeps for people and tests: every stall by reason,
//! peaks of dirty and writeback memory, writeback by reason, wbt activity.
//! The types are in counters.rs; `Engine::stats` (control.rs) fills them
//! from the owners' state.

pub(crate) mod counters;
