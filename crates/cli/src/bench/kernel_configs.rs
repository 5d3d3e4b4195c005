//! What the kernel configurations of `wb bench interference` change for
//! their runs, and putting it back: the tools people reach for instead of
//! a writeback engine.
//!
//! - `kernel-kyber` / `kernel-bfq`: the block scheduler of the device
//!   under the directory ([`super::scheduler`]);
//! - `kernel-bfq-idle`: bfq, the fio writer under `ionice -c3` (idle
//!   class). Buffered writeback is issued by the kernel's flusher, not by
//!   the writer, so the class may not reach most of its writes;
//! - `kernel-dirty64m`: vm.dirty_bytes = 64 MiB and
//!   vm.dirty_background_bytes = 32 MiB instead of the engine's limits;
//! - `kernel-nocache`: the fio writer under `nocache` (an LD_PRELOAD
//!   wrapper that drops the pages of the files it closes with
//!   fadvise(DONTNEED); Debian package nocache);
//! - `kernel-direct`: the fio writer with O_DIRECT writes;
//! - `kernel-blkio`: the fio writer in a cgroup v1 blkio cgroup whose
//!   `blkio.throttle.write_bps_device` caps the device's writes. v1
//!   throttling sees only the writes a task issues itself: buffered
//!   writeback by the flusher is charged to the root cgroup.
//!
//! Every change is held by a guard registered for Ctrl-C
//! ([`super::cleanup`]); [`Applied::finish`] undoes them at the end of a
//! run and dropping an [`Applied`] on an error path does too.

use super::cleanup::{self, RestoreGuard};
use super::configs::Config;
use super::human_bytes;
use super::scheduler::{self, Queue, SchedulerGuard};
use super::sysctl::{self, DirtyLimitsGuard};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// kernel-dirty64m's limits: vm.dirty_bytes and vm.dirty_background_bytes.
pub const DIRTY64M_LIMITS: (u64, u64) = (64 << 20, 32 << 20);
/// Where the cgroup v1 blkio hierarchy is mounted.
pub const BLKIO_ROOT: &str = "/sys/fs/cgroup/blkio";
/// Longest wait for a blkio cgroup's processes to go before removing it.
const CGROUP_EMPTY_WAIT: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(20);

/// What a configuration changes for its run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tweaks {
    /// The block scheduler to switch to.
    pub scheduler: Option<&'static str>,
    /// vm.dirty_bytes / vm.dirty_background_bytes instead of the engine's.
    pub dirty_limits: Option<(u64, u64)>,
    /// The fio writer in the idle I/O class (`ionice -c3`).
    pub idle_class: bool,
    /// The fio writer under `nocache`.
    pub nocache: bool,
    /// The fio writer with O_DIRECT writes.
    pub direct: bool,
    /// The fio writer in a blkio cgroup with a write limit.
    pub blkio: bool,
}

/// What `config` changes (nothing for the floor and the engine's).
pub fn tweaks(config: Config) -> Tweaks {
    let none = Tweaks::default();
    match config {
        Config::KernelKyber => Tweaks {
            scheduler: Some("kyber"),
            ..none
        },
        Config::KernelBfq => Tweaks {
            scheduler: Some("bfq"),
            ..none
        },
        Config::KernelBfqIdle => Tweaks {
            scheduler: Some("bfq"),
            idle_class: true,
            ..none
        },
        Config::KernelDirty64m => Tweaks {
            dirty_limits: Some(DIRTY64M_LIMITS),
            ..none
        },
        Config::KernelNocache => Tweaks {
            nocache: true,
            ..none
        },
        Config::KernelDirect => Tweaks {
            direct: true,
            ..none
        },
        Config::KernelBlkio => Tweaks {
            blkio: true,
            ..none
        },
        Config::Floor
        | Config::MountFloor
        | Config::Kernel
        | Config::KernelDontcache
        | Config::EngineWbtOff
        | Config::Engine
        | Config::EngineDontcache
        | Config::Mount => none,
    }
}

