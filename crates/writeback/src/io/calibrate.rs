//! Measuring the device behind a backing directory, and remembering the
//! result per device.
//!
//! The numbers describe the device *as it is at measurement time*: on a
//! shared or virtualised machine (virtio disk backed by a host cache, noisy
//! neighbours) they vary from run to run and may be far from the hardware's
//! datasheet. They are meant as a starting point for the engine's tuning,
//! not as a benchmark. Profiles are remembered in
//! `data_dir/calibration.json` keyed by `st_dev` and never re-measured
//! automatically; call [`measure`] to force a fresh measurement. (An
//! `st_dev` can be reused by a different device after a reboot or remount
//! of removable/loop devices; delete the file to forget.)

use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;
use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::aligned::AlignedBuf;
use super::direct::open_direct;
use super::open::default_backend_name;
use super::tail::write_all_at;

/// Name of the profile store inside `data_dir`.
pub const CALIBRATION_FILE: &str = "calibration.json";
/// Size of the file written to measure bandwidth (when the budget allows).
pub const CALIBRATION_FILE_BYTES: u64 = 64 << 20;
/// Size of each O_DIRECT write of the bandwidth phase.
pub const WRITE_CHUNK_BYTES: usize = 1 << 20;
/// Size of each O_DIRECT random read of the latency phase.
pub const READ_BYTES: usize = 4096;
/// Reads always taken by the latency phase, even past the budget.
pub const MIN_READS: usize = 200;
/// Upper bound on latency samples (bounds memory on very fast devices).
const MAX_READS: usize = 1 << 20;
/// The write phase may stop before the full file once past half the budget,
/// but never before this much was written.
const MIN_WRITE_BYTES: u64 = 8 << 20;

/// What the engine knows about a device.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct DeviceProfile {
    /// `st_dev` of the backing directory (see [`device_id`]).
    pub st_dev: u64,
    /// Median latency of isolated (queue depth 1) 4 KiB O_DIRECT random
    /// reads of freshly written data, in nanoseconds.
    pub idle_read_latency_ns: u64,
    /// Sequential O_DIRECT write bandwidth in 1 MiB writes, fsync included,
    /// in bytes per second.
    pub write_bw_bytes_s: u64,
    /// Name of the I/O backend [`open_backend`](super::open_backend)
    /// picks on this machine (`"io_uring"` or `"threads"`), recorded for
    /// information. The measurement itself uses plain `pread`/`pwrite` on the
    /// calling thread so that backend overhead is not counted.
    pub backend: String,
}

/// The device id (`st_dev`) of the filesystem holding `dir`.
pub fn device_id(dir: &Path) -> io::Result<u64> {
    Ok(fs::metadata(dir)?.dev())
}

/// Returns the profile of `dir`'s device: the one remembered in
/// `data_dir/calibration.json` (created along with `data_dir` if missing)
/// if there is one for this `st_dev`, else a fresh [`measure`]ment within
/// about `budget`, which is then remembered.
///
/// Fails if `dir` does not support O_DIRECT (kind `Unsupported`), on I/O
/// errors, or if the store cannot be written.
pub fn calibrate(dir: &Path, data_dir: &Path, budget: Duration) -> io::Result<DeviceProfile> {
    let st_dev = device_id(dir)?;
    fs::create_dir_all(data_dir)?;
    let store = data_dir.join(CALIBRATION_FILE);
    if let Some(p) = load_profiles(&store)?.remove(&st_dev) {
        return Ok(p);
    }
    let profile = measure(dir, budget)?;
    remember(&store, &profile)?;
    Ok(profile)
}

