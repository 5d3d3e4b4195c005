//! Mounting, serving and shutting down.
//!
//! 1. [`Lifecycle::start`] blocks SIGINT, SIGTERM and SIGHUP in the calling
//!    thread before any other thread exists (threads inherit the mask), and
//!    one thread waits for them with sigwait: no work in signal handlers.
//!    [`Lifecycle::without_signals`] leaves signals alone (a library
//!    caller, a test): only the end of the session is waited for.
//! 2. [`check_paths`] refuses a mountpoint that is not an empty directory
//!    or lies inside the backing directory.
//! 3. [`Lifecycle::mount`] mounts through /dev/fuse (as root, no libfuse),
//!    answers the kernel's INIT, and serves requests on [`SERVE_THREADS`]
//!    threads, each reading its own clone of the FUSE descriptor. The
//!    kernel queues requests beyond those (bounded by its own limits, and
//!    `max_background` for asynchronous ones), so the server's concurrency
//!    and memory are bounded by the thread count.
//! 4. A signal, or the kernel unmounting (`umount MOUNTPOINT`), ends it:
//!    [`Lifecycle::shutdown`] refuses further data changes (after the ones
//!    under way finish), detaches the mount, and writes every dirty page
//!    back with `Cache::sync`, reporting progress; then
//!    [`Mounted::end_serving`] waits (bounded) for the serving threads to
//!    end, so that a process that goes on (a test) keeps no thread or
//!    descriptor of the mount.

use crate::fs::{Fuser, StopHandle, WbFs};
use fuser::{MountOption, SessionACL};
use nix::sys::signal::{SigSet, Signal};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use writeback::Cache;

/// Threads serving FUSE requests. Each holds at most one request, so a
/// request that waits (a throttled write, an fsync) holds up only its
/// thread; 8 keeps the machine's 2 cores busy while some wait.
pub const SERVE_THREADS: usize = 8;
/// Room per ring entry for a request's or a reply's data: at least the
/// largest the kernel sends (max_pages of `MAX_WRITE_BYTES`), with room
/// to spare for a larger readahead.
const RING_PAYLOAD_BYTES: usize = 1 << 20;
/// How often the write-back at shutdown reports progress.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(500);
/// How long the end of serving waits for the serving threads once the
/// kernel has ended the connection (they only have to see it and return).
pub const SERVE_END_TIMEOUT: Duration = Duration::from_secs(10);
/// How often that wait looks.
const SERVE_END_POLL: Duration = Duration::from_millis(5);

/// Why serving ended.
#[derive(Debug)]
pub enum Event {
    /// SIGINT, SIGTERM or SIGHUP.
    Signal(Signal),
    /// The kernel ended the session (`umount`), or serving failed.
    Unmounted(std::io::Result<()>),
}

#[derive(Debug)]
pub struct Lifecycle {
    tx: Sender<Event>,
    rx: Receiver<Event>,
}

