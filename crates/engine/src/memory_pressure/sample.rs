//! The memory where the cache runs, as a runtime samples it (the machine,
//! the cgroups with a limit, PSI), and what the pressure policy made of
//! the last sample (memory_pressure/ decides from them).

/// The most cgroup levels a sample may carry (a deeper hierarchy's
/// outermost levels are left out by the runtime).
pub const MAX_CGROUP_LEVELS: usize = 32;

/// Which file a cgroup's limit came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitFile {
    /// cgroup v2 `memory.max`: past it, the OOM killer.
    V2Max,
    /// cgroup v2 `memory.high`: past it, the cgroup's tasks are throttled
    /// and reclaimed hard.
    V2High,
    /// cgroup v1 `memory.limit_in_bytes`.
    V1Limit,
}

impl LimitFile {
    pub fn name(self) -> &'static str {
        match self {
            LimitFile::V2Max => "memory.max",
            LimitFile::V2High => "memory.high",
            LimitFile::V1Limit => "memory.limit_in_bytes",
        }
    }
}

/// One cgroup with a memory limit, as sampled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupMemory {
    /// Its path in its hierarchy ("/batch/job-1").
    pub path: String,
    /// The tighter of its limits, and where it came from.
    pub limit_file: LimitFile,
    pub limit_bytes: u64,
    /// memory.current (v2) or memory.usage_in_bytes (v1).
    pub usage_bytes: u64,
    /// File pages on its LRU lists (memory.stat inactive_file +
    /// active_file, v1 total_*): page cache reclaim takes without swap.
    pub file_bytes: u64,
}

/// Total time tasks stalled on memory (PSI, microseconds since boot or
/// since the cgroup was made).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PsiTotals {
    /// Some task stalled.
    pub some_us: u64,
    /// Every non-idle task stalled at once.
    pub full_us: u64,
}

/// The memory where the cache runs, at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemorySample {
    /// /proc/meminfo MemTotal.
    pub mem_total_bytes: u64,
    /// /proc/meminfo MemAvailable.
    pub mem_available_bytes: u64,
    /// The cgroups with a limit, the process's own first, then upward;
    /// at most [`MAX_CGROUP_LEVELS`].
    pub cgroups: Vec<CgroupMemory>,
    /// Memory stalls where they are readable (cgroup v2 memory.pressure
    /// of the nearest limited cgroup, else /proc/pressure/memory).
    pub psi: Option<PsiTotals>,
}

/// What the last sample showed, for stats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PressureView {
    /// The binding level's available memory and reserve.
    pub available_bytes: u64,
    pub reserve_bytes: u64,
    /// The binding level's limit (MemTotal for the machine).
    pub limit_bytes: u64,
    /// Whether a cgroup binds (else the machine).
    pub cgroup_binds: bool,
    /// What the others took since the sample before.
    pub demand_bytes: u64,
    /// PSI since the sample before, thousandths of the time.
    pub some_permille: u64,
    pub full_permille: u64,
}
