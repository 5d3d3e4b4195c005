//! Keeping the inode table within its share of open descriptors.
//!
//! The server holds an O_PATH descriptor for every inode the kernel
//! remembers (inode.rs), and the kernel remembers every inode with a
//! cached dentry: after a tree of 100,000 files is written through the
//! mount, 100,000 descriptors, far past a usual limit of 20,000 (and
//! raising the hard limit needs CAP_SYS_RESOURCE). FUSE drops an inode as
//! soon as no dentry holds it (`generic_delete_inode`) and then sends
//! FORGET, so the server asks the kernel to drop the dentries of the least
//! recently looked-up inodes (FUSE_NOTIFY_INVAL_ENTRY) once the table
//! holds more than its budget, down to [`LOW_PERCENT`] of it. A dentry in
//! use (an open file, a working directory) only loses its name in the
//! dcache; the next lookup brings it back.
//!
//! The notifications go from a thread of their own ([`spawn`]), never from
//! a request handler: the kernel takes the directory's lock to invalidate
//! an entry, which a request in that directory may hold.

use crate::inode::InodeTable;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the table's size is looked at.
const INTERVAL: Duration = Duration::from_millis(20);
/// Pruning brings the table down to this share of its budget.
const LOW_PERCENT: usize = 80;

/// The inodes the table may hold before it asks the kernel to forget
/// some: `share_percent` of the open-file limit `nofile`.
pub fn inode_budget(nofile: u64, share_percent: u64) -> usize {
    (nofile * share_percent / 100).max(64) as usize
}

/// Starts the thread that keeps `inodes` within `budget`, sending its
/// notifications through `notifier`. It ends when `stop`'s sender is
/// dropped (it looks every [`INTERVAL`]) or when the session does (a
/// notification then fails with something other than ENOENT).
pub fn spawn(
    inodes: Arc<InodeTable>,
    notifier: fuser::Notifier,
    budget: usize,
    stop: Receiver<()>,
) -> std::io::Result<JoinHandle<()>> {
    let low = budget * LOW_PERCENT / 100;
    std::thread::Builder::new()
        .name("wb-prune".into())
        .spawn(move || loop {
            match stop.recv_timeout(INTERVAL) {
                Err(RecvTimeoutError::Timeout) => {}
                Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
            }
            let held = inodes.len();
            if held <= budget {
                continue;
            }
            for (parent, name) in inodes.take_least_recent(held - low) {
                match notifier.inval_entry(fuser::INodeNo(parent), &name) {
                    Ok(()) => {}
                    // Gone from the dcache already (or renamed): nothing to drop.
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                    Err(_) => return,
                }
            }
        })
}
