//! The interference experiment's configurations (what writes beside the
//! reader, and how the kernel or the engine is set up for it) and a
//! report row's summary: the vocabulary that the experiment
//! (mod.rs), the kernel's set-ups (kernel_configs.rs) and the
//! frontier plot (frontier.rs) share.

use super::sweep::SweepPoint;
use crate::bench::fio::ReaderResult;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchConfig {
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

impl BenchConfig {
    pub const ALL: [BenchConfig; 15] = [
        BenchConfig::Floor,
        BenchConfig::Kernel,
        BenchConfig::KernelDontcache,
        BenchConfig::KernelKyber,
        BenchConfig::KernelBfq,
        BenchConfig::KernelBfqIdle,
        BenchConfig::KernelDirty64m,
        BenchConfig::KernelNocache,
        BenchConfig::KernelDirect,
        BenchConfig::KernelBlkio,
        BenchConfig::EngineWbtOff,
        BenchConfig::Engine,
        BenchConfig::EngineDontcache,
        BenchConfig::MountFloor,
        BenchConfig::Mount,
    ];
    /// The configurations of `--fuse`.
    pub const FUSE: [BenchConfig; 5] = [
        BenchConfig::Floor,
        BenchConfig::MountFloor,
        BenchConfig::Kernel,
        BenchConfig::KernelBfq,
        BenchConfig::Mount,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BenchConfig::Floor => "floor",
            BenchConfig::Kernel => "kernel",
            BenchConfig::KernelDontcache => "kernel-dontcache",
            BenchConfig::KernelKyber => "kernel-kyber",
            BenchConfig::KernelBfq => "kernel-bfq",
            BenchConfig::KernelBfqIdle => "kernel-bfq-idle",
            BenchConfig::KernelDirty64m => "kernel-dirty64m",
            BenchConfig::KernelNocache => "kernel-nocache",
            BenchConfig::KernelDirect => "kernel-direct",
            BenchConfig::KernelBlkio => "kernel-blkio",
            BenchConfig::EngineWbtOff => "engine-wbt-off",
            BenchConfig::Engine => "engine",
            BenchConfig::EngineDontcache => "engine-dontcache",
            BenchConfig::MountFloor => "mount-floor",
            BenchConfig::Mount => "mount",
        }
    }

    /// The kernel's own writeback: the candidates for the best kernel.
    pub fn is_kernel(self) -> bool {
        matches!(
            self,
            BenchConfig::Kernel
                | BenchConfig::KernelDontcache
                | BenchConfig::KernelKyber
                | BenchConfig::KernelBfq
                | BenchConfig::KernelBfqIdle
                | BenchConfig::KernelDirty64m
                | BenchConfig::KernelNocache
                | BenchConfig::KernelDirect
                | BenchConfig::KernelBlkio
        )
    }

    /// May be left out (with a note) when the machine cannot run it:
    /// every kernel configuration but `kernel` itself.
    pub fn optional(self) -> bool {
        self.is_kernel() && self != BenchConfig::Kernel
    }
}

/// A row's name: `kernel`, `engine[wbt_lat_usec=2000]`.
pub fn row_name(config: BenchConfig, point: Option<&SweepPoint>) -> String {
    match point {
        Some(p) => p.row_name(config.name()),
        None => config.name().to_string(),
    }
}

/// Medians over the runs of one row.
pub struct ConfigSummary {
    pub config: BenchConfig,
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
