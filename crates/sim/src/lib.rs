//! `wb-sim`: the writeback engine on virtual time against device models.

pub mod device;
pub mod faults;
pub mod job;
pub mod layout;
pub mod oracle;
pub mod report;
pub mod rng;
pub mod runner;
pub mod timeline;
mod trace;
pub mod vopr;
pub mod workload;
