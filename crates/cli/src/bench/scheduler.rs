//! Switching the block scheduler (kyber, bfq, ...) of the device under a
//! directory for a run, and back.
//!
//! The device is found from the directory's `st_dev`:
//! `/sys/dev/block/MAJ:MIN` is the filesystem's block device (a loop
//! device for a filesystem on a loop image: its own queue, not the disk's
//! under the image); a partition's queue is its parent disk's. Switching
//! to bfq turns the kernel's wbt off on that queue, and switching away
//! turns it back on; the guard checks `wbt_lat_usec` after restoring and
//! puts it back too if it differs.

use super::cleanup;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A block device's request queue in sysfs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Queue {
    /// The device's name ("vda", "loop0").
    pub device: String,
    /// Its `queue` directory.
    pub dir: PathBuf,
}

impl Queue {
    fn scheduler_file(&self) -> PathBuf {
        self.dir.join("scheduler")
    }

    /// The scheduler in use and the ones available.
    pub fn schedulers(&self) -> Result<(Option<String>, Vec<String>), String> {
        let path = self.scheduler_file();
        let text =
            fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        Ok(parse_schedulers(&text))
    }
}

/// The request queue of the block device holding `dir`.
pub fn queue_of(dir: &Path) -> Result<Queue, String> {
    let dev = fs::metadata(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    queue_in(Path::new("/sys"), major, minor).ok_or_else(|| {
        format!(
            "{} is on device {major}:{minor}, which has no block queue with a scheduler in sysfs \
             (not a block device, or a stacked one such as device-mapper)",
            dir.display()
        )
    })
}

/// The queue of device `major:minor` under the sysfs root `sys` (a
/// partition's is its parent disk's).
fn queue_in(sys: &Path, major: u32, minor: u32) -> Option<Queue> {
    let node = fs::canonicalize(sys.join(format!("dev/block/{major}:{minor}"))).ok()?;
    let parent = node.parent().map(Path::to_path_buf);
    for base in std::iter::once(node).chain(parent) {
        let dir = base.join("queue");
        if dir.join("scheduler").is_file() {
            let device = base.file_name()?.to_string_lossy().into_owned();
            return Some(Queue { device, dir });
        }
    }
    None
}

/// Parses a queue's `scheduler` file: "none [mq-deadline] kyber bfq".
pub fn parse_schedulers(text: &str) -> (Option<String>, Vec<String>) {
    let mut current = None;
    let mut all = Vec::new();
    for word in text.split_whitespace() {
        match word.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
            Some(name) => {
                current = Some(name.to_string());
                all.push(name.to_string());
            }
            None => all.push(word.to_string()),
        }
    }
    (current, all)
}

fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// What to put back: the scheduler, and wbt_lat_usec if the queue has it.
#[derive(Clone, Debug)]
pub struct SchedulerSnapshot {
    queue: Queue,
    scheduler: String,
    wbt_lat_usec: Option<String>,
}

impl SchedulerSnapshot {
    fn take(queue: &Queue) -> Result<SchedulerSnapshot, String> {
        let (current, _) = queue.schedulers()?;
        let scheduler = current.ok_or_else(|| {
            format!(
                "{}: no scheduler marked in use",
                queue.scheduler_file().display()
            )
        })?;
        Ok(SchedulerSnapshot {
            queue: queue.clone(),
            scheduler,
            wbt_lat_usec: read_trimmed(&queue.dir.join("wbt_lat_usec")),
        })
    }

    /// Puts the scheduler back, then wbt_lat_usec if it changed.
    pub fn restore(&self) -> Result<(), String> {
        let path = self.queue.scheduler_file();
        let fix = format!("echo {} > {}", self.scheduler, path.display());
        fs::write(&path, &self.scheduler)
            .map_err(|e| format!("restoring {}: {e}; fix with: {fix}", path.display()))?;
        match self.queue.schedulers()? {
            (Some(now), _) if now == self.scheduler => {}
            (now, _) => {
                return Err(format!(
                    "{}: scheduler is {} after restoring; fix with: {fix}",
                    path.display(),
                    now.as_deref().unwrap_or("?")
                ))
            }
        }
        if let Some(wbt) = &self.wbt_lat_usec {
            let wbt_path = self.queue.dir.join("wbt_lat_usec");
            if read_trimmed(&wbt_path).as_ref() != Some(wbt) {
                fs::write(&wbt_path, wbt).map_err(|e| {
                    format!(
                        "restoring {} to {wbt}: {e}; fix with: echo {wbt} > {}",
                        wbt_path.display(),
                        wbt_path.display()
                    )
                })?;
            }
        }
        Ok(())
    }
}

impl cleanup::Snapshot for SchedulerSnapshot {
    fn restore(&self) -> Result<(), String> {
        SchedulerSnapshot::restore(self)
    }
}

