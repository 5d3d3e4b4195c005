//! Setting the kernel's dirty limits for a run, and putting them back.
//!
//! `vm.dirty_bytes` and `vm.dirty_ratio` are two views of one limit (and
//! `vm.dirty_background_bytes` / `_ratio` of another): writing one zeroes
//! the other, and the kernel refuses to write 0 to a `*_bytes` file. So the
//! previous state is restored through whichever of the pair was in force:
//! the bytes value if it was non-zero, else the ratio (which zeroes the
//! bytes value again). Afterwards all four files are read back and any
//! difference is reported with the command that fixes it.

use super::cleanup;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Where the knobs live on a real system.
pub const PROC_VM: &str = "/proc/sys/vm";

const DIRTY_BYTES: &str = "dirty_bytes";
const DIRTY_RATIO: &str = "dirty_ratio";
const BG_BYTES: &str = "dirty_background_bytes";
const BG_RATIO: &str = "dirty_background_ratio";

/// The four dirty-limit knobs as they were, under `root` (normally /proc/sys/vm).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirtySnapshot {
    pub root: PathBuf,
    pub dirty_bytes: u64,
    pub dirty_ratio: u64,
    pub background_bytes: u64,
    pub background_ratio: u64,
}

fn read_knob(root: &Path, name: &str) -> io::Result<u64> {
    let path = root.join(name);
    let text = fs::read_to_string(&path)?;
    text.trim().parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: '{}' is not a number", path.display(), text.trim()),
        )
    })
}

fn write_knob(root: &Path, name: &str, value: u64) -> io::Result<()> {
    fs::write(root.join(name), format!("{value}\n"))
}

impl DirtySnapshot {
    pub fn read(root: &Path) -> io::Result<DirtySnapshot> {
        Ok(DirtySnapshot {
            root: root.to_path_buf(),
            dirty_bytes: read_knob(root, DIRTY_BYTES)?,
            dirty_ratio: read_knob(root, DIRTY_RATIO)?,
            background_bytes: read_knob(root, BG_BYTES)?,
            background_ratio: read_knob(root, BG_RATIO)?,
        })
    }

