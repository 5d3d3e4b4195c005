//! `wb-fuse`: the FUSE front end of the writeback engine. `wb mount
//! BACKING_DIR MOUNTPOINT` serves a directory through the engine so that
//! unmodified programs get its writeback policies; it calls [`mount`],
//! which a program (or a test) can call too:
//!
//! ```no_run
//! let options = wb_fuse::MountOptions::new("/srv/data", "/mnt/wb").knob("memory", "1GiB");
//! let session = wb_fuse::mount(options)?;        // mounted and served
//! std::fs::write(session.mountpoint().join("f"), b"hello")?;
//! session.unmount()?;                            // everything written back
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! - File data goes through [`writeback::Cache`]; files are opened with
//!   direct I/O on the FUSE side, so the kernel's page cache is bypassed
//!   and there is exactly one cache.
//! - Metadata comes from the backing directory, reached passthrough_ll
//!   style: O_PATH descriptors and *at system calls with single names, so
//!   the server never follows a symlink and `..` cannot escape
//!   (`inode.rs`, `sys.rs`, `meta.rs`).
//! - Knobs and statistics are files under `MOUNT/.writeback/` (`control.rs`).
//! - Signals and `umount` write all dirty data back before exit (`lifecycle.rs`).
//! - The inode table stays within its share of open descriptors: the
//!   kernel is asked to forget the least recently used (`prune.rs`).
//! - A removed file's last name goes to a hidden orphan directory and its
//!   blocks are freed in steps behind the request (`orphans.rs`).
//!
//! One concept per file: `fs.rs` (request routing), `inode.rs` (inode
//! table), `handles.rs` (open handles), `data.rs` (file data through the
//! engine), `meta.rs` (metadata), `dir.rs` (listings), `xattr.rs`
//! (extended attributes), `control.rs`, `stats_text.rs` and
//! `metrics_text.rs` (the `.writeback` tree), `attr.rs` (attributes), `orphans.rs` (removed files), `sys.rs` (system calls),
//! `lifecycle.rs` (mount and shutdown), `mount.rs` (the library call:
//! checks, the cache, the mount), `session.rs` (a mount being served and
//! its end), `mount_error.rs` (why mounting failed).

mod attr;
mod cgroup;
mod control;
mod data;
mod dir;
mod dir_entry;
mod fs;
mod handles;
mod inode;
mod lifecycle;
mod meta;
mod metrics_text;
mod mount;
mod mount_error;
mod ops;
mod orphans;
mod prune;
mod requests;
mod session;
mod stats_text;
mod sys;
mod uring;
mod xattr;

pub use control::{write_trace, TraceTarget, CONTROL_DIR};
pub use fs::{Backing, StopHandle, WbFs, ATTR_TTL_EXCLUSIVE, ATTR_TTL_SHARED, MAX_WRITE_BYTES};
pub use lifecycle::{
    check_paths, fd_limit, raise_fd_limit, Event, Lifecycle, BACKING_FILES_PERCENT, INODES_PERCENT,
    PROGRESS_INTERVAL, SERVE_END_TIMEOUT, SERVE_THREADS,
};
pub use mount::{mount, MountFlag, MountOptions, Uring};
pub use mount_error::{MountError, TraceWritten};
pub use orphans::{remove_orphan_dir, ORPHAN_DIR};
pub use session::{MountSession, Unmounted};
pub use uring::available as uring_available;
pub use xattr::DONTCACHE_XATTR;
