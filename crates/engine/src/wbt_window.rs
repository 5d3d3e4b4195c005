//! One monitoring window of writeback throttling (Linux's blk-wbt
//! `latency_exceeded` over the window's blk_stat samples): the fastest
//! read, the counts of reads, writes and commits, and the classification
//! that decides the scaling (wbt.rs).

/// Linux's RWB_MIN_WRITE_SAMPLES: a window needs this many write completions to count.
pub const RWB_MIN_WRITE_SAMPLES: u32 = 3;
/// Commits a window needs before their mean counts.
pub const COMMIT_MEAN_MIN_SAMPLES: u32 = 4;
/// Commits whose mean latency (call to flush done) is over this many
/// targets are slow.
pub const COMMIT_MEAN_TARGETS: u64 = 2;

/// Classification of one window, as `latency_exceeded()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowStatus {
    Ok,
    Exceeded,
    /// Reads are fine but commits are slow (ours): as Exceeded, and at
    /// depth 1 the writes are paced.
    CommitsExceeded,
    /// Reads are fine but commits are not fast: keep the depth (ours).
    Hold,
    UnknownWrites,
    Unknown,
}

/// The samples of one window. They saturate (a report of other
/// processes' reads may bring up to u32::MAX).
#[derive(Clone, Copy, Debug)]
pub struct Window {
    /// The fastest read (or commit write) completed.
    pub read_min_ns: u64,
    pub read_samples: u32,
    /// Commits completed, and their summed latency.
    pub commit_samples: u32,
    pub commit_sum_ns: u64,
    pub write_samples: u32,
}

impl Default for Window {
    fn default() -> Window {
        Window {
            read_min_ns: u64::MAX,
            read_samples: 0,
            commit_samples: 0,
            commit_sum_ns: 0,
            write_samples: 0,
        }
    }
}

impl Window {
    /// `n` reads completed, the fastest (or, for others' reads, their
    /// average) after `latency_ns`.
    pub fn reads(&mut self, n: u64, latency_ns: u64) {
        self.read_min_ns = self.read_min_ns.min(latency_ns);
        let n = n.min(u32::MAX as u64) as u32;
        self.read_samples = self.read_samples.saturating_add(n);
    }

    pub fn write(&mut self) {
        self.write_samples = self.write_samples.saturating_add(1);
    }

    /// A whole commit took `latency_ns`.
    pub fn commit(&mut self, latency_ns: u64) {
        self.commit_samples = self.commit_samples.saturating_add(1);
        self.commit_sum_ns = self.commit_sum_ns.saturating_add(latency_ns);
    }

    /// The commits' mean, once there are enough of them to count.
    pub fn commit_mean_ns(&self) -> Option<u64> {
        (self.commit_samples >= COMMIT_MEAN_MIN_SAMPLES)
            .then(|| self.commit_sum_ns / self.commit_samples as u64)
    }

    /// The window's classification against the target `min_lat_ns`, for
    /// a window of `cur_win_ns`; `oldest_read_ns`: how long the oldest
    /// tracked read has been outstanding; `writing`: writes are in flight
    /// or writers were dirty-throttled lately.
    pub fn status(
        &self,
        min_lat_ns: u64,
        cur_win_ns: u64,
        oldest_read_ns: Option<u64>,
        writing: bool,
    ) -> WindowStatus {
        // A read that has been outstanding for longer than a window, or
        // longer than the target while no read completed: exceeded.
        if let Some(lat) = oldest_read_ns {
            if lat > cur_win_ns || (lat > min_lat_ns && self.read_samples == 0) {
                return WindowStatus::Exceeded;
            }
        }
        if self.read_samples == 0 || self.write_samples < RWB_MIN_WRITE_SAMPLES {
            if self.write_samples > 0 || writing {
                return WindowStatus::UnknownWrites;
            }
            return WindowStatus::Unknown;
        }
        if self.read_min_ns > min_lat_ns {
            return WindowStatus::Exceeded;
        }
        // Ours: commits wait one after another (a database's, or FUSE's
        // fsync, which holds the file's lock), so their mean, not only the
        // fastest, is what their writers get. A device that takes writes
        // into a cache serves a few commits fast among many slow ones.
        // Between one and COMMIT_MEAN_TARGETS targets they hold the depth:
        // scaling up at once would only bring the slow commits back.
        if let Some(mean_ns) = self.commit_mean_ns() {
            if mean_ns > min_lat_ns.saturating_mul(COMMIT_MEAN_TARGETS) {
                return WindowStatus::CommitsExceeded;
            }
            if mean_ns > min_lat_ns {
                return WindowStatus::Hold;
            }
        }
        WindowStatus::Ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn window(reads: u64, read_ns: u64, writes: u32) -> Window {
        let mut w = Window::default();
        if reads > 0 {
            w.reads(reads, read_ns);
        }
        for _ in 0..writes {
            w.write();
        }
        w
    }

    #[test]
    fn the_fastest_read_against_the_target_decides() {
        let status = |w: Window| w.status(2 * MS, 100 * MS, None, false);
        assert_eq!(status(window(5, MS, 3)), WindowStatus::Ok);
        assert_eq!(status(window(5, 3 * MS, 3)), WindowStatus::Exceeded);
        assert_eq!(
            status(window(5, 3 * MS, 2)),
            WindowStatus::UnknownWrites,
            "too few writes"
        );
        assert_eq!(status(window(0, 0, 0)), WindowStatus::Unknown);
        assert_eq!(
            window(0, 0, 0).status(2 * MS, 100 * MS, None, true),
            WindowStatus::UnknownWrites
        );
    }

    #[test]
    fn a_stuck_read_is_exceeded_and_slow_commits_count_by_their_mean() {
        let w = window(0, 0, 3);
        assert_eq!(
            w.status(2 * MS, 100 * MS, Some(3 * MS), false),
            WindowStatus::Exceeded
        );
        assert_eq!(
            window(1, MS, 3).status(2 * MS, 100 * MS, Some(101 * MS), false),
            WindowStatus::Exceeded
        );
        let mut w = window(5, MS, 3);
        for lat in [MS, MS, 9 * MS] {
            w.commit(lat);
        }
        assert_eq!(w.commit_mean_ns(), None, "three commits do not count yet");
        w.commit(MS);
        assert_eq!(w.commit_mean_ns(), Some(3 * MS));
        assert_eq!(w.status(2 * MS, 100 * MS, None, false), WindowStatus::Hold);
        assert_eq!(
            w.status(MS, 100 * MS, None, false),
            WindowStatus::CommitsExceeded
        );
    }
}