/// The queue's scheduler switched for as long as this guard lives; the
/// previous one comes back when it is dropped (and on Ctrl-C, through the
/// cleanup registry).
pub type SchedulerGuard = cleanup::RestoreGuard<SchedulerSnapshot>;

impl cleanup::RestoreGuard<SchedulerSnapshot> {
    /// Switches `queue` to `scheduler` ("kyber", "bfq", ...).
    pub fn apply(queue: &Queue, scheduler: &str) -> Result<SchedulerGuard, String> {
        let snapshot = SchedulerSnapshot::take(queue)?;
        let id =
            cleanup::global().add_change(cleanup::Stage::Scheduler, Box::new(snapshot.clone()));
        // From here on, dropping the guard restores (also if the switch fails).
        let guard = cleanup::RestoreGuard::new(id, snapshot);
        let path = queue.scheduler_file();
        fs::write(&path, scheduler).map_err(|e| {
            format!(
                "switching {} to {scheduler}: {e} (is the {scheduler} scheduler built or \
                 loadable as a module?)",
                path.display()
            )
        })?;
        match queue.schedulers()? {
            (Some(now), _) if now == scheduler => Ok(guard),
            (now, _) => Err(format!(
                "{}: {} in use after switching to {scheduler}",
                path.display(),
                now.as_deref().unwrap_or("?")
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduler_lists_parse() {
        assert_eq!(
            parse_schedulers("none [mq-deadline] kyber bfq \n"),
            (
                Some("mq-deadline".into()),
                vec![
                    "none".to_string(),
                    "mq-deadline".into(),
                    "kyber".into(),
                    "bfq".into()
                ]
            )
        );
        assert_eq!(parse_schedulers("[none] \n").0.as_deref(), Some("none"));
        assert_eq!(parse_schedulers("").0, None);
    }

    /// A fake sysfs: a disk with a queue and a partition without one.
    fn fake_sys(tag: &str) -> PathBuf {
        let sys = std::env::temp_dir().join(format!("wb-sched-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&sys);
        let disk = sys.join("devices/virtio1/block/vda");
        fs::create_dir_all(disk.join("queue")).expect("queue dir");
        fs::create_dir_all(disk.join("vda1")).expect("partition dir");
        fs::write(
            disk.join("queue/scheduler"),
            "none [mq-deadline] kyber bfq\n",
        )
        .expect("file");
        fs::write(disk.join("queue/wbt_lat_usec"), "75000\n").expect("file");
        fs::create_dir_all(sys.join("dev/block")).expect("dev/block");
        std::os::unix::fs::symlink(disk.clone(), sys.join("dev/block/254:0")).expect("link");
        std::os::unix::fs::symlink(disk.join("vda1"), sys.join("dev/block/254:1")).expect("link");
        sys
    }

    #[test]
    fn a_partition_uses_its_disks_queue() {
        let sys = fake_sys("part");
        let disk = queue_in(&sys, 254, 0).expect("the disk's queue");
        let part = queue_in(&sys, 254, 1).expect("the partition's queue");
        assert_eq!(disk, part);
        assert_eq!(disk.device, "vda");
        assert!(queue_in(&sys, 7, 0).is_none());
        let _ = fs::remove_dir_all(&sys);
    }

    #[test]
    fn guard_and_registry_restore_the_real_scheduler() {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            wb_testkit::skip("switching a block scheduler needs root");
            return;
        }
        let queue = match queue_of(Path::new("/var/tmp")) {
            Ok(q) => q,
            Err(e) => {
                wb_testkit::skip(&e);
                return;
            }
        };
        let (before, available) = queue.schedulers().expect("read the scheduler");
        let Some(other) = ["kyber", "bfq", "mq-deadline", "none"]
            .into_iter()
            .find(|s| available.iter().any(|a| a == s) && before.as_deref() != Some(*s))
        else {
            wb_testkit::skip(&format!("{} offers no second scheduler", queue.device));
            return;
        };
        let now = || queue.schedulers().expect("read the scheduler").0;
        let guard = SchedulerGuard::apply(&queue, other).expect("switch");
        assert_eq!(now().as_deref(), Some(other));
        guard.restore().expect("restore");
        assert_eq!(now(), before);
        // What the Ctrl-C handler does while a guard is alive elsewhere.
        let mut registry = cleanup::Registry::new();
        registry.add_change(
            cleanup::Stage::Scheduler,
            Box::new(SchedulerSnapshot::take(&queue).expect("snapshot")),
        );
        fs::write(queue.scheduler_file(), other).expect("switch by hand");
        assert!(registry.undo_all().is_empty());
        assert_eq!(now(), before);
    }

    #[test]
    fn the_real_root_filesystem_has_a_queue_or_says_why() {
        match queue_of(Path::new("/")) {
            Ok(q) => assert!(q.dir.join("scheduler").is_file(), "{q:?}"),
            Err(e) => assert!(e.contains("no block queue"), "{e}"),
        }
    }
}
