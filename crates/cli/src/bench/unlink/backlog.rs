//! The mount's backlogs, read from its `.writeback/stats`: how long its
//! unlinks waited for them, and when they are empty.

use crate::bench::BenchError;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long the mount's backlogs may take to empty after the walk.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(1800);

/// The sum of the mount's `.writeback/stats` lines whose names pass `pick`.
fn mount_stat(mnt: &Path, pick: impl Fn(&str) -> bool) -> Result<u64, BenchError> {
    let path = mnt.join(wb_fuse::CONTROL_DIR).join("stats");
    let stats =
        std::fs::read_to_string(&path).map_err(|e| BenchError::failed(path.display(), e))?;
    Ok(stats
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(name, _)| pick(name))
        .filter_map(|(_, v)| v.parse::<u64>().ok())
        .sum())
}

/// The mount's backlog pauses so far: (count, longest in us).
pub fn read_backlog_pauses(mnt: &Path) -> Result<(u64, u64), BenchError> {
    Ok((
        mount_stat(mnt, |n| n == "pause_backlog_count")?,
        mount_stat(mnt, |n| n == "pause_backlog_max_us")?,
    ))
}

/// Waits until the mount's backlogs hold nothing (every removed file freed).
pub fn wait_backlogs_empty(mnt: &Path) -> Result<(), BenchError> {
    let start = Instant::now();
    loop {
        let queued = mount_stat(mnt, |n| n.ends_with(".backlog_items"))?;
        if queued == 0 {
            return Ok(());
        }
        if start.elapsed() > SETTLE_TIMEOUT {
            return Err(BenchError::Failed(format!(
                "the mount's backlogs still hold {queued} files after {} s",
                SETTLE_TIMEOUT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
