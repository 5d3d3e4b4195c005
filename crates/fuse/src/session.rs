//! A mounted filesystem being served: [`MountSession`], as [`crate::mount`]
//! returns it. Ending it ([`MountSession::unmount`], or dropping it) does
//! what `wb mount` does at a signal: data changes are refused (after the
//! ones under way), the mount is detached, every dirty page is written
//! back, the orphan directory goes (once empty), the serving threads end,
//! and a trace under way is written.

use crate::lifecycle::{Event, Lifecycle, Mounted};
use crate::mount::trace_written;
use crate::mount_error::{MountError, TraceWritten};
use crate::TraceTarget;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use writeback::Cache;

/// A mounted filesystem being served; unmounted when dropped.
pub struct MountSession {
    lifecycle: Lifecycle,
    /// None once unmounted.
    mounted: Option<Mounted>,
    cache: Arc<Cache>,
    backing: PathBuf,
    mountpoint: PathBuf,
    device: String,
    description: String,
    trace: Option<TraceTarget>,
}

impl std::fmt::Debug for MountSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MountSession")
            .field("backing", &self.backing)
            .field("mountpoint", &self.mountpoint)
            .field("device", &self.device)
            .field("mounted", &self.mounted.is_some())
            .finish()
    }
}

/// What [`crate::mount`] hands over to the session.
pub(crate) struct Parts {
    pub lifecycle: Lifecycle,
    pub mounted: Mounted,
    pub cache: Arc<Cache>,
    pub backing: PathBuf,
    pub mountpoint: PathBuf,
    pub device: String,
    pub description: String,
    pub trace: Option<TraceTarget>,
}

/// What an unmount did.
#[derive(Debug)]
#[must_use]
pub struct Unmounted {
    /// Ok once every dirty page is written back to the backing directory.
    pub written_back: Result<(), MountError>,
    /// The trace under way, written to its file (`MountOptions::trace`).
    pub trace: Option<TraceWritten>,
    /// Whether the serving threads ended. Not where files stay open on
    /// the detached mount and the connection cannot be aborted (fusectl
    /// not mounted): they end with the last close.
    pub serving_ended: bool,
}

impl MountSession {
    pub(crate) fn new(parts: Parts) -> MountSession {
        MountSession {
            lifecycle: parts.lifecycle,
            mounted: Some(parts.mounted),
            cache: parts.cache,
            backing: parts.backing,
            mountpoint: parts.mountpoint,
            device: parts.device,
            description: parts.description,
            trace: parts.trace,
        }
    }

    /// The backing directory, canonical.
    pub fn backing_dir(&self) -> &Path {
        &self.backing
    }

    /// Where it is mounted, canonical.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// The engine's name of the backing directory's device (its directory
    /// in `.writeback`).
    pub fn device(&self) -> &str {
        &self.device
    }

    /// The cache serving the files.
    pub fn cache(&self) -> &Arc<Cache> {
        &self.cache
    }

    /// "serving BACKING at MOUNTPOINT (engine: ..., memory ...: where the
    /// budget came from, ..., device ..., stable_writes ...)", as at the
    /// mount: what `wb mount` prints once serving.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Waits until serving ends (`umount MOUNTPOINT`, or serving failed)
    /// or, with `MountOptions::signals`, a signal arrives. Then call
    /// [`MountSession::unmount`] (or drop the session) to write back.
    pub fn wait(&self) -> Event {
        self.lifecycle.wait()
    }

    /// Ends the session: see the module's description. Ok once every dirty
    /// page is written back (and a trace under way written).
    pub fn unmount(self) -> Result<(), MountError> {
        let ended = self.unmount_with(|_, _| {});
        ended.written_back?;
        match ended.trace {
            Some(TraceWritten {
                path,
                result: Err(source),
            }) => Err(MountError::TraceWrite { path, source }),
            _ => Ok(()),
        }
    }

    /// As [`MountSession::unmount`], calling `progress(dirty_bytes,
    /// writeback_bytes)` every `PROGRESS_INTERVAL` while writing back,
    /// and telling all that happened.
    pub fn unmount_with(mut self, progress: impl FnMut(u64, u64)) -> Unmounted {
        self.end(progress)
    }

    fn end(&mut self, progress: impl FnMut(u64, u64)) -> Unmounted {
        let Some(mounted) = self.mounted.take() else {
            return Unmounted {
                written_back: Ok(()),
                trace: None,
                serving_ended: true,
            };
        };
        let written_back = self
            .lifecycle
            .shutdown(&mounted, &self.cache, progress)
            .map_err(MountError::WriteBack);
        if written_back.is_ok() {
            // Every release is done (sync waits for the backlogs): the
            // orphan directory is empty, and BACKING_DIR as it was.
            crate::remove_orphan_dir(&self.backing);
        }
        let serving_ended = mounted.end_serving();
        // A trace still under way covers the shutdown too.
        let trace = trace_written(&self.cache, &self.trace);
        Unmounted {
            written_back,
            trace,
            serving_ended,
        }
    }
}

impl Drop for MountSession {
    /// Unmounts a session not unmounted yet (a caller that returned
    /// early, a test that failed), saying on standard error what failed.
    fn drop(&mut self) {
        if self.mounted.is_none() {
            return;
        }
        let ended = self.end(|_, _| {});
        if let Err(e) = ended.written_back {
            eprintln!("wb-fuse: unmounting {}: {e}", self.mountpoint.display());
        }
        if let Some(TraceWritten {
            path,
            result: Err(e),
        }) = ended.trace
        {
            eprintln!(
                "wb-fuse: writing the trace to {} failed: {e}",
                path.display()
            );
        }
    }
}
