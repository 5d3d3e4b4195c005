//! Why the budget is what it is, and its figures for stats
//! (memory_budget/).

use crate::memory_pressure::sample::PressureView;
use std::fmt;

/// Why the budget is what it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BudgetReason {
    /// What the cache started with.
    #[default]
    Start,
    /// The `memory` knob was written.
    Knob,
    /// A cgroup's limit, lowered below what the cache had.
    CgroupLimit,
    /// Too little memory available where the process runs: given to others.
    LowMemory,
    /// Tasks stalled on memory (PSI).
    Pressure,
    /// Grown back after pressure.
    Grow,
}

impl BudgetReason {
    pub const ALL: [BudgetReason; 6] = [
        BudgetReason::Start,
        BudgetReason::Knob,
        BudgetReason::CgroupLimit,
        BudgetReason::LowMemory,
        BudgetReason::Pressure,
        BudgetReason::Grow,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BudgetReason::Start => "start",
            BudgetReason::Knob => "knob",
            BudgetReason::CgroupLimit => "cgroup_limit",
            BudgetReason::LowMemory => "low_memory",
            BudgetReason::Pressure => "pressure",
            BudgetReason::Grow => "grow",
        }
    }
}

impl fmt::Display for BudgetReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The budget's figures, for stats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryBudgetStats {
    /// Whether a runtime passes samples (the budget follows pressure).
    pub follows_pressure: bool,
    /// The ceiling: the `memory` knob, within the frames.
    pub ceiling_pages: u64,
    /// `memory_min`, within the ceiling.
    pub floor_pages: u64,
    /// Why the budget is what it is now.
    pub reason: BudgetReason,
    /// Times the budget was lowered / raised by the policy, and by how
    /// many pages in all.
    pub shrinks: u64,
    pub grows: u64,
    pub shrunk_pages: u64,
    pub grown_pages: u64,
    /// Pages of frames whose memory the runtime gave back to the system.
    pub given_back_pages: u64,
    /// The last sample as the policy saw it.
    pub view: PressureView,
}
