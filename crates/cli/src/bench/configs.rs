//! The interference experiment's configurations (what writes beside the
//! reader, and how the kernel or the engine is set up for it) and a
//! report row's summary: the vocabulary that the experiment
//! (interference.rs), the kernel's set-ups (kernel_configs.rs) and the
//! frontier plot (frontier.rs) share.

use super::fio::ReaderResult;
use super::sweep::SweepPoint;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Config {
    Floor,
    Kernel,
    KernelDontcache,
    KernelKyber,
    KernelBfq,
    KernelBfqIdle,
    KernelDirty64m,
    KernelNocache,
    KernelDirect,
    KernelBlkio,
    EngineWbtOff,
    Engine,
    EngineDontcache,
    MountFloor,
    Mount,
}

impl Config {
    pub const ALL: [Config; 15] = [
        Config::Floor,
        Config::Kernel,
        Config::KernelDontcache,
        Config::KernelKyber,
        Config::KernelBfq,
        Config::KernelBfqIdle,
        Config::KernelDirty64m,
        Config::KernelNocache,
        Config::KernelDirect,
        Config::KernelBlkio,
        Config::EngineWbtOff,
        Config::Engine,
        Config::EngineDontcache,
        Config::MountFloor,
        Config::Mount,
    ];
    /// The configurations of `--fuse`.
    pub const FUSE: [Config; 5] = [
        Config::Floor,
        Config::MountFloor,
        Config::Kernel,
        Config::KernelBfq,
        Config::Mount,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Config::Floor => "floor",
            Config::Kernel => "kernel",
            Config::KernelDontcache => "kernel-dontcache",
            Config::KernelKyber => "kernel-kyber",
            Config::KernelBfq => "kernel-bfq",
            Config::KernelBfqIdle => "kernel-bfq-idle",
            Config::KernelDirty64m => "kernel-dirty64m",
            Config::KernelNocache => "kernel-nocache",
            Config::KernelDirect => "kernel-direct",
            Config::KernelBlkio => "kernel-blkio",
            Config::EngineWbtOff => "engine-wbt-off",
            Config::Engine => "engine",
            Config::EngineDontcache => "engine-dontcache",
            Config::MountFloor => "mount-floor",
            Config::Mount => "mount",
        }
    }

    /// The kernel's own writeback: the candidates for the best kernel.
    pub fn is_kernel(self) -> bool {
        matches!(
            self,
            Config::Kernel
                | Config::KernelDontcache
                | Config::KernelKyber
                | Config::KernelBfq
                | Config::KernelBfqIdle
                | Config::KernelDirty64m
                | Config::KernelNocache
                | Config::KernelDirect
                | Config::KernelBlkio
        )
    }

    /// May be left out (with a note) when the machine cannot run it:
    /// every kernel configuration but `kernel` itself.
    pub fn optional(self) -> bool {
        self.is_kernel() && self != Config::Kernel
    }
}

/// A row's name: `kernel`, `engine[wbt_lat_usec=2000]`.
pub fn row_name(config: Config, point: Option<&SweepPoint>) -> String {
    match point {
        Some(p) => p.row_name(config.name()),
        None => config.name().to_string(),
    }
}

/// Medians over the runs of one row.
pub struct ConfigSummary {
    pub config: Config,
    /// The --sweep knob's value the row ran with.
    pub point: Option<SweepPoint>,
    pub reader: ReaderResult,
    pub writer_mib_s: Option<f64>,
}

impl ConfigSummary {
    /// The row's name: `kernel`, `engine[wbt_lat_usec=2000]`.
    pub fn name(&self) -> String {
        row_name(self.config, self.point.as_ref())
    }
}
