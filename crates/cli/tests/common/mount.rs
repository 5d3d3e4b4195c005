//! Running `wb mount` in tests: a temporary tree, a mount started as a
//! child process and always unmounted (a Drop guard: SIGTERM, then `umount
//! -l`), and what the tests that use one share. (Tests of what a mount
//! serves mount in-process instead: crates/fuse/tests/common.)

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

pub const WB: &str = env!("CARGO_BIN_EXE_wb");
/// How long a mount may take to come up (no calibration; a fresh cache).
pub const MOUNT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `wb mount` may take to write everything back and exit.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(120);
/// Cache budget for the tests: small enough that large writes are throttled.
pub const TEST_MEMORY: &str = "memory=256MiB";

// Not every test binary uses every helper.
#[allow(unused_imports)]
pub use wb_testkit::mount_env::{is_mounted, pattern, run, serial, skip_reason, TempRoot};

/// A running `wb mount`.
pub struct Mount {
    pub child: Option<Child>,
    pub backing: PathBuf,
    pub mnt: PathBuf,
    pub stderr: Receiver<String>,
    /// The mount's first line ("wb: serving ...").
    pub serving: String,
}

impl Mount {
    pub fn start(backing: &Path, mnt: &Path, extra: &[&str]) -> Mount {
        let data = backing
            .parent()
            .expect("backing has a parent")
            .join("wb-data");
        let mut cmd = Command::new(WB);
        cmd.arg("mount")
            .arg(backing)
            .arg(mnt)
            .args(["--no-calibrate", "--set", TEST_MEMORY, "--data-dir"])
            .arg(&data)
            .args(extra);
        Mount::spawn(cmd, backing, mnt)
    }

    /// Starts `cmd`, a `wb mount BACKING MNT ...` (perhaps wrapped, as in
    /// a cgroup), with its output piped, and waits (bounded) for its
    /// "serving" line.
    pub fn spawn(mut cmd: Command, backing: &Path, mnt: &Path) -> Mount {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn wb mount");
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let (err_tx, err_rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = err_tx.send(line);
            }
        });
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut mount = Mount {
            child: Some(child),
            backing: backing.to_path_buf(),
            mnt: mnt.to_path_buf(),
            stderr: err_rx,
            serving: String::new(),
        };
        let line = rx.recv_timeout(MOUNT_TIMEOUT).unwrap_or_else(|_| {
            let err = mount.drain_stderr();
            panic!("wb mount did not report serving within {MOUNT_TIMEOUT:?}; stderr:\n{err}")
        });
        assert!(
            line.starts_with("wb: serving "),
            "unexpected first line: {line}"
        );
        // `wb mount` picks FUSE over io_uring when the kernel has it on
        // (scripts/test.sh runs these tests both ways).
        let uring = fs::read_to_string("/sys/module/fuse/parameters/enable_uring")
            .is_ok_and(|v| v.trim() == "Y");
        let transport = if uring { "io_uring" } else { "/dev/fuse" };
        assert!(
            line.ends_with(&format!("requests over {transport})")),
            "not over {transport}: {line}"
        );
        mount.serving = line;
        assert!(
            is_mounted(mnt),
            "{} is not in /proc/self/mountinfo",
            mnt.display()
        );
        mount
    }

    /// `.writeback/stats` as name -> value.
    pub fn stats(&self) -> std::collections::BTreeMap<String, u64> {
        let text = fs::read_to_string(self.mnt.join(".writeback/stats")).expect("read the stats");
        text.lines()
            .filter_map(|l| l.split_once(' '))
            .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
            .collect()
    }

    /// One line of `.writeback/stats`.
    pub fn stat(&self, name: &str) -> u64 {
        *self
            .stats()
            .get(name)
            .unwrap_or_else(|| panic!("no {name} in .writeback/stats"))
    }

    /// Whether `wb mount` still runs.
    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// `umount`, then wait (bounded) for wb to write back and exit;
    /// returns its status and stderr.
    pub fn unmount(mut self) -> (ExitStatus, String) {
        let status = Command::new("umount")
            .arg(&self.mnt)
            .status()
            .expect("run umount");
        assert!(status.success(), "umount failed");
        let mut child = self.child.take().expect("running");
        let status = wait_bounded(&mut child, EXIT_TIMEOUT).expect("wb exits after umount");
        (status, self.drain_stderr())
    }

    pub fn drain_stderr(&self) -> String {
        self.stderr.try_iter().collect::<Vec<_>>().join("\n")
    }

    /// SIGTERM, then wait (bounded) for the exit; returns the status and stderr.
    pub fn stop(mut self) -> (ExitStatus, String) {
        let status = self.terminate().expect("wb mount exits after SIGTERM");
        let err = self.drain_stderr();
        (status, err)
    }

    pub fn terminate(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        wait_bounded(&mut child, EXIT_TIMEOUT)
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: as in terminate.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            if wait_bounded(&mut child, EXIT_TIMEOUT).is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if is_mounted(&self.mnt) {
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        }
    }
}

pub fn wait_bounded(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}
