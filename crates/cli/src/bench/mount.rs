//! `wb mount` as a child of a benchmark: started on a fresh mountpoint,
//! waited for until the kernel shows the mount, stopped with SIGTERM (which
//! writes back all dirty data before the child exits).

use super::child::ChildGuard;
use super::cleanup::{global, Snapshot, Stage};
use super::BenchError;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a mount may take to appear (calibrating a new device takes a
/// few seconds).
const MOUNT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the child may take to write back and exit after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(600);
const POLL: Duration = Duration::from_millis(20);

/// A running `wb mount BACKING MOUNTPOINT`.
pub struct Mount {
    child: ChildGuard,
    mountpoint: PathBuf,
    log: PathBuf,
    registry_id: u64,
}

/// Whether `path` is a mountpoint now (from /proc/self/mountinfo).
pub fn is_mounted(path: &Path) -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let want = path.display().to_string();
    // Field 5 is the mountpoint; spaces in it are escaped as \040.
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|m| m.replace("\\040", " ") == want)
}

/// A mount to detach on Ctrl-C (the cleanup registry's [`Stage::Mount`]),
/// left by a `wb mount` child killed before it could unmount.
struct Detach(PathBuf);

impl Snapshot for Detach {
    fn restore(&self) -> Result<(), String> {
        detach(&self.0)
    }
}

/// Lazily unmounts `mountpoint` if it is still mounted (a killed server
/// leaves a dead mount behind).
pub fn detach(mountpoint: &Path) -> Result<(), String> {
    if !is_mounted(mountpoint) {
        return Ok(());
    }
    let status = Command::new("umount")
        .arg("-l")
        .arg(mountpoint)
        .status()
        .map_err(|e| format!("umount -l {}: {e}", mountpoint.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "umount -l {} failed ({status})",
            mountpoint.display()
        ))
    }
}

impl Mount {
    /// Mounts `backing` through the engine with `sets` (KNOB=VALUE) on a
    /// new directory under the system's temporary directory.
    pub fn start(backing: &Path, sets: &[(String, String)]) -> Result<Mount, BenchError> {
        Mount::start_args(backing, sets, &[])
    }

    /// As `start`, with more arguments for `wb mount` (`--uring on`).
    pub fn start_args(
        backing: &Path,
        sets: &[(String, String)],
        args: &[&str],
    ) -> Result<Mount, BenchError> {
        // This very binary, even if a rebuild has replaced the file since it
        // started (current_exe() would name the new file, or none).
        let exe = PathBuf::from("/proc/self/exe");
        let base = std::env::temp_dir().join(format!("wb-bench-mount-{}", std::process::id()));
        let mountpoint = base.join("mnt");
        std::fs::create_dir_all(&mountpoint)
            .map_err(|e| BenchError::failed(mountpoint.display(), e))?;
        let log = base.join("mount.log");
        let log_file =
            std::fs::File::create(&log).map_err(|e| BenchError::failed(log.display(), e))?;
        let log_err = log_file
            .try_clone()
            .map_err(|e| BenchError::failed(log.display(), e))?;
        let mut cmd = Command::new(exe);
        cmd.arg("mount").arg(backing).arg(&mountpoint);
        for (knob, value) in sets {
            cmd.arg("--set").arg(format!("{knob}={value}"));
        }
        cmd.args(args);
        cmd.stdin(Stdio::null()).stdout(log_file).stderr(log_err);
        let registry_id = global().add_change(Stage::Mount, Box::new(Detach(mountpoint.clone())));
        let child =
            ChildGuard::spawn(&mut cmd).map_err(|e| BenchError::failed("starting wb mount", e))?;
        let mut mount = Mount {
            child,
            mountpoint,
            log,
            registry_id,
        };
        mount.wait_mounted()?;
        Ok(mount)
    }

    fn wait_mounted(&mut self) -> Result<(), BenchError> {
        let deadline = Instant::now() + MOUNT_TIMEOUT;
        while !is_mounted(&self.mountpoint) {
            let exited = self
                .child
                .try_wait()
                .map_err(|e| BenchError::failed("waiting for wb mount", e))?;
            if let Some(status) = exited {
                return Err(BenchError::Failed(format!(
                    "wb mount exited ({status}) before mounting: {}",
                    self.log_text()
                )));
            }
            if Instant::now() > deadline {
                return Err(BenchError::Failed(format!(
                    "wb mount did not mount {} within {} s: {}",
                    self.mountpoint.display(),
                    MOUNT_TIMEOUT.as_secs(),
                    self.log_text()
                )));
            }
            std::thread::sleep(POLL);
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.mountpoint
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    /// Stops the server with SIGTERM and waits for it to write back and
    /// exit; returns how long that took.
    pub fn stop(mut self) -> Result<Duration, BenchError> {
        let started = Instant::now();
        // SAFETY: kill(2) on the pid of our own child, not yet reaped
        // (ChildGuard reaps it only in try_wait/wait below).
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        loop {
            let exited = self
                .child
                .try_wait()
                .map_err(|e| BenchError::failed("waiting for wb mount", e))?;
            match exited {
                Some(status) if status.success() => break,
                Some(status) => {
                    return Err(BenchError::Failed(format!(
                        "wb mount failed ({status}): {}",
                        self.log_text()
                    )))
                }
                None if started.elapsed() > STOP_TIMEOUT => {
                    return Err(BenchError::Failed(format!(
                        "wb mount did not exit within {} s of SIGTERM",
                        STOP_TIMEOUT.as_secs()
                    )))
                }
                None => std::thread::sleep(POLL),
            }
        }
        Ok(started.elapsed())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        // The child guard kills a server still running; a dead server's
        // mount is detached here.
        if let Err(e) = detach(&self.mountpoint) {
            eprintln!("wb bench: {e}");
        }
        global().remove(self.registry_id);
        // Never a recursive removal: were the mount still there, it would
        // reach into the backing directory.
        let _ = std::fs::remove_file(&self.log);
        let _ = std::fs::remove_dir(&self.mountpoint);
        if let Some(base) = self.mountpoint.parent() {
            let _ = std::fs::remove_dir(base);
        }
    }
}
