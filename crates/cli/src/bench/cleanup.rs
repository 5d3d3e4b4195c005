//! Leaving the machine as we found it.
//!
//! Every file a benchmark creates, every child process it starts and every
//! sysctl, block scheduler or cgroup it changes is held by a guard that undoes it
//! when dropped: at the normal end and on every error path (`?` drops them
//! too). Guards also register what they hold in a process-wide
//! [`Registry`], so that the Ctrl-C handler, which runs on its own thread
//! while the guards are still alive elsewhere, can undo everything still
//! registered and exit with 130.

use super::kernel_configs::BlkioCgroup;
use super::scheduler::SchedulerSnapshot;
use super::sysctl::DirtySnapshot;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::{Mutex, MutexGuard};

/// Exit status after Ctrl-C, as shells report a death by SIGINT.
pub const EXIT_INTERRUPTED: i32 = 130;

/// What is still to be undone. One process-wide instance ([`global`]);
/// tests make their own.
#[derive(Default)]
pub struct Registry {
    next_id: u64,
    files: Vec<(u64, PathBuf)>,
    children: Vec<(u64, u32)>,
    sysctls: Vec<(u64, DirtySnapshot)>,
    schedulers: Vec<(u64, SchedulerSnapshot)>,
    cgroups: Vec<(u64, BlkioCgroup)>,
    mounts: Vec<(u64, PathBuf)>,
}

impl Registry {
    pub const fn new() -> Registry {
        Registry {
            next_id: 0,
            files: Vec::new(),
            children: Vec::new(),
            sysctls: Vec::new(),
            schedulers: Vec::new(),
            cgroups: Vec::new(),
            mounts: Vec::new(),
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

    pub fn add_sysctls(&mut self, snapshot: DirtySnapshot) -> u64 {
        let id = self.id();
        self.sysctls.push((id, snapshot));
        id
    }

    pub fn add_scheduler(&mut self, snapshot: SchedulerSnapshot) -> u64 {
        let id = self.id();
        self.schedulers.push((id, snapshot));
        id
    }

    pub fn add_cgroup(&mut self, cgroup: BlkioCgroup) -> u64 {
        let id = self.id();
        self.cgroups.push((id, cgroup));
        id
    }

    pub fn add_mount(&mut self, mountpoint: PathBuf) -> u64 {
        let id = self.id();
        self.mounts.push((id, mountpoint));
        id
    }

    /// Forgets entry `id` (its guard undid it).
    pub fn remove(&mut self, id: u64) {
        self.mounts.retain(|(i, _)| *i != id);
        self.files.retain(|(i, _)| *i != id);
        self.children.retain(|(i, _)| *i != id);
        self.sysctls.retain(|(i, _)| *i != id);
        self.schedulers.retain(|(i, _)| *i != id);
        self.cgroups.retain(|(i, _)| *i != id);
    }

    /// Undoes everything registered: kills children, detaches mounts left
    /// behind by a killed `wb mount`, removes cgroups (killing what is
    /// left in them: the children's own children), restores block
    /// schedulers and sysctls (most recent first), removes files. Returns what could not be undone.
    pub fn undo_all(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        for (_, pid) in self.children.drain(..) {
            // SAFETY: plain syscalls on a pid we spawned and have not reaped yet.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
                libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0);
            }
        }
        for (_, mountpoint) in self.mounts.drain(..) {
            if let Err(e) = super::mount::detach(&mountpoint) {
                problems.push(e);
            }
        }
        while let Some((_, cgroup)) = self.cgroups.pop() {
            if let Err(e) = cgroup.restore() {
                problems.push(e);
            }
        }
        while let Some((_, snapshot)) = self.schedulers.pop() {
            if let Err(e) = snapshot.restore() {
                problems.push(e);
            }
        }
        while let Some((_, snapshot)) = self.sysctls.pop() {
            if let Err(e) = snapshot.restore() {
                problems.push(e);
            }
        }
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

/// A child process this run started; killed (and reaped) when dropped
/// while still running.
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
        let child = command.spawn()?;
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
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.forget();
        }
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

    #[test]
    fn child_is_killed_on_drop() {
        let mut cmd = Command::new("sleep");
        cmd.arg("60");
        let Ok(guard) = ChildGuard::spawn(&mut cmd) else {
            return; // no `sleep` here: nothing to test
        };
        let pid = guard.child.id() as libc::pid_t;
        drop(guard);
        // SAFETY: signal 0 only checks whether the pid exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        assert!(!alive, "child {pid} survived its guard");
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
