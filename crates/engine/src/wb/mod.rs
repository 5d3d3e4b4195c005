//! Writeback contexts: one per (device, domain) pair, Linux's
//! bdi_writeback. Each has its own write bandwidth, dirty rate limit,
//! share of completions, list of dirty files in first-dirtied order, and
//! flusher (its page counts are the page cache's: page_cache/).

pub(crate) mod state;

pub(crate) use crate::wb::state::Wb;
