//! What a scenario file describes, after validation: every value is in
//! range and every reference resolved, so runtimes need not re-check.

use std::collections::BTreeMap;
use wb_engine::{Config, DeviceConfig};

/// A validated scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub seed: u64,
    /// Everything stops at this simulated time.
    pub duration_ns: u64,
    pub cache: Config,
    pub devices: Vec<DeviceSpec>,
    pub jobs: Vec<JobSpec>,
}

/// One `[[device]]`.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceSpec {
    pub name: String,
    /// The device model's name; checked by the caller's validator.
    pub model: String,
    pub config: DeviceConfig,
    /// Model parameters, as text; their meaning belongs to the model.
    pub params: BTreeMap<String, String>,
}

/// One `[[job]]`.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    pub name: String,
    /// Index into [`Scenario::devices`].
    pub device: usize,
    /// Writeback domain (cgroup-like) name; "root" unless set.
    pub domain: String,
    pub start_ns: u64,
    /// The job stops after this long, if set.
    pub runtime_ns: Option<u64>,
    /// Runs until every foreground job has finished.
    pub background: bool,
    /// How the job's writes go through the cache.
    pub mode: WriteMode,
    pub kind: JobKind,
}

/// How a job writes (`mode = "..."`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WriteMode {
    /// Through the cache, written back later.
    #[default]
    Buffered,
    /// Through the cache, uncached (RWF_DONTCACHE): the pages leave once
    /// written back.
    Dontcache,
    /// Around the cache (O_DIRECT): straight to the device, waiting for it.
    /// Simulated only.
    Direct,
}

impl WriteMode {
    pub const ALL: [WriteMode; 3] = [WriteMode::Buffered, WriteMode::Dontcache, WriteMode::Direct];

    pub fn name(self) -> &'static str {
        match self {
            WriteMode::Buffered => "buffered",
            WriteMode::Dontcache => "dontcache",
            WriteMode::Direct => "direct",
        }
    }
}

/// What a job does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobKind {
    /// Writes `files` files of `file_size` bytes in `block_size` writes,
    /// in order or (`random`) each block of a file once in a random order;
    /// `fsync_each` fsyncs each file after writing it, `sync` calls sync()
    /// once at the end.
    Writer {
        files: u32,
        file_size: u64,
        block_size: u64,
        random: bool,
        sync: bool,
        fsync_each: bool,
    },
    /// Reads a file of `file_size` bytes, sequentially or at random offsets,
    /// optionally limited to `rate_iops` reads per second.
    Reader {
        file_size: u64,
        block_size: u64,
        random: bool,
        rate_iops: Option<u64>,
    },
    /// Writes one block every `interval_ns`, `count` times.
    OccasionalWriter {
        block_size: u64,
        interval_ns: u64,
        count: u64,
    },
    /// Writes one block and fsyncs it, `count` times, `interval_ns` apart.
    FsyncLoop {
        block_size: u64,
        interval_ns: u64,
        count: u64,
    },
    /// A dbench-like client: `count` operations on `files` small files of
    /// `file_size` bytes, each a write of `block_size` bytes at a random
    /// block of a random file, except that every `read_every`-th reads back
    /// the block written last and every `flush_every`-th fsyncs the file
    /// written last (0: never).
    Dbench {
        files: u32,
        file_size: u64,
        block_size: u64,
        read_every: u64,
        flush_every: u64,
        count: u64,
    },
    /// `rm -rf` of a tree on the device (files that exist when the run
    /// starts): `files` files of `file_size` bytes and `big_files` of
    /// `big_file_size` spread evenly among them, unlinked one after the
    /// other, each costing the caller `unlink_cost_ns` besides any wait.
    Remover {
        files: u32,
        file_size: u64,
        big_files: u32,
        big_file_size: u64,
        unlink_cost_ns: u64,
    },
}

impl JobKind {
    /// The name used for `kind = "..."` in scenario files.
    pub fn name(&self) -> &'static str {
        match self {
            JobKind::Writer { .. } => "writer",
            JobKind::Reader { .. } => "reader",
            JobKind::OccasionalWriter { .. } => "occasional-writer",
            JobKind::FsyncLoop { .. } => "fsync-loop",
            JobKind::Dbench { .. } => "dbench",
            JobKind::Remover { .. } => "remover",
        }
    }
}

/// Why the devices' guaranteed shares cannot all be honoured, if they
/// cannot: Linux refuses a `min_ratio` that makes the sum exceed 100%.
pub(crate) fn min_ratio_excess<'a>(
    devices: impl IntoIterator<Item = (&'a str, &'a DeviceConfig)>,
) -> Option<String> {
    let shares: Vec<(&str, u32)> = devices
        .into_iter()
        .filter(|(_, config)| config.min_ratio > 0)
        .map(|(name, config)| (name, config.min_ratio))
        .collect();
    let total: u64 = shares.iter().map(|&(_, ratio)| u64::from(ratio)).sum();
    if total <= 100 {
        return None;
    }
    let list: Vec<String> = shares
        .iter()
        .map(|(name, ratio)| format!("{name} {ratio}"))
        .collect();
    Some(format!(
        "the devices' min_ratio add up to {total}%, more than 100% ({})",
        list.join(", ")
    ))
}
