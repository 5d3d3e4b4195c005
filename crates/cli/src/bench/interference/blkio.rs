//! kernel-blkio's cgroup: a cgroup v1 blkio cgroup whose
//! `blkio.throttle.write_bps_device` caps the writes of the device under
//! the bench directory, made for a run and removed after it (also on
//! Ctrl-C: it is registered in [`cleanup`]). v1 throttling sees only the
//! writes a task issues itself: buffered writeback by the flusher is
//! charged to the root cgroup.

use crate::bench::cleanup::{self, RestoreGuard};
use crate::bench::scheduler::Queue;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use wb_engine::units::format_bytes;

/// Where the cgroup v1 blkio hierarchy is mounted.
pub const BLKIO_ROOT: &str = "/sys/fs/cgroup/blkio";
/// Longest wait for a blkio cgroup's processes to go before removing it.
const CGROUP_EMPTY_WAIT: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(20);

/// Where kernel-blkio makes its cgroup, and for which device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlkioTarget {
    root: PathBuf,
    /// "MAJ:MIN" of the whole disk (the throttle takes no partitions).
    device: String,
}

/// The blkio hierarchy under `root` and the MAJ:MIN of the disk of `queue`.
pub fn blkio_target(root: &Path, queue: Result<&Queue, &String>) -> Result<BlkioTarget, String> {
    if !root.join("blkio.throttle.write_bps_device").is_file() {
        return Err(format!(
            "no cgroup v1 blkio hierarchy with throttling at {} (a cgroup v2 machine \
             has io.max instead)",
            root.display()
        ));
    }
    let queue = queue.map_err(Clone::clone)?;
    let dev_file = queue
        .dir
        .parent()
        .map(|disk| disk.join("dev"))
        .unwrap_or_else(|| queue.dir.join("../dev"));
    let device = fs::read_to_string(&dev_file)
        .map_err(|e| format!("reading {}: {e}", dev_file.display()))?
        .trim()
        .to_string();
    if !device.contains(':') {
        return Err(format!("{}: '{device}' is not MAJ:MIN", dev_file.display()));
    }
    Ok(BlkioTarget {
        root: root.to_path_buf(),
        device,
    })
}

/// A blkio cgroup this run made: removed on restore, after killing what
/// is still in it (only the processes this run put there, and their
/// children).
#[derive(Clone, Debug)]
pub struct BlkioCgroup {
    dir: PathBuf,
    /// "MAJ:MIN" of the throttled device.
    device: String,
}

impl BlkioCgroup {
    fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// The process ids in the cgroup now.
    fn pids(&self) -> Vec<libc::pid_t> {
        fs::read_to_string(self.procs_file())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Bytes written to the device by the cgroup's tasks, as the throttle
    /// counted them (`blkio.throttle.io_service_bytes`: "MAJ:MIN Write N").
    fn written_bytes(&self) -> Option<u64> {
        let text = fs::read_to_string(self.dir.join("blkio.throttle.io_service_bytes")).ok()?;
        parse_service_bytes(&text, &self.device, "Write")
    }

    /// A line on how much the throttle saw, for the report.
    fn describe_writes(&self, limit: u64) -> Option<String> {
        let bytes = self.written_bytes()?;
        Some(format!(
            "{} of writes to {} charged to the blkio cgroup (limit {}/s); the rest \
             of the writer's data was written back by the flusher, outside it",
            format_bytes(bytes),
            self.device,
            format_bytes(limit)
        ))
    }

    /// Removes the cgroup: kills what is left in it (waiting at most
    /// CGROUP_EMPTY_WAIT), then rmdir.
    pub fn restore(&self) -> Result<(), String> {
        let deadline = Instant::now() + CGROUP_EMPTY_WAIT;
        let fix = format!("rmdir {}", self.dir.display());
        loop {
            if !self.dir.exists() {
                return Ok(());
            }
            for pid in self.pids() {
                // SAFETY: kill(2) on a process id read from our own cgroup,
                // which holds only the writer this run started and its children.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            match fs::remove_dir(&self.dir) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) if Instant::now() >= deadline => {
                    return Err(format!(
                        "removing the blkio cgroup {}: {e} (processes left: {:?}); fix with: {fix}",
                        self.dir.display(),
                        self.pids()
                    ))
                }
                Err(_) => std::thread::sleep(POLL),
            }
        }
    }
}

impl cleanup::Snapshot for BlkioCgroup {
    fn restore(&self) -> Result<(), String> {
        BlkioCgroup::restore(self)
    }
}

/// A blkio cgroup for as long as this guard lives.
pub struct BlkioGuard {
    guard: RestoreGuard<BlkioCgroup>,
    cgroup: BlkioCgroup,
    limit: u64,
}

