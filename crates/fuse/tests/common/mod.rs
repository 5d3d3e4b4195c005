//! Mounting in tests: `wb_fuse::mount` called in the test's own process on
//! directories under /tmp, and what the tests that use a mount share.
//!
//! - A [`Mount`] is always unmounted, also when its test fails: its Drop
//!   ends the session (everything written back, the mount detached), then
//!   `umount -l` should the mount still be there.
//! - The tests need root and /dev/fuse (some a tool such as fio); without
//!   them they say why and pass without checking anything, except under CI
//!   (`WB_REQUIRE_ALL_TESTS`, set by .ci/run), where that fails
//!   (`wb_testkit::skip`, through `require!`).
//! - They run one at a time ([`serial`]): they share two cores and one disk.
//!
//! `wb mount` itself (its arguments, signals, exit codes) is tested by
//! crates/cli/tests/mount*.rs, which start the binary.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use wb_fuse::{MountError, MountOptions, MountSession, Unmounted};

/// Cache budget for the tests: small enough that large writes are throttled.
pub const TEST_MEMORY: &str = "256MiB";

// Not every test binary uses every helper.
#[allow(unused_imports)]
pub use wb_testkit::mount_env::{is_mounted, pattern, run, serial, skip_reason, TempRoot};

/// Skips the calling test (returning from it) where it cannot mount:
/// `require!(true)` when it needs fio too.
macro_rules! require {
    ($needs_fio:expr) => {
        if let Some(reason) = $crate::common::skip_reason($needs_fio) {
            wb_testkit::skip(&reason);
            return;
        }
    };
}

/// Whether `tool` (run with `arg`) cannot run here: then the calling test
/// is skipped, with the reason (a failure under CI).
pub fn tool_missing(tool: &str, arg: &str) -> bool {
    if Command::new(tool).arg(arg).output().is_ok() {
        return false;
    }
    wb_testkit::skip(&format!(
        "{tool} is not installed (./scripts/setup.sh installs it)"
    ));
    true
}

/// The transport the tests' mounts use: `WB_FUSE_TRANSPORT=uring` for FUSE
/// over io_uring (mounting fails if the kernel has it off), /dev/fuse
/// otherwise, whatever the kernel offers. scripts/test.sh runs this
/// crate's tests over both.
pub fn transport() -> wb_fuse::Uring {
    match std::env::var("WB_FUSE_TRANSPORT").as_deref() {
        Ok("uring") => wb_fuse::Uring::On,
        _ => wb_fuse::Uring::Off,
    }
}

/// A mount served by this process, unmounted on drop.
pub struct Mount {
    session: Option<MountSession>,
    pub backing: PathBuf,
    pub mnt: PathBuf,
}

impl Mount {
    /// The options of a test mount: no calibration, [`TEST_MEMORY`], device
    /// data next to the backing directory.
    pub fn options(backing: &Path, mnt: &Path) -> MountOptions {
        let data = backing
            .parent()
            .expect("backing has a parent")
            .join("wb-data");
        MountOptions {
            calibrate: false,
            data_dir: data,
            uring: transport(),
            ..MountOptions::new(backing, mnt)
        }
        .knob("memory", TEST_MEMORY)
    }

    /// `backing` mounted at `mnt` with the test options.
    pub fn start(backing: &Path, mnt: &Path) -> Mount {
        Mount::start_with(backing, mnt, |_| {})
    }

    /// As `start`, with the options changed by `change` first.
    pub fn start_with(backing: &Path, mnt: &Path, change: impl FnOnce(&mut MountOptions)) -> Mount {
        let mut options = Mount::options(backing, mnt);
        change(&mut options);
        let session = wb_fuse::mount(options).unwrap_or_else(|e| panic!("mount: {e}"));
        let mount = Mount {
            session: Some(session),
            backing: backing.to_path_buf(),
            mnt: mnt.to_path_buf(),
        };
        assert!(
            is_mounted(mnt),
            "{} is not in /proc/self/mountinfo",
            mnt.display()
        );
        mount
    }

    pub fn session(&self) -> &MountSession {
        self.session.as_ref().expect("mounted")
    }

