//! Leaving the machine as we found it.
//!
//! Every file a benchmark creates, every child process it starts and every
//! sysctl, block scheduler or cgroup it changes is held by a guard that undoes it
//! when dropped: at the normal end and on every error path (`?` drops them
//! too). Guards also register what they hold in a process-wide
//! [`Registry`], so that the Ctrl-C handler, which runs on its own thread
//! while the guards are still alive elsewhere, can undo everything still
//! registered and exit with 130.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// Exit status after Ctrl-C, as shells report a death by SIGINT.
pub const EXIT_INTERRUPTED: i32 = 130;

/// When a registered change is undone, after the children are killed
/// and before the files are removed: mounts left by a killed `wb mount`
/// are detached first, then cgroups go (killing what is left in them:
/// the children's own children), then block schedulers and sysctls come
/// back. Within a stage, the most recent change first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    Mount,
    Cgroup,
    Scheduler,
    Sysctl,
}

impl Stage {
    const ALL: [Stage; 4] = [Stage::Mount, Stage::Cgroup, Stage::Scheduler, Stage::Sysctl];
}

/// What is still to be undone. One process-wide instance ([`global`]);
/// tests make their own. The benches register their own kinds of
/// change as [`Snapshot`]s, so this file knows none of them.
#[derive(Default)]
pub struct Registry {
    next_id: u64,
    files: Vec<(u64, PathBuf)>,
    children: Vec<(u64, u32)>,
    changes: Vec<(u64, Stage, Box<dyn Snapshot + Send>)>,
}

impl Registry {
    pub const fn new() -> Registry {
        Registry {
            next_id: 0,
            files: Vec::new(),
            children: Vec::new(),
            changes: Vec::new(),
        }
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub fn add_file(&mut self, path: PathBuf) -> u64 {
        let id = self.id();
        self.files.push((id, path));
        id
    }

    pub fn add_child(&mut self, pid: u32) -> u64 {
        let id = self.id();
        self.children.push((id, pid));
        id
    }

    /// Registers a change to undo at `stage` (on Ctrl-C, `undo_all`).
    pub fn add_change(&mut self, stage: Stage, change: Box<dyn Snapshot + Send>) -> u64 {
        let id = self.id();
        self.changes.push((id, stage, change));
        id
    }

    /// Forgets entry `id` (its guard undid it).
    pub fn remove(&mut self, id: u64) {
        self.files.retain(|(i, _)| *i != id);
        self.children.retain(|(i, _)| *i != id);
        self.changes.retain(|(i, ..)| *i != id);
    }

    /// Undoes everything registered: kills children, undoes the changes
    /// stage by stage ([`Stage`]), removes files. Returns what could not
    /// be undone.
    pub fn undo_all(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        for (_, pid) in self.children.drain(..) {
            kill_group(pid);
            // SAFETY: a plain syscall on a pid we spawned and have not
            // reaped yet (its guard reaps and forgets it otherwise).
            unsafe {
                libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0);
            }
        }
        let mut changes = std::mem::take(&mut self.changes);
        for stage in Stage::ALL {
            for (_, _, change) in changes.iter().rev().filter(|(_, s, _)| *s == stage) {
                if let Err(e) = change.restore() {
                    problems.push(e);
                }
            }
        }
        changes.clear();
        for (_, path) in self.files.drain(..) {
            if let Err(e) = remove_if_exists(&path) {
                problems.push(format!("could not remove {}: {e}", path.display()));
            }
        }
        problems
    }
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry::new());

/// The process-wide registry (a poisoned lock is still usable: it only
/// holds lists).
pub fn global() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// On Ctrl-C (SIGINT, SIGTERM, SIGHUP): undo everything registered and exit 130.
pub fn install_ctrlc_handler() -> Result<(), String> {
    ctrlc::set_handler(|| {
        eprintln!(
            "\nwb bench: interrupted; restoring sysctls, schedulers and cgroups, removing files"
        );
        let problems = global().undo_all();
        for p in problems {
            eprintln!("wb bench: {p}");
        }
        std::process::exit(EXIT_INTERRUPTED);
    })
    .map_err(|e| format!("cannot install the Ctrl-C handler: {e}"))
}

/// Removes a file, or a directory tree (never a mountpoint's: mounts are
/// detached before files are removed).
fn remove_if_exists(path: &Path) -> std::io::Result<()> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        return std::fs::remove_dir_all(path);
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// A file (or directory tree) this run created; removed when dropped.
pub struct TempFile {
    id: u64,
    path: PathBuf,
}

