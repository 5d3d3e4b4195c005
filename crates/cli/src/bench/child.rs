//! The child processes a benchmark starts: each in a process group of
//! its own, registered for Ctrl-C (cleanup.rs), and killed with all it
//! started when its guard drops.

use super::cleanup::{global, kill_group};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};

/// A child process this run started, in a process group of its own;
/// killed with all it started (and reaped) when dropped while still
/// running.
pub struct ChildGuard {
    id: u64,
    child: Child,
    reaped: bool,
}

impl ChildGuard {
    pub fn spawn(command: &mut Command) -> std::io::Result<ChildGuard> {
        // Hold the registry while spawning so a Ctrl-C cannot slip between
        // the spawn and the registration.
        let mut registry = global();
        let child = command.process_group(0).spawn()?;
        let id = registry.add_child(child.id());
        Ok(ChildGuard {
            id,
            child,
            reaped: false,
        })
    }

    /// The exit status if the child has ended (non-blocking).
    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        let status = self.child.try_wait()?;
        if status.is_some() {
            self.forget();
        }
        Ok(status)
    }

    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the child to end.
    pub fn wait(&mut self) -> std::io::Result<ExitStatus> {
        let status = self.child.wait()?;
        self.forget();
        Ok(status)
    }

    fn forget(&mut self) {
        if !self.reaped {
            self.reaped = true;
            global().remove(self.id);
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if !self.reaped {
            kill_group(self.child.id());
            let _ = self.child.wait();
            self.forget();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_is_killed_on_drop() {
        let mut cmd = Command::new("sleep");
        cmd.arg("60");
        let guard = ChildGuard::spawn(&mut cmd).expect("sleep runs");
        let pid = guard.child.id() as libc::pid_t;
        drop(guard);
        // SAFETY: signal 0 only checks whether the pid exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        assert!(!alive, "child {pid} survived its guard");
    }

    #[test]
    fn what_a_child_started_is_killed_with_it() {
        let pid_file =
            std::env::temp_dir().join(format!("wb-bench-grandchild-{}", std::process::id()));
        let script = format!("sleep 600 & echo $! > {}; wait", pid_file.display());
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(&script);
        let guard = ChildGuard::spawn(&mut cmd).expect("sh runs");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let grandchild = loop {
            let text = std::fs::read_to_string(&pid_file).unwrap_or_default();
            if let Ok(pid) = text.trim().parse::<u32>() {
                break pid;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "sh never started its sleep"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        let _ = std::fs::remove_file(&pid_file);
        drop(guard);
        // Killed, it is reaped by init: its /proc entry goes, or shows a
        // zombie until then.
        let stat = format!("/proc/{grandchild}/stat");
        let gone = || {
            std::fs::read_to_string(&stat).map_or(true, |s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            })
        };
        while !gone() {
            assert!(
                std::time::Instant::now() < deadline,
                "the grandchild {grandchild} survived its group's guard"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}
