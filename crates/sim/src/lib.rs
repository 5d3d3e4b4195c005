//! `wb-sim`: the writeback engine on virtual time against device models.

pub mod device;
pub mod rng;
