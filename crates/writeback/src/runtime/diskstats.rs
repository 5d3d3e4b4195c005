//! Reads the device does for others. The engine's wbt judges the device by
//! read latency, but it only issues its own reads; readers in other
//! processes (the case that matters most) are invisible to it. The block
//! layer's statistics (/sys/dev/block/MAJ:MIN/stat) count every read and
//! the time spent on them, so sampling them gives wbt the latency every
//! reader of the device sees.

use std::path::PathBuf;

/// How often the device's statistics are sampled.
pub(crate) const SAMPLE_INTERVAL: std::time::Duration = std::time::Duration::from_millis(20);

pub(crate) struct DiskStats {
    path: PathBuf,
    /// Reads completed and milliseconds spent reading, at the last sample.
    last: Option<(u64, u64)>,
}

impl DiskStats {
    /// The statistics of the block device behind a filesystem, if it has one
    /// (tmpfs and other memory filesystems do not).
    pub fn for_st_dev(st_dev: u64) -> Option<DiskStats> {
        let (major, minor) = (libc::major(st_dev), libc::minor(st_dev));
        let path = PathBuf::from(format!("/sys/dev/block/{major}:{minor}/stat"));
        path.exists().then_some(DiskStats { path, last: None })
    }

    /// Reads since the last sample and their total latency in ns.
    pub fn sample(&mut self) -> Option<(u64, u64)> {
        let text = std::fs::read_to_string(&self.path).ok()?;
        let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
        let reads = fields.next()??;
        let read_ms = fields.nth(2)??;
        let delta = self.last.map(|(r, ms)| {
            (
                reads.saturating_sub(r),
                read_ms.saturating_sub(ms).saturating_mul(1_000_000),
            )
        });
        self.last = Some((reads, read_ms));
        delta
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_deltas_from_the_stat_file() {
        let dir = std::env::temp_dir().join(format!("wb-diskstats-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("stat");
        let mut s = DiskStats {
            path: path.clone(),
            last: None,
        };
        std::fs::write(&path, "  100 0 800 50 7 0 56 3 0 10 53 0 0 0 0\\n").unwrap();
        assert_eq!(s.sample(), None, "first sample only sets the base");
        std::fs::write(&path, "  160 0 800 62 7 0 56 3 0 10 53 0 0 0 0\\n").unwrap();
        assert_eq!(s.sample(), Some((60, 12_000_000)));
        std::fs::write(&path, "garbage").unwrap();
        assert_eq!(s.sample(), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