/// Measures `dir`'s device now, in about `budget` (more if the device is so
/// slow that [`MIN_READS`] reads or 8 MiB of writes take longer):
///
/// 1. writes a file of [`CALIBRATION_FILE_BYTES`] in `dir` with O_DIRECT
///    1 MiB writes followed by fsync, stopping early if half the budget is
///    spent; bandwidth = bytes / time;
/// 2. reads random 4 KiB blocks of it with O_DIRECT, one at a time, for
///    about half the budget (at least [`MIN_READS`]); latency = median.
///
/// Both phases bypass the page cache (the data was never in it). The file is
/// removed afterwards, also on error. Does not consult or update the store.
pub fn measure(dir: &Path, budget: Duration) -> io::Result<DeviceProfile> {
    let st_dev = device_id(dir)?;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let path = dir.join(format!(".wb-calibrate-{}-{nanos}", std::process::id()));
    let _cleanup = RemoveOnDrop(path.clone());
    let file = open_direct(&path, true)?;
    let mut rng = SplitMix64::seed_from_u64(nanos as u64 ^ 0x9E37_79B9_7F4A_7C15);

    // Phase 1: sequential write bandwidth.
    let half_budget = budget / 2;
    let mut chunk = AlignedBuf::new(WRITE_CHUNK_BYTES);
    rng.fill_bytes(chunk.as_mut_slice());
    let write_start = Instant::now();
    let mut written_bytes = 0u64;
    while written_bytes < CALIBRATION_FILE_BYTES {
        // Make every chunk distinct so nothing below can deduplicate it.
        chunk.as_mut_slice()[..8].copy_from_slice(&written_bytes.to_ne_bytes());
        write_all_at(&file, chunk.as_slice(), written_bytes)?;
        written_bytes += WRITE_CHUNK_BYTES as u64;
        if written_bytes >= MIN_WRITE_BYTES && write_start.elapsed() >= half_budget {
            break;
        }
    }
    file.sync_all()?;
    let write_ns = write_start.elapsed().as_nanos().max(1);
    let write_bw_bytes_s = (u128::from(written_bytes) * 1_000_000_000 / write_ns)
        .try_into()
        .unwrap_or(u64::MAX)
        .max(1);

    // Phase 2: isolated random read latency.
    let blocks = written_bytes / READ_BYTES as u64;
    let mut block = AlignedBuf::new(READ_BYTES);
    let read_start = Instant::now();
    let mut latencies_ns: Vec<u64> = Vec::with_capacity(4096);
    while latencies_ns.len() < MIN_READS
        || (read_start.elapsed() < half_budget && latencies_ns.len() < MAX_READS)
    {
        let offset = (rng.next_u64() % blocks) * READ_BYTES as u64;
        let t = Instant::now();
        file.read_exact_at(block.as_mut_slice(), offset)?;
        latencies_ns.push(t.elapsed().as_nanos().try_into().unwrap_or(u64::MAX));
    }
    latencies_ns.sort_unstable();
    let idle_read_latency_ns = latencies_ns[latencies_ns.len() / 2].max(1);

    Ok(DeviceProfile {
        st_dev,
        idle_read_latency_ns,
        write_bw_bytes_s,
        backend: default_backend_name().to_string(),
    })
}

/// Reads the store; a missing file is an empty store, an unparsable one is
/// reported on stderr and treated as empty (it is a cache: it gets rewritten).
fn load_profiles(store: &Path) -> io::Result<BTreeMap<u64, DeviceProfile>> {
    let text = match fs::read_to_string(store) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(e),
    };
    match serde_json::from_str(&text) {
        Ok(map) => Ok(map),
        Err(e) => {
            eprintln!(
                "writeback: ignoring unreadable {} ({e}); will re-measure",
                store.display()
            );
            Ok(BTreeMap::new())
        }
    }
}

/// Adds `profile` to the store (re-read just before, so concurrent
/// calibrations of other devices are kept), replacing it atomically.
fn remember(store: &Path, profile: &DeviceProfile) -> io::Result<()> {
    let mut map = load_profiles(store)?;
    map.insert(profile.st_dev, profile.clone());
    let text = serde_json::to_string_pretty(&map).map_err(io::Error::other)?;
    let mut tmp = store.as_os_str().to_owned();
    tmp.push(format!(".tmp.{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    fs::write(&tmp, text)?;
    fs::rename(&tmp, store).inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}
