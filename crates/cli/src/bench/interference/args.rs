//! The command line of `wb bench interference`: its flags, its `--help`
//! and the names of its configurations.

use super::configs::BenchConfig;
use super::sweep::{self, Sweep};
use crate::bench::{parse_repeat, parse_seconds, parse_size};
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
#[command(after_help = "\
Runs, in one go on the filesystem of --dir, each configuration --repeat times and reports medians:
  floor             the reader alone
  kernel            fio buffered sequential writer (1 MiB writes, fsync at the end)
  kernel-dontcache  the same writes with pwritev2(RWF_DONTCACHE) by wb itself (fio here has
                    no uncached option), if the filesystem takes them (else left out, noted)
  kernel-kyber      kernel, with the block scheduler of the device under --dir switched to
                    kyber for the run (a loop device's own queue for a filesystem on one)
  kernel-bfq        the same with bfq (which turns the kernel's wbt off while it is in use)
  kernel-bfq-idle   kernel-bfq, the fio writer under `ionice -c3` (idle class); the kernel's
                    flusher, not the writer, issues most buffered writeback: it may change nothing
  kernel-dirty64m   kernel, with vm.dirty_bytes 64 MiB / vm.dirty_background_bytes 32 MiB for
                    the run instead of 20% / 10% of --memory
  kernel-nocache    kernel, the fio writer under `nocache` (LD_PRELOAD: fadvise DONTNEED of the
                    files it closes; Debian package nocache; without it left out, noted)
  kernel-direct     kernel, the fio writer with O_DIRECT writes (--direct=1, still 1 MiB)
  kernel-blkio      kernel, the fio writer in a cgroup v1 blkio cgroup whose
                    blkio.throttle.write_bps_device limits the device under --dir to
                    --blkio-write-limit (needs /sys/fs/cgroup/blkio). v1 throttling counts only
                    the writes a task issues itself: buffered writeback, issued by the flusher,
                    is charged to the root cgroup, so it limits little of a buffered writer
  engine-wbt-off    the writer is the writeback library (memory --memory, wbt_lat_usec=0)
  engine            the same with wbt_lat_usec=-1 (automatic target)
  engine-dontcache  engine, its writes uncached (WriteFlags::DONTCACHE, dontcache_flush=kick)
With --fuse: floor, kernel, kernel-bfq (bfq is the anchor to beat there), and
  mount-floor       the reader alone through a mount (what the mount's reader gets at best)
  mount             `wb mount --dir` on a temporary mountpoint (memory --memory, plus
                    --engine-set knobs), the same fio writer and reader through it
--sweep KNOB=V1,V2,... runs engine (mount with --fuse) once more per value, the knob set as
--engine-set sets it (after the configuration's wbt_lat_usec), each a row named
engine[KNOB=V]; the default engine row stays: the point the sweep is judged against. With
--html the report adds the frontier: reader p99 and p50 against writer MiB/s, a point per
kernel configuration, the sweep's points joined in the order given, the floor as a line.
The reader is `fio --rw=randread --bs=4k --direct=1 --ioengine=psync` (queue depth 1) on a
file written once with O_DIRECT, started 1 s after the writer, for --seconds. Each writer
runs until the reader has finished (fio's time_based: at the end of its --writer-size file
it goes on from the start), then fsyncs; writer MiB/s is what it wrote over that time. Only
the reads issued while the writer ran are counted (from fio's per-read latency log), each
with its whole latency: reads with no writer beside them measure no interference (a writer
that stopped early is noted; one that stopped within 1 s of the reader's start fails the run).
Before each run the filesystem's free space is trimmed (fstrim), so every writer meets
the same disk state (a loop device's image otherwise allocates only on first touch), the
page cache is dropped (a loop device's image would otherwise keep what earlier runs read),
and the run waits (at most 60 s, noted if longer) until 256 reads in a row of the
reader's file take under 2 ms each: the previous run's aftermath stays out of it.
While any writer runs, vm.dirty_bytes / vm.dirty_background_bytes are 20% / 10% of
--memory (the engine's limits; they also bound page caches under the filesystem, such
as a buffered loop device's), restored afterwards (also on Ctrl-C); needs root. The block
scheduler switched for kernel-kyber / kernel-bfq is restored the same way (and the queue's
wbt_lat_usec, if switching changed it), and kernel-blkio's cgroup removed.
Ratios: to the floor, to kernel, and to the best kernel configuration (every kernel-*
one) at each figure, chosen per figure (lowest latency, highest IOPS and writer MiB/s);
JSON has it as best_kernel.

Quick run: wb bench interference --writer-size 2GiB --seconds 5 --repeat 1
Experiment: wb bench interference --configs floor,engine --engine-set queue_depth=8
Frontier: wb bench interference --sweep wbt_lat_usec=500,1000,2000,4000,0 --html f.html

Exit status: 0 on success, 1 if a run failed, 2 for bad arguments, an unusable --dir,
no fio, or no permission to change the dirty limits; 130 on Ctrl-C.")]
pub struct InterferenceArgs {
    /// Directory for the benchmark's files (created if missing; they are removed at the end).
    #[arg(long, default_value = "wb-data/bench")]
    pub dir: PathBuf,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Runs of each configuration; medians are reported.
    #[arg(long, default_value = "3", value_parser = parse_repeat)]
    pub repeat: usize,
    /// Size of each writer's file (scaled down, with a note, if the disk lacks room);
    /// a writer that reaches its end before the reader stops writes it again from the start.
    #[arg(long, default_value = "8GiB", value_parser = parse_size, value_name = "SIZE")]
    pub writer_size: u64,
    /// Seconds the reader runs in each configuration.
    #[arg(long, default_value = "10", value_parser = parse_seconds, value_name = "S")]
    pub seconds: u64,
    /// The engine's memory; the kernel's dirty limits are set to 20% / 10% of it.
    #[arg(long, default_value = "1GiB", value_parser = parse_size, value_name = "SIZE")]
    pub memory: u64,
    /// Size of the reader's file [default: 1GiB; with --fuse 4 x --memory,
    /// so the mount's cache can hold little of it].
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub reader_size: Option<u64>,
    /// Compare the kernel with `wb mount` instead: fio is the writer and the
    /// reader both on --dir (the kernel) and on a mount of --dir (configs
    /// floor, kernel, kernel-bfq, mount); --engine-set knobs go to the mount.
    #[arg(long)]
    pub fuse: bool,
    /// State directory: where the engine remembers device calibrations.
    /// Default: $STATE_DIRECTORY (its first path), else /var/lib/wb as root,
    /// else $XDG_STATE_HOME/wb, else $HOME/.local/state/wb.
    #[arg(long, value_name = "DIR", default_value_os_t = crate::state_dir::clap_default().into())]
    pub data_dir: PathBuf,
    /// An engine knob for both engine configurations (cache or device knob,
    /// e.g. max_sectors_kb=128); wbt_lat_usec is set by the configuration. Repeatable.
    #[arg(long = "engine-set", value_name = "KNOB=VALUE", value_parser = crate::bench::parse_engine_set)]
    pub engine_sets: Vec<(String, String)>,
    /// Only these configurations, comma-separated (for experiments; ratios
    /// to the floor or the kernel need those in the list).
    #[arg(long, value_name = "NAMES", value_delimiter = ',', value_parser = parse_config)]
    pub configs: Vec<BenchConfig>,
    /// Run engine (mount with --fuse) once more for each value of an engine
    /// knob, e.g. wbt_lat_usec=500,1000,2000,4000,8000,0: a row each.
    #[arg(long, value_name = "KNOB=V1,V2,...", value_parser = sweep::parse_sweep)]
    pub sweep: Option<Sweep>,
    /// kernel-blkio's limit on the device's writes, per second.
    #[arg(long, default_value = "200MiB", value_parser = parse_size, value_name = "SIZE")]
    pub blkio_write_limit: u64,
}

/// A configuration's name, as printed.
pub(super) fn parse_config(text: &str) -> Result<BenchConfig, String> {
    BenchConfig::ALL
        .into_iter()
        .find(|c| c.name() == text)
        .ok_or_else(|| {
            let names: Vec<&str> = BenchConfig::ALL.iter().map(|c| c.name()).collect();
            format!(
                "unknown configuration '{text}' (one of: {})",
                names.join(", ")
            )
        })
}

/// `wb bench interference ARGS` as clap parses them.
#[cfg(test)]
pub(super) fn parse_args(list: &[&str]) -> Result<InterferenceArgs, clap::Error> {
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: InterferenceArgs,
    }
    use clap::Parser;
    let argv = std::iter::once("interference").chain(list.iter().copied());
    Cli::try_parse_from(argv).map(|c| c.args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_configuration_names_parse() {
        for name in [
            "kernel-dontcache",
            "kernel-kyber",
            "kernel-bfq",
            "kernel",
            "engine",
            "engine-dontcache",
        ] {
            assert_eq!(parse_config(name).map(BenchConfig::name), Ok(name));
        }
        assert!(parse_config("kernel-cfq").is_err());
        assert!(BenchConfig::KernelKyber.is_kernel() && !BenchConfig::Engine.is_kernel());
    }

    #[test]
    fn every_configuration_name_round_trips() {
        for config in BenchConfig::ALL {
            assert_eq!(parse_config(config.name()), Ok(config));
        }
        let names: Vec<&str> = BenchConfig::ALL.iter().map(|c| c.name()).collect();
        for name in [
            "kernel-bfq-idle",
            "kernel-dirty64m",
            "kernel-nocache",
            "kernel-direct",
            "kernel-blkio",
        ] {
            assert!(names.contains(&name), "{name} missing from {names:?}");
            let config = parse_config(name).expect("known");
            assert!(config.is_kernel() && config.optional(), "{name}");
        }
        assert!(!BenchConfig::Kernel.optional() && !BenchConfig::Engine.optional());
        let err = parse_config("kernel-nocach").expect_err("unknown");
        assert!(err.contains("kernel-blkio"), "{err}");
    }

    #[test]
    fn sweep_and_blkio_limit_parse_and_bad_sweeps_are_usage_errors() {
        let a = parse_args(&["--sweep", "wbt_lat_usec=1000,4000"]).expect("valid");
        let sweep = a.sweep.expect("a sweep");
        assert_eq!(sweep.values, ["1000", "4000"]);
        assert_eq!(a.blkio_write_limit, 200 << 20);
        let a = parse_args(&["--blkio-write-limit", "50MiB"]).expect("valid");
        assert_eq!(a.blkio_write_limit, 50 << 20);
        for bad in [
            "wbt_lat_usec",
            "wbt_lat_usec=",
            "nope=1,2",
            "wbt_lat_usec=1000,x",
        ] {
            let err = parse_args(&["--sweep", bad]).err().expect(bad);
            // clap's usage errors exit with 2, as bad arguments do here.
            assert_eq!(err.exit_code(), 2, "{bad}: {err}");
            assert!(err.to_string().contains("--sweep"), "{bad}: {err}");
        }
        assert!(parse_args(&["--sweep", "a=1", "--sweep", "b=2"]).is_err());
    }
}