impl BlkioGuard {
    /// Makes `wb-bench-PID` under the hierarchy with a write limit of
    /// `limit` bytes a second on the target's device.
    pub fn create(target: &BlkioTarget, limit: u64) -> Result<BlkioGuard, String> {
        let cgroup = BlkioCgroup {
            dir: target.root.join(format!("wb-bench-{}", std::process::id())),
            device: target.device.clone(),
        };
        let id = cleanup::global().add_change(cleanup::Stage::Cgroup, Box::new(cgroup.clone()));
        // From here on, dropping the guard removes the cgroup (also if a
        // step below fails).
        let guard = BlkioGuard {
            guard: RestoreGuard::new(id, cgroup.clone()),
            cgroup: cgroup.clone(),
            limit,
        };
        match fs::create_dir(&cgroup.dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(format!(
                    "creating the blkio cgroup {}: {e}",
                    cgroup.dir.display()
                ))
            }
            _ => {}
        }
        let file = cgroup.dir.join("blkio.throttle.write_bps_device");
        let rule = format!("{} {limit}", target.device);
        fs::write(&file, &rule)
            .map_err(|e| format!("writing '{rule}' to {}: {e}", file.display()))?;
        Ok(guard)
    }

    /// Removes the cgroup, once the writer has ended; returns a line on
    /// what the throttle saw (for the report) and how the removal went.
    pub fn finish(self) -> (Option<String>, Result<(), String>) {
        let seen = self.cgroup.describe_writes(self.limit);
        (seen, self.guard.restore())
    }

    /// A command prefix that moves itself into the cgroup, then execs the
    /// rest of its arguments (fio, whose job processes then start there).
    pub fn enter_command(&self) -> Vec<String> {
        vec![
            "sh".into(),
            "-c".into(),
            "echo $$ > \"$0\" && exec \"$@\"".into(),
            self.cgroup.procs_file().display().to_string(),
        ]
    }
}

/// The value of the `op` line ("Write") of `device` in a blkio
/// `io_service_bytes` file.
fn parse_service_bytes(text: &str, device: &str, op: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let (d, o, n) = (fields.next()?, fields.next()?, fields.next()?);
        (d == device && o == op).then(|| n.parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_bytes_are_read_for_the_device_and_op() {
        let text = "7:0 Read 4096\n7:0 Write 1048576\n7:0 Sync 0\n8:0 Write 9\nTotal 1052672\n";
        assert_eq!(parse_service_bytes(text, "7:0", "Write"), Some(1 << 20));
        assert_eq!(parse_service_bytes(text, "8:0", "Write"), Some(9));
        assert_eq!(parse_service_bytes(text, "7:1", "Write"), None);
        assert_eq!(parse_service_bytes("Total 0\n", "7:0", "Write"), None);
    }

    /// A fake hierarchy and sysfs disk in a temp directory.
    fn fake(tag: &str, with_throttle: bool) -> (PathBuf, Queue) {
        let base = std::env::temp_dir().join(format!("wb-blkio-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        let root = base.join("blkio");
        fs::create_dir_all(&root).expect("root");
        if with_throttle {
            fs::write(root.join("blkio.throttle.write_bps_device"), "").expect("file");
        }
        let disk = base.join("block/loop0");
        fs::create_dir_all(disk.join("queue")).expect("queue");
        fs::write(disk.join("dev"), "7:0\n").expect("dev");
        let queue = Queue {
            device: "loop0".into(),
            dir: disk.join("queue"),
        };
        (base, queue)
    }

    #[test]
    fn the_blkio_target_is_the_disks_maj_min_or_says_why_not() {
        let (base, queue) = fake("target", true);
        let target = blkio_target(&base.join("blkio"), Ok(&queue)).expect("target");
        assert_eq!(target.device, "7:0");
        let no_queue = "no block queue".to_string();
        let err = blkio_target(&base.join("blkio"), Err(&no_queue)).expect_err("no queue");
        assert_eq!(err, no_queue);
        let (v2, queue) = fake("v2", false);
        let err = blkio_target(&v2.join("blkio"), Ok(&queue)).expect_err("no throttle");
        assert!(err.contains("no cgroup v1 blkio hierarchy"), "{err}");
        let _ = fs::remove_dir_all(&base);
        let _ = fs::remove_dir_all(&v2);
    }

    #[test]
    fn a_cgroup_is_made_with_its_limit_and_removed_by_the_registry() {
        // A plain directory stands in for the hierarchy: rmdir of the
        // cgroup works once the files the kernel would provide are gone.
        let (base, queue) = fake("guard", true);
        let target = blkio_target(&base.join("blkio"), Ok(&queue)).expect("target");
        let guard = BlkioGuard::create(&target, 200 << 20).expect("create");
        let dir = guard.cgroup.dir.clone();
        let rule = fs::read_to_string(dir.join("blkio.throttle.write_bps_device")).expect("rule");
        assert_eq!(rule, format!("7:0 {}", 200u64 << 20));
        let enter = guard.enter_command();
        assert_eq!(enter[0], "sh");
        assert!(enter[3].ends_with("cgroup.procs"), "{enter:?}");
        fs::remove_file(dir.join("blkio.throttle.write_bps_device")).expect("rm rule");
        // What the Ctrl-C handler does while the guard is alive elsewhere.
        let mut registry = cleanup::Registry::new();
        registry.add_change(cleanup::Stage::Cgroup, Box::new(guard.cgroup.clone()));
        assert!(registry.undo_all().is_empty());
        assert!(!dir.exists());
        drop(guard); // already gone: nothing to do, no error
        let _ = fs::remove_dir_all(&base);
    }
}