/// What the kernel configurations need of the machine, looked up once.
pub struct Machine {
    /// The request queue of the device under the bench directory.
    queue: Result<Queue, String>,
    /// The blkio hierarchy and the device's MAJ:MIN, for kernel-blkio.
    blkio: Result<BlkioTarget, String>,
    /// kernel-blkio's write limit, bytes per second.
    write_limit: u64,
}

/// Where kernel-blkio makes its cgroup, and for which device.
#[derive(Clone, Debug, PartialEq, Eq)]
struct BlkioTarget {
    root: PathBuf,
    /// "MAJ:MIN" of the whole disk (the throttle takes no partitions).
    device: String,
}

impl Machine {
    /// Looks at the device under `dir` and at the blkio hierarchy.
    pub fn probe(dir: &Path, write_limit: u64) -> Machine {
        let queue = scheduler::queue_of(dir);
        let blkio = blkio_target(Path::new(BLKIO_ROOT), queue.as_ref());
        Machine {
            queue,
            blkio,
            write_limit,
        }
    }

    /// The request queue of the device under the directory, if it has one.
    pub fn queue(&self) -> Option<&Queue> {
        self.queue.as_ref().ok()
    }

    /// Why `config` cannot run on this machine, if it cannot.
    pub fn unavailable(&self, config: Config) -> Option<String> {
        let t = tweaks(config);
        if let Some(name) = t.scheduler {
            let queue = match &self.queue {
                Ok(q) => q,
                Err(e) => return Some(e.clone()),
            };
            let available = queue.schedulers().map(|(_, all)| all).unwrap_or_default();
            if !available.iter().any(|a| a == name) {
                return Some(format!(
                    "{} does not offer the {name} scheduler (offers: {})",
                    queue.device,
                    available.join(" ")
                ));
            }
        }
        if t.idle_class && find_program("ionice").is_none() {
            return Some("the ionice command (util-linux) is not installed".into());
        }
        if t.nocache && find_program("nocache").is_none() {
            return Some(
                "the nocache command is not installed (Debian package nocache; \
                 ./scripts/setup.sh installs it)"
                    .into(),
            );
        }
        if t.blkio {
            if let Err(e) = &self.blkio {
                return Some(e.clone());
            }
        }
        None
    }

    /// Makes the changes of `config` for a run: the kernel's dirty limits
    /// (the engine's, `engine_limits`, unless the configuration has its
    /// own), its scheduler, its cgroup; and says how to start its writer.
    pub fn apply(&self, config: Config, engine_limits: (u64, u64)) -> Result<Applied, String> {
        let t = tweaks(config);
        let (dirty, background) = t.dirty_limits.unwrap_or(engine_limits);
        let limits = DirtyLimitsGuard::apply(Path::new(sysctl::PROC_VM), dirty, background)?;
        let scheduler = match t.scheduler {
            Some(name) => {
                let queue = self.queue.as_ref().map_err(|e| {
                    format!("{}: no block queue to switch to {name}: {e}", config.name())
                })?;
                Some(SchedulerGuard::apply(queue, name)?)
            }
            None => None,
        };
        let cgroup = match (&self.blkio, t.blkio) {
            (Ok(target), true) => Some(BlkioGuard::create(target, self.write_limit)?),
            (Err(e), true) => return Err(format!("{}: {e}", config.name())),
            (_, false) => None,
        };
        let mut wrapper: Vec<String> = Vec::new();
        if let Some(c) = &cgroup {
            wrapper.extend(c.enter_command());
        }
        if t.idle_class {
            wrapper.extend(["ionice".to_string(), "-c3".to_string()]);
        }
        if t.nocache {
            wrapper.push("nocache".into());
        }
        Ok(Applied {
            cgroup,
            _scheduler: scheduler,
            _limits: limits,
            wrapper,
            direct: t.direct,
        })
    }
}

