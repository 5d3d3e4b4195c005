//! What the tests of a mount share, whether they start `wb mount` as a
//! child process (crates/cli/tests) or mount in their own process
//! (crates/fuse/tests): one mount at a time, why a mount cannot be tested
//! here, a temporary tree removed on drop, whether a path is mounted,
//! running a tool, and data that can be made again.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

static SERIAL: Mutex<()> = Mutex::new(());

/// One mount at a time in this test binary: held for the whole test
/// (the tests share two cores and one disk).
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Why a mount cannot be tested here, if it cannot: not root, no
/// /dev/fuse, or (`needs_fio`) no fio. The caller skips with it
/// ([`crate::skip`]: a failure under CI).
pub fn skip_reason(needs_fio: bool) -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse is missing".into());
    }
    if needs_fio && Command::new("fio").arg("--version").output().is_err() {
        return Some("fio is not installed".into());
    }
    None
}

/// A temporary directory tree, removed on drop.
pub struct TempRoot(pub PathBuf);

impl TempRoot {
    /// Under /tmp.
    pub fn new(name: &str) -> TempRoot {
        TempRoot::new_in(Path::new("/tmp"), name)
    }

    /// Under `base` (/var/tmp: a disk where /tmp may not be).
    pub fn new_in(base: &Path, name: &str) -> TempRoot {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let root = base.join(format!("wb-mount-{name}-{}-{nanos}", std::process::id()));
        fs::create_dir_all(&root).expect("create temp root");
        TempRoot(root)
    }

    /// `rel` under the root, made.
    pub fn dir(&self, rel: &str) -> PathBuf {
        let p = self.0.join(rel);
        fs::create_dir_all(&p).expect("create temp dir");
        p
    }
}

impl Drop for TempRoot {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Whether `mnt` is a mount point of this process's mount namespace.
pub fn is_mounted(mnt: &Path) -> bool {
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let want = mnt.to_string_lossy();
    info.lines()
        .any(|l| l.split(' ').nth(4) == Some(want.as_ref()))
}

/// Runs `cmd`; its stdout, or a failure with its output.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run command");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Deterministic pseudo-random bytes, so content can be re-made.
pub fn pattern(seed: u64, buf: &mut [u8]) {
    use rand_xoshiro::rand_core::{RngCore, SeedableRng};
    rand_xoshiro::SplitMix64::seed_from_u64(seed).fill_bytes(buf);
}