/// A mounted filesystem being served.
pub(crate) struct Mounted {
    mountpoint: PathBuf,
    stop: StopHandle,
    /// The thread running the session; it ends when the kernel ends the
    /// connection (an unmount of a mount no file is open on).
    serving: Option<JoinHandle<()>>,
    /// The io_uring queues' threads (uring/), if requests come that way;
    /// they end with the connection too.
    rings: Vec<JoinHandle<std::io::Result<()>>>,
    /// Dropped to end the thread that keeps the inode table in its budget.
    prune_stop: Option<Sender<()>>,
    prune: Option<JoinHandle<()>>,
    /// A duplicate of the session's /dev/fuse descriptor: tells whether
    /// the kernel still has the connection (poll reports POLLERR once not).
    device: OwnedFd,
    /// The connection's number under /sys/fs/fuse/connections (the minor
    /// device number of the mount), where it could be read.
    connection: Option<u32>,
}
impl Lifecycle {
    /// Takes over SIGINT, SIGTERM and SIGHUP. Call before any thread is
    /// started (before building the cache).
    pub fn start() -> std::io::Result<Lifecycle> {
        let mut set = SigSet::empty();
        for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
            set.add(s);
        }
        set.thread_block().map_err(std::io::Error::from)?;
        let (tx, rx) = channel();
        let to_main = tx.clone();
        std::thread::Builder::new()
            .name("wb-signals".into())
            .spawn(move || {
                while let Ok(signal) = set.wait() {
                    if to_main.send(Event::Signal(signal)).is_err() {
                        return;
                    }
                }
            })?;
        Ok(Lifecycle { tx, rx })
    }

    /// Leaves signals to the process (a library caller, a test): only the
    /// end of the session is waited for.
    pub fn without_signals() -> Lifecycle {
        let (tx, rx) = channel();
        Lifecycle { tx, rx }
    }

    /// A signal that arrived already (during setup), if any.
    pub fn pending_signal(&self) -> Option<Signal> {
        match self.rx.try_recv() {
            Ok(Event::Signal(s)) => Some(s),
            _ => None,
        }
    }

    /// Mounts `fs` at `mountpoint` and serves it in the background,
    /// keeping the inode table within [`INODES_PERCENT`] of `nofile` open
    /// descriptors.
    pub(crate) fn mount(
        &self,
        fs: WbFs,
        mountpoint: &Path,
        allow_other: bool,
        flags: &[crate::MountFlag],
        nofile: u64,
    ) -> std::io::Result<Mounted> {
        let stop = fs.stop_handle();
        let inodes = fs.inode_table();
        let notifier = fs.notifier_slot();
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            MountOption::FSName(format!("wb:{}", fs.backing.display())),
            // The type `fuse.wb` in /proc/self/mountinfo (fuser gives
            // Subtype to fusermount only): what mount(8) and umount(8)
            // find the helpers /sbin/mount.fuse.wb and umount.fuse.wb by.
            MountOption::CUSTOM("subtype=wb".into()),
            MountOption::DefaultPermissions,
        ];
        config
            .mount_options
            .extend(flags.iter().map(|flag| match flag {
                crate::MountFlag::NoSuid => MountOption::NoSuid,
                crate::MountFlag::NoDev => MountOption::NoDev,
                crate::MountFlag::NoExec => MountOption::NoExec,
                crate::MountFlag::NoAtime => MountOption::NoAtime,
            }));
        config.acl = if allow_other {
            SessionACL::All
        } else {
            SessionACL::Owner
        };
        config.n_threads = Some(SERVE_THREADS);
        config.clone_fd = true;
        let fs = Arc::new(fs);
        let session = fuser::Session::new(Fuser(Arc::clone(&fs)), mountpoint, &config)?;
        let device = session.as_fd().try_clone_to_owned()?;
        let _ = notifier.set(session.notifier());
        let budget = crate::prune::inode_budget(nofile, INODES_PERCENT);
        let (prune_stop, prune_stopped) = channel();
        let prune = crate::prune::spawn(inodes, session.notifier(), budget, prune_stopped)?;
        let tx = self.tx.clone();
        let serving = std::thread::Builder::new()
            .name("wb-fuse".into())
            .spawn(move || {
                let result = session.run();
                let _ = tx.send(Event::Unmounted(result));
            })?;
        let rings = if fs.uring {
            // They register once the session has answered INIT.
            let ring_device = Arc::new(device.try_clone()?);
            crate::uring::spawn(fs, ring_device, RING_PAYLOAD_BYTES)?
        } else {
            Vec::new()
        };
        Ok(Mounted {
            rings,
            mountpoint: mountpoint.to_path_buf(),
            stop,
            serving: Some(serving),
            prune_stop: Some(prune_stop),
            prune: Some(prune),
            device,
            connection: connection_of(mountpoint),
        })
    }

    /// Waits for a signal or the end of the session.
    pub fn wait(&self) -> Event {
        self.rx.recv().unwrap_or(Event::Unmounted(Ok(())))
    }

    /// Ends serving: refuses further data changes (waiting for the ones
    /// under way), detaches the mount, and writes back all dirty data,
    /// calling `progress(dirty_bytes, writeback_bytes)` every
    /// [`PROGRESS_INTERVAL`] meanwhile.
    pub(crate) fn shutdown(
        &self,
        mounted: &Mounted,
        cache: &Arc<Cache>,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<(), writeback::Error> {
        mounted.stop.stop_writes();
        // Lazy: a busy mount (a writer still has files open) is detached
        // at once; its open files see errors once serving ends
        // (`Mounted::end_serving`, or the exit of the process).
        let _ = nix::mount::umount2(&mounted.mountpoint, nix::mount::MntFlags::MNT_DETACH);
        let (done_tx, done_rx) = channel();
        let syncing = Arc::clone(cache);
        std::thread::Builder::new()
            .name("wb-final-sync".into())
            .spawn(move || {
                let _ = done_tx.send(syncing.sync());
            })
            .map_err(|e| writeback::Error::Io {
                path: "thread wb-final-sync".into(),
                source: e,
            })?;
        loop {
            match done_rx.recv_timeout(PROGRESS_INTERVAL) {
                Ok(result) => return result,
                Err(RecvTimeoutError::Timeout) => {
                    let s = cache.stats();
                    let page = wb_engine::PAGE_SIZE;
                    progress(s.dirty_pages * page, s.writeback_pages * page);
                }
                Err(RecvTimeoutError::Disconnected) => return Err(writeback::Error::Closed),
            }
        }
    }
}