impl TempFile {
    /// Takes charge of `path` (which may not exist yet).
    pub fn new(path: PathBuf) -> TempFile {
        let id = global().add_file(path.clone());
        TempFile { id, path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Err(e) = remove_if_exists(&self.path) {
            eprintln!("wb bench: could not remove {}: {e}", self.path.display());
        }
        global().remove(self.id);
    }
}

/// Kills the process group a child leads (`ChildGuard::spawn` makes one
/// per child): the child and whatever it started (fio's job processes
/// outlive a SIGKILL of fio itself).
pub(super) fn kill_group(pid: u32) {
    // SAFETY: a plain syscall; the group is the child's own (spawned with
    // `process_group(0)`), so it never holds this process.
    unsafe {
        libc::kill(-(pid as libc::pid_t), libc::SIGKILL);
    }
}

/// A setting a benchmark changed, as it was before: put back by `restore`.
pub trait Snapshot {
    fn restore(&self) -> Result<(), String>;
}

/// A change registered in the cleanup registry (so Ctrl-C undoes it too)
/// and undone when the guard is dropped, or by `restore`.
pub struct RestoreGuard<S: Snapshot> {
    id: u64,
    snapshot: S,
    restored: bool,
}

impl<S: Snapshot> RestoreGuard<S> {
    /// Guards `snapshot`, registered in the registry under `id`.
    pub fn new(id: u64, snapshot: S) -> RestoreGuard<S> {
        RestoreGuard {
            id,
            snapshot,
            restored: false,
        }
    }

    /// What will be put back.
    #[cfg(test)]
    pub fn snapshot(&self) -> &S {
        &self.snapshot
    }

    /// Restores now, reporting any problem.
    pub fn restore(mut self) -> Result<(), String> {
        self.restore_inner()
    }

    fn restore_inner(&mut self) -> Result<(), String> {
        if self.restored {
            return Ok(());
        }
        self.restored = true;
        let result = self.snapshot.restore();
        global().remove(self.id);
        result
    }
}

impl<S: Snapshot> Drop for RestoreGuard<S> {
    fn drop(&mut self) {
        if let Err(e) = self.restore_inner() {
            eprintln!("wb bench: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_file_is_removed_on_drop_and_forgotten() {
        let path = std::env::temp_dir().join(format!("wb-bench-tmp-{}", std::process::id()));
        {
            let f = TempFile::new(path.clone());
            std::fs::write(f.path(), b"data").expect("write temp file");
            assert!(path.exists());
        }
        assert!(!path.exists());
        assert!(!global().files.iter().any(|(_, p)| *p == path));
    }

    /// Records its name in a shared log when restored.
    struct Logged(&'static str, std::sync::Arc<Mutex<Vec<&'static str>>>);

    impl Snapshot for Logged {
        fn restore(&self) -> Result<(), String> {
            self.1.lock().expect("log").push(self.0);
            Ok(())
        }
    }

    #[test]
    fn undo_all_undoes_stage_by_stage_most_recent_first_and_forgets_removed() {
        let log = std::sync::Arc::new(Mutex::new(Vec::new()));
        let mut registry = Registry::new();
        let mut add = |stage, name| registry.add_change(stage, Box::new(Logged(name, log.clone())));
        add(Stage::Sysctl, "sysctl 1");
        add(Stage::Mount, "mount 1");
        let gone = add(Stage::Cgroup, "cgroup undone by its guard");
        add(Stage::Scheduler, "scheduler");
        add(Stage::Sysctl, "sysctl 2");
        add(Stage::Mount, "mount 2");
        add(Stage::Cgroup, "cgroup");
        registry.remove(gone);
        assert!(registry.undo_all().is_empty());
        assert_eq!(
            *log.lock().expect("log"),
            [
                "mount 2",
                "mount 1",
                "cgroup",
                "scheduler",
                "sysctl 2",
                "sysctl 1"
            ]
        );
        assert!(registry.undo_all().is_empty(), "nothing twice");
        assert_eq!(log.lock().expect("log").len(), 6);
    }

    #[test]
    fn undo_all_removes_registered_files() {
        let mut registry = Registry::new();
        let path = std::env::temp_dir().join(format!("wb-bench-undo-{}", std::process::id()));
        std::fs::write(&path, b"x").expect("write temp file");
        registry.add_file(path.clone());
        registry.add_file(path.with_extension("never-created"));
        assert!(registry.undo_all().is_empty());
        assert!(!path.exists());
    }
}