    /// Puts the knobs back as they were in this snapshot.
    pub fn restore(&self) -> Result<(), String> {
        let root = &self.root;
        let mut errors = Vec::new();
        for (bytes_name, bytes, ratio_name, ratio) in [
            (DIRTY_BYTES, self.dirty_bytes, DIRTY_RATIO, self.dirty_ratio),
            (
                BG_BYTES,
                self.background_bytes,
                BG_RATIO,
                self.background_ratio,
            ),
        ] {
            let result = if bytes != 0 {
                write_knob(root, bytes_name, bytes)
            } else {
                // Writing the ratio zeroes the bytes value in the kernel. A
                // plain file (tests) or an unchanged ratio keeps it: then try
                // writing 0 directly (the kernel refuses, which the check
                // below reports).
                write_knob(root, ratio_name, ratio).map(|()| {
                    if read_knob(root, bytes_name).map_or(true, |v| v != 0) {
                        let _ = write_knob(root, bytes_name, 0);
                    }
                })
            };
            if let Err(e) = result {
                errors.push(format!("{}: {e}", root.join(bytes_name).display()));
            }
        }
        match DirtySnapshot::read(root) {
            Ok(now) if now == *self => {}
            Ok(now) => errors.push(format!(
                "dirty limits not restored: now dirty_bytes={} dirty_ratio={} \
                 dirty_background_bytes={} dirty_background_ratio={}; fix with: {}",
                now.dirty_bytes,
                now.dirty_ratio,
                now.background_bytes,
                now.background_ratio,
                self.fix_command()
            )),
            Err(e) => errors.push(format!("reading back {}: {e}", root.display())),
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    /// The sysctl command that sets this snapshot by hand.
    pub fn fix_command(&self) -> String {
        let limit = if self.dirty_bytes != 0 {
            format!("vm.dirty_bytes={}", self.dirty_bytes)
        } else {
            format!("vm.dirty_ratio={}", self.dirty_ratio)
        };
        let background = if self.background_bytes != 0 {
            format!("vm.dirty_background_bytes={}", self.background_bytes)
        } else {
            format!("vm.dirty_background_ratio={}", self.background_ratio)
        };
        format!("sysctl -w {limit} {background}")
    }
}

/// Checks, without changing anything, that the knobs under `root` can be
/// read and written (root is needed for /proc/sys).
pub fn check_writable(root: &Path) -> Result<(), String> {
    DirtySnapshot::read(root).map_err(|e| format!("cannot read {}: {e}", root.display()))?;
    for name in [DIRTY_BYTES, BG_BYTES] {
        let path = root.join(name);
        fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| {
                if e.kind() == io::ErrorKind::PermissionDenied {
                    format!(
                        "cannot write {} (changing the kernel's dirty limits needs root): \
                         run as root",
                        path.display()
                    )
                } else {
                    format!("cannot write {}: {e}", path.display())
                }
            })?;
    }
    Ok(())
}

impl cleanup::Snapshot for DirtySnapshot {
    fn restore(&self) -> Result<(), String> {
        DirtySnapshot::restore(self)
    }
}

/// The kernel's dirty limits set to given byte values for as long as this
/// guard lives; the previous values come back when it is dropped (and on
/// Ctrl-C, through the cleanup registry).
pub type DirtyLimitsGuard = cleanup::RestoreGuard<DirtySnapshot>;

impl cleanup::RestoreGuard<DirtySnapshot> {
    /// Sets `dirty_bytes` and `dirty_background_bytes` under `root`.
    pub fn apply(
        root: &Path,
        dirty_bytes: u64,
        background_bytes: u64,
    ) -> Result<DirtyLimitsGuard, String> {
        let snapshot = DirtySnapshot::read(root)
            .map_err(|e| format!("reading the dirty limits in {}: {e}", root.display()))?;
        let id = cleanup::global().add_change(cleanup::Stage::Sysctl, Box::new(snapshot.clone()));
        // From here on, dropping the guard restores (also if a write below fails).
        let guard = cleanup::RestoreGuard::new(id, snapshot);
        for (name, value) in [(DIRTY_BYTES, dirty_bytes), (BG_BYTES, background_bytes)] {
            write_knob(root, name, value)
                .map_err(|e| format!("setting {}={value}: {e}", root.join(name).display()))?;
        }
        Ok(guard)
    }
}

/// The engine's dirty limits for `memory`, in bytes (dirty, background),
/// as the engine computes them: what the benches set the kernel's to, so
/// both write under the same limits.
pub fn engine_dirty_limits(memory: u64) -> Result<(u64, u64), super::BenchError> {
    use super::BenchError;
    let cache = writeback::Cache::builder()
        .knob("memory", &memory.to_string())
        .map_err(|e| BenchError::BadInput(format!("--memory: {e}")))?
        .calibrate(false)
        .build()
        .map_err(|e| BenchError::failed("starting the cache", e))?;
    let stats = cache.stats();
    let page = wb_engine::PAGE_SIZE;
    Ok((stats.thresh_pages * page, stats.bg_thresh_pages * page))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake /proc/sys/vm in a temp directory, removed when dropped.
    struct FakeVm(PathBuf);

    impl FakeVm {
        fn new(tag: &str, values: [u64; 4]) -> FakeVm {
            let dir =
                std::env::temp_dir().join(format!("wb-bench-vm-{tag}-{}", std::process::id()));
            fs::create_dir_all(&dir).expect("temp dir");
            for (name, v) in [DIRTY_BYTES, DIRTY_RATIO, BG_BYTES, BG_RATIO]
                .iter()
                .zip(values)
            {
                fs::write(dir.join(name), format!("{v}\n")).expect("write knob");
            }
            FakeVm(dir)
        }

        fn get(&self, name: &str) -> u64 {
            read_knob(&self.0, name).expect("read knob")
        }
    }

    impl Drop for FakeVm {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn ratios_in_force_are_restored_on_drop() {
        let vm = FakeVm::new("ratio", [0, 20, 0, 10]);
        {
            let guard = DirtyLimitsGuard::apply(&vm.0, 200 << 20, 100 << 20).expect("apply");
            assert_eq!(vm.get(DIRTY_BYTES), 200 << 20);
            assert_eq!(vm.get(BG_BYTES), 100 << 20);
            assert_eq!(guard.snapshot().dirty_ratio, 20);
        }
        assert_eq!(vm.get(DIRTY_BYTES), 0);
        assert_eq!(vm.get(DIRTY_RATIO), 20);
        assert_eq!(vm.get(BG_BYTES), 0);
        assert_eq!(vm.get(BG_RATIO), 10);
    }

    #[test]
    fn bytes_in_force_are_restored_explicitly() {
        let vm = FakeVm::new("bytes", [300_000_000, 0, 150_000_000, 0]);
        let guard = DirtyLimitsGuard::apply(&vm.0, 1 << 20, 1 << 19).expect("apply");
        assert_eq!(vm.get(DIRTY_BYTES), 1 << 20);
        guard.restore().expect("restore");
        assert_eq!(vm.get(DIRTY_BYTES), 300_000_000);
        assert_eq!(vm.get(BG_BYTES), 150_000_000);
    }

    #[test]
    fn restored_when_unwinding_from_a_panic() {
        let vm = FakeVm::new("panic", [0, 20, 0, 10]);
        let root = vm.0.clone();
        let result = std::panic::catch_unwind(move || {
            let _guard = DirtyLimitsGuard::apply(&root, 5 << 20, 1 << 20).expect("apply");
            panic!("benchmark failed");
        });
        assert!(result.is_err());
        assert_eq!(vm.get(DIRTY_BYTES), 0);
        assert_eq!(vm.get(DIRTY_RATIO), 20);
    }

    #[test]
    fn registry_restores_what_a_live_guard_changed() {
        // What the Ctrl-C handler does while a guard is still alive elsewhere.
        let vm = FakeVm::new("ctrlc", [0, 20, 0, 10]);
        let mut registry = cleanup::Registry::new();
        let snapshot = DirtySnapshot::read(&vm.0).expect("snapshot");
        registry.add_change(cleanup::Stage::Sysctl, Box::new(snapshot));
        write_knob(&vm.0, DIRTY_BYTES, 7 << 20).expect("write");
        assert!(registry.undo_all().is_empty());
        assert_eq!(vm.get(DIRTY_BYTES), 0);
        assert_eq!(vm.get(DIRTY_RATIO), 20);
    }

    #[test]
    fn a_missing_knob_is_an_error_not_a_panic() {
        let dir = std::env::temp_dir().join(format!("wb-bench-vm-none-{}", std::process::id()));
        assert!(DirtyLimitsGuard::apply(&dir, 1, 1).is_err());
        assert!(check_writable(&dir).is_err());
    }

    #[test]
    fn fix_command_names_the_knobs_in_force() {
        let s = DirtySnapshot {
            root: PathBuf::from(PROC_VM),
            dirty_bytes: 0,
            dirty_ratio: 20,
            background_bytes: 1000,
            background_ratio: 0,
        };
        assert_eq!(
            s.fix_command(),
            "sysctl -w vm.dirty_ratio=20 vm.dirty_background_bytes=1000"
        );
    }
}