impl Mounted {
    /// After [`Lifecycle::shutdown`]: ends the pruning thread and waits
    /// (at most [`SERVE_END_TIMEOUT`]) for the serving threads to return,
    /// which they do once the kernel has ended the connection. A detached
    /// mount that files are still open on keeps its connection: it is
    /// aborted through /sys/fs/fuse/connections where that is mounted;
    /// elsewhere its threads are left to end with the last close (a
    /// process that exits ends them with it). Returns whether the serving
    /// threads ended.
    pub(crate) fn end_serving(mut self) -> bool {
        drop(self.prune_stop.take());
        let ended = match self.serving.take() {
            Some(serving) => {
                if !serving.is_finished() && connected(&self.device) {
                    abort_connection(self.connection);
                }
                if serving.is_finished() || !connected(&self.device) {
                    join_bounded(serving, SERVE_END_TIMEOUT)
                } else {
                    false
                }
            }
            None => true,
        };
        // The queues end with the connection: once it is gone, all within
        // one SERVE_END_TIMEOUT (a still connected mount leaves them to
        // end with it, as the serving thread).
        if !connected(&self.device) {
            let deadline = Instant::now() + SERVE_END_TIMEOUT;
            for ring in self.rings.drain(..) {
                join_bounded(ring, deadline.saturating_duration_since(Instant::now()));
            }
        }
        // It looks every prune::INTERVAL whether it should stop.
        if let Some(prune) = self.prune.take() {
            join_bounded(prune, SERVE_END_TIMEOUT);
        }
        ended
    }
}

/// Joins `thread` if it ends within `limit`; otherwise leaves it running.
fn join_bounded<T>(thread: JoinHandle<T>, limit: Duration) -> bool {
    let start = Instant::now();
    while !thread.is_finished() {
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(SERVE_END_POLL);
    }
    thread.join().is_ok()
}

/// Whether the kernel still has the FUSE connection of `device` (a
/// descriptor of /dev/fuse): it reports POLLERR once the connection ended.
fn connected(device: &OwnedFd) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    loop {
        let mut fds = [PollFd::new(device.as_fd(), PollFlags::empty())];
        match poll(&mut fds, PollTimeout::ZERO) {
            Ok(0) => return true,
            Ok(_) => {
                return !fds[0]
                    .revents()
                    .is_some_and(|r| r.intersects(PollFlags::POLLERR | PollFlags::POLLNVAL))
            }
            Err(nix::errno::Errno::EINTR) => continue,
            // Cannot tell: taken as ended (nothing is waited for).
            Err(_) => return false,
        }
    }
}

/// Where fusectl is mounted: each connection has a directory named by its
/// number, with a file `abort`.
const FUSE_CONNECTIONS: &str = "/sys/fs/fuse/connections";

/// Ends FUSE connection `connection` (requests under way fail with
/// ENOTCONN), if fusectl is mounted; otherwise does nothing.
fn abort_connection(connection: Option<u32>) {
    if let Some(id) = connection {
        let abort = Path::new(FUSE_CONNECTIONS)
            .join(id.to_string())
            .join("abort");
        if abort.exists() {
            let _ = std::fs::write(abort, "1");
        }
    }
}

/// The connection number of the FUSE mount at `mountpoint` (its minor
/// device number), from /proc/self/mountinfo (a stat would be a request
/// to the server). The last entry wins: a mount on top of others.
fn connection_of(mountpoint: &Path) -> Option<u32> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = mountinfo_escape(mountpoint);
    info.lines()
        .rev()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            (fields.get(4) == Some(&want.as_str())).then(|| fields.get(2).copied())?
        })
        .and_then(|dev| dev.split_once(':'))
        .and_then(|(_, minor)| minor.parse().ok())
}