    /// `.writeback/stats` as name -> value.
    pub fn stats(&self) -> BTreeMap<String, u64> {
        let text = fs::read_to_string(self.mnt.join(".writeback/stats")).expect("read the stats");
        text.lines()
            .filter_map(|l| l.split_once(' '))
            .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
            .collect()
    }

    /// Unmounts: everything written back, the mount gone, the serving
    /// threads ended. Err: what failed.
    pub fn stop(self) -> Result<(), MountError> {
        let ended = self.stop_with();
        ended.written_back?;
        if let Some(wb_fuse::TraceWritten {
            path,
            result: Err(source),
        }) = ended.trace
        {
            return Err(MountError::TraceWrite { path, source });
        }
        Ok(())
    }

    /// Unmounts and tells all that happened; checks that the mount is gone
    /// and its serving threads ended.
    pub fn stop_with(mut self) -> Unmounted {
        let session = self.session.take().expect("mounted");
        let ended = session.unmount_with(|_, _| {});
        assert!(!is_mounted(&self.mnt), "still mounted after the unmount");
        assert!(ended.serving_ended, "the serving threads did not end");
        ended
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        drop(self.session.take());
        if is_mounted(&self.mnt) {
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        }
    }
}

/// Asserts that `mount` unmounts cleanly (everything written back).
#[track_caller]
pub fn stop_ok(mount: Mount) {
    if let Err(e) = mount.stop() {
        panic!("unmount: {e}");
    }
}

/// Unmounts what a test mounted at `dir` (a small tmpfs, a zram
/// filesystem): retried for up to 5 s while busy (the files the mount's
/// cache had open there may still be being let go of by the kernel just
/// after the session ended), then lazily.
pub fn umount_bounded(dir: &Path) {
    let done = wait_until(Duration::from_secs(5), || {
        !is_mounted(dir)
            || Command::new("umount")
                .arg(dir)
                .status()
                .is_ok_and(|s| s.success())
    });
    if !done {
        let _ = Command::new("umount").arg("-l").arg(dir).status();
    }
}

/// A file of `mib` MiB of `pattern` data at `path`.
pub fn make_source(path: &Path, mib: u64) {
    let mut f = fs::File::create(path).expect("create source");
    let mut buf = vec![0u8; 1 << 20];
    for i in 0..mib {
        pattern(i, &mut buf);
        f.write_all(&buf).expect("write source");
    }
}

/// The value of the `name` line of `.writeback/stats`.
pub fn stat_line(mnt: &Path, name: &str) -> Option<u64> {
    let stats = fs::read_to_string(mnt.join(".writeback/stats")).expect("read stats");
    stats
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

/// A stats line's value (the line must be there).
pub fn stats_value(mnt: &Path, name: &str) -> u64 {
    stat_line(mnt, name).unwrap_or_else(|| panic!("no line {name} in .writeback/stats"))
}

/// The name of the mount's one device in `.writeback`.
pub fn device_of(mnt: &Path) -> String {
    fs::read_dir(mnt.join(".writeback"))
        .expect("list .writeback")
        .map(|e| e.expect("entry").path())
        .find(|p| p.is_dir())
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .expect("a device directory")
}

/// The names in `dir`, sorted (none if it cannot be read).
pub fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Sets the extended attribute `name` of `path` to `value`.
pub fn set_xattr(path: &Path, name: &std::ffi::CStr, value: &[u8]) -> std::io::Result<()> {
    let path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: path and name are NUL-terminated strings alive for the call;
    // value is a live slice of value.len() bytes, only read.
    let rc = unsafe {
        libc::setxattr(
            path.as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Reads attribute `name` of `path` into a buffer of `size` bytes.
pub fn get_xattr(path: &Path, name: &std::ffi::CStr, size: usize) -> std::io::Result<Vec<u8>> {
    let path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
    let mut buf = vec![0u8; size];
    // SAFETY: path and name are NUL-terminated strings alive for the call;
    // the kernel writes at most buf.len() bytes into buf.
    let n = unsafe {
        libc::getxattr(
            path.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// Sets `user.writeback.dontcache=1` on `path`: its writes go uncached.
pub fn tag_dontcache(path: &Path) {
    set_xattr(path, c"user.writeback.dontcache", b"1").expect("setxattr");
}

/// Waits (at most `limit`) until `done()`; whether it came true.
pub fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !done() {
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}
