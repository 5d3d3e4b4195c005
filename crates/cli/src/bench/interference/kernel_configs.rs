//! What the kernel configurations of `wb bench interference` change for
//! their runs, and putting it back: the tools people reach for instead of
//! a writeback engine.
//!
//! - `kernel-kyber` / `kernel-bfq`: the block scheduler of the device
//!   under the directory ([`crate::bench::scheduler`]);
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
//!   `blkio.throttle.write_bps_device` caps the device's writes
//!   ([`super::blkio`]).
//!
//! Every change is held by a guard registered for Ctrl-C
//! ([`crate::bench::cleanup`]); [`Applied::finish`] undoes them at the end
//! of a run and dropping an [`Applied`] on an error path does too.

use super::blkio::{blkio_target, BlkioGuard, BlkioTarget, BLKIO_ROOT};
use super::configs::BenchConfig;
use crate::bench::scheduler::{self, Queue, SchedulerGuard};
use crate::bench::sysctl::{self, DirtyLimitsGuard};
use std::fs;
use std::path::{Path, PathBuf};

/// kernel-dirty64m's limits: vm.dirty_bytes and vm.dirty_background_bytes.
pub const DIRTY64M_LIMITS: (u64, u64) = (64 << 20, 32 << 20);

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
pub fn tweaks(config: BenchConfig) -> Tweaks {
    let none = Tweaks::default();
    match config {
        BenchConfig::KernelKyber => Tweaks {
            scheduler: Some("kyber"),
            ..none
        },
        BenchConfig::KernelBfq => Tweaks {
            scheduler: Some("bfq"),
            ..none
        },
        BenchConfig::KernelBfqIdle => Tweaks {
            scheduler: Some("bfq"),
            idle_class: true,
            ..none
        },
        BenchConfig::KernelDirty64m => Tweaks {
            dirty_limits: Some(DIRTY64M_LIMITS),
            ..none
        },
        BenchConfig::KernelNocache => Tweaks {
            nocache: true,
            ..none
        },
        BenchConfig::KernelDirect => Tweaks {
            direct: true,
            ..none
        },
        BenchConfig::KernelBlkio => Tweaks {
            blkio: true,
            ..none
        },
        BenchConfig::Floor
        | BenchConfig::MountFloor
        | BenchConfig::Kernel
        | BenchConfig::KernelDontcache
        | BenchConfig::EngineWbtOff
        | BenchConfig::Engine
        | BenchConfig::EngineDontcache
        | BenchConfig::Mount => none,
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
    pub fn unavailable(&self, config: BenchConfig) -> Option<String> {
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
    pub fn apply(&self, config: BenchConfig, engine_limits: (u64, u64)) -> Result<Applied, String> {
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
            let (writes, removed) = cgroup.finish();
            seen = writes;
            if let Err(e) = removed {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn each_new_kernel_config_changes_what_its_name_says() {
        assert_eq!(tweaks(BenchConfig::KernelBfqIdle).scheduler, Some("bfq"));
        assert!(tweaks(BenchConfig::KernelBfqIdle).idle_class);
        assert!(!tweaks(BenchConfig::KernelBfq).idle_class);
        assert_eq!(
            tweaks(BenchConfig::KernelDirty64m).dirty_limits,
            Some((64 << 20, 32 << 20))
        );
        assert_eq!(tweaks(BenchConfig::KernelDirty64m).scheduler, None);
        assert!(tweaks(BenchConfig::KernelNocache).nocache);
        assert!(tweaks(BenchConfig::KernelDirect).direct);
        assert!(tweaks(BenchConfig::KernelBlkio).blkio);
        for c in [
            BenchConfig::Kernel,
            BenchConfig::Engine,
            BenchConfig::Floor,
            BenchConfig::Mount,
        ] {
            assert_eq!(tweaks(c), Tweaks::default(), "{c:?}");
        }
    }

    #[test]
    fn the_direct_writer_asks_fio_for_o_direct() {
        let args = crate::bench::fio::timed_writer_args(
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