/// A path as /proc/self/mountinfo writes it: space, tab, newline and
/// backslash as octal escapes.
fn mountinfo_escape(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        match c {
            ' ' => out.push_str("\\040"),
            '\t' => out.push_str("\\011"),
            '\n' => out.push_str("\\012"),
            '\\' => out.push_str("\\134"),
            c => out.push(c),
        }
    }
    out
}

/// Shares of the open-file limit: backing files the cache keeps open (the
/// engine's `backing_files_percent`, which the mount sets to this unless
/// set: less than the library's 50, since the server also holds a
/// descriptor per inode the kernel remembers) and those inodes (prune.rs);
/// the rest is for data descriptors of open handles, the transport's
/// rings and descriptors, and the overshoot while pruning and eviction
/// catch up (both run behind the requests). At 40 % each, a test process
/// limited to 1,000 descriptors peaked at 856-893 here and ran out on CI
/// (directories.rs, 2026-11-28); 35 % leaves 300.
pub const BACKING_FILES_PERCENT: u32 = 35;
pub const INODES_PERCENT: u64 = 35;

/// Raises the open-file limit as far as allowed and returns it: the
/// server holds a descriptor per inode the kernel remembers and the cache
/// one per backing file. As root with CAP_SYS_RESOURCE the hard limit goes
/// up to `fs.nr_open`; otherwise the soft limit to the hard one. Call
/// before building the cache (it sizes itself by the limit).
pub fn raise_fd_limit() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok());
    let raised = nr_open.is_some_and(|most| setrlimit(Resource::RLIMIT_NOFILE, most, most).is_ok());
    if !raised {
        if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
    fd_limit()
}

/// The soft open-file limit (1024 if it cannot be read).
pub fn fd_limit() -> u64 {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(1024, |(soft, _)| soft)
}

/// Checks and canonicalises the two directories. Errors are sentences for
/// the user (bad usage).
pub fn check_paths(backing: &Path, mountpoint: &Path) -> Result<(PathBuf, PathBuf), String> {
    let backing_c = backing
        .canonicalize()
        .map_err(|e| format!("BACKING_DIR {}: {e}", backing.display()))?;
    if !backing_c.is_dir() {
        return Err(format!(
            "BACKING_DIR {} is not a directory",
            backing.display()
        ));
    }
    let mount_c = mountpoint
        .canonicalize()
        .map_err(|e| format!("MOUNTPOINT {}: {e}", mountpoint.display()))?;
    if !mount_c.is_dir() {
        return Err(format!(
            "MOUNTPOINT {} is not a directory",
            mountpoint.display()
        ));
    }
    let mut entries = std::fs::read_dir(&mount_c)
        .map_err(|e| format!("MOUNTPOINT {}: {e}", mountpoint.display()))?;
    if entries.next().is_some() {
        return Err(format!(
            "MOUNTPOINT {} is not empty; mount on an empty directory",
            mountpoint.display()
        ));
    }
    if mount_c.starts_with(&backing_c) {
        return Err(format!(
            "MOUNTPOINT {} is inside BACKING_DIR {}; the mount would serve itself",
            mountpoint.display(),
            backing.display()
        ));
    }
    Ok((backing_c, mount_c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("wb-fuse-paths-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn mountinfo_escapes_as_the_kernel_does() {
        assert_eq!(
            mountinfo_escape(Path::new("/tmp/a b\\c\td\ne")),
            "/tmp/a\\040b\\134c\\011d\\012e"
        );
    }

    #[test]
    fn refuses_bad_mountpoints() {
        let backing = temp("backing");
        let mnt = temp("mnt");
        assert!(check_paths(&backing, &mnt).is_ok());
        let inside = backing.join("mnt");
        std::fs::create_dir(&inside).expect("mkdir");
        let e = check_paths(&backing, &inside).unwrap_err();
        assert!(e.contains("inside BACKING_DIR"), "{e}");
        std::fs::write(mnt.join("f"), b"x").expect("write");
        let e = check_paths(&backing, &mnt).unwrap_err();
        assert!(e.contains("not empty"), "{e}");
        let e = check_paths(&backing, &mnt.join("f")).unwrap_err();
        assert!(e.contains("not a directory"), "{e}");
        let e = check_paths(&backing.join("nope"), &mnt).unwrap_err();
        assert!(e.contains("BACKING_DIR"), "{e}");
        let _ = std::fs::remove_dir_all(&backing);
        let _ = std::fs::remove_dir_all(&mnt);
    }
}