/// The changes of one run, undone by [`Applied::finish`] or when dropped
/// (the cgroup first, then the scheduler, then the dirty limits).
pub struct Applied {
    cgroup: Option<BlkioGuard>,
    _scheduler: Option<SchedulerGuard>,
    _limits: DirtyLimitsGuard,
    /// The command the fio writer runs under (empty: none).
    pub wrapper: Vec<String>,
    direct: bool,
}

impl Applied {
    /// The writer's fio arguments `args` as this configuration runs them.
    pub fn writer_args(&self, args: Vec<String>) -> Vec<String> {
        direct_args(args, self.direct)
    }

    /// Undoes everything, once the writer has ended. Returns a line on
    /// what the cgroup saw (kernel-blkio), for the report.
    pub fn finish(mut self) -> Result<Option<String>, String> {
        let mut errors = Vec::new();
        let mut seen = None;
        if let Some(cgroup) = self.cgroup.take() {
            seen = cgroup.cgroup.describe_writes(cgroup.limit);
            if let Err(e) = cgroup.guard.restore() {
                errors.push(e);
            }
        }
        let Applied {
            _scheduler,
            _limits,
            ..
        } = self;
        if let Some(s) = _scheduler {
            if let Err(e) = s.restore() {
                errors.push(e);
            }
        }
        if let Err(e) = _limits.restore() {
            errors.push(e);
        }
        if errors.is_empty() {
            Ok(seen)
        } else {
            Err(errors.join("; "))
        }
    }
}

/// fio arguments `args` with O_DIRECT writes if `direct` (same block size).
fn direct_args(args: Vec<String>, direct: bool) -> Vec<String> {
    args.into_iter()
        .map(|a| match a.as_str() {
            "--direct=0" if direct => "--direct=1".into(),
            _ => a,
        })
        .collect()
}

/// `name` on the PATH, if it is there.
fn find_program(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// The blkio hierarchy under `root` and the MAJ:MIN of the disk of `queue`.
fn blkio_target(root: &Path, queue: Result<&Queue, &String>) -> Result<BlkioTarget, String> {
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
            human_bytes(bytes),
            self.device,
            human_bytes(limit)
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
    fn create(target: &BlkioTarget, limit: u64) -> Result<BlkioGuard, String> {
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

    /// A command prefix that moves itself into the cgroup, then execs the
    /// rest of its arguments (fio, whose job processes then start there).
    fn enter_command(&self) -> Vec<String> {
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
    fn each_new_kernel_config_changes_what_its_name_says() {
        assert_eq!(tweaks(Config::KernelBfqIdle).scheduler, Some("bfq"));
        assert!(tweaks(Config::KernelBfqIdle).idle_class);
        assert!(!tweaks(Config::KernelBfq).idle_class);
        assert_eq!(
            tweaks(Config::KernelDirty64m).dirty_limits,
            Some((64 << 20, 32 << 20))
        );
        assert_eq!(tweaks(Config::KernelDirty64m).scheduler, None);
        assert!(tweaks(Config::KernelNocache).nocache);
        assert!(tweaks(Config::KernelDirect).direct);
        assert!(tweaks(Config::KernelBlkio).blkio);
        for c in [Config::Kernel, Config::Engine, Config::Floor, Config::Mount] {
            assert_eq!(tweaks(c), Tweaks::default(), "{c:?}");
        }
    }

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

    #[test]
    fn the_direct_writer_asks_fio_for_o_direct() {
        let args = super::super::fio::timed_writer_args(
            Path::new("/tmp/w"),
            1 << 30,
            Duration::from_secs(3),
        );
        let direct = direct_args(args.clone(), true);
        assert!(direct.contains(&"--direct=1".to_string()), "{direct:?}");
        assert!(!direct.contains(&"--direct=0".to_string()), "{direct:?}");
        assert!(direct.contains(&"--bs=1M".to_string()), "{direct:?}");
        assert_eq!(direct_args(args.clone(), false), args);
    }
}
