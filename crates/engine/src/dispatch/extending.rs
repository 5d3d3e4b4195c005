//! Write-backs that make their file longer, one at a time per file, in
//! order: the device property `extending_writes = one-per-file`.
//!
//! A write-back extends its file when it ends past the backing file's
//! length as the engine made it (`disk_size`, backing_len/): the request
//! says so (`IoRequest::extends`). Under `one-per-file`, such a write of a
//! file that has another in flight is held: it is built and accounted as
//! issued (its pages are under writeback, it holds its tag and counts
//! for wbt, a sync waits for it), but handed to the runtime only once
//! that one completes, oldest first. Writes within the backing length,
//! reads, direct writes and other files' writes are never held.
//!
//! Why (the real runtime sets it):
//! - A killed process leaves the kernel to finish what it was handed, and
//!   nothing more. Two writes growing a file both in the kernel's hands
//!   may still end with only the higher one done (the lower one waiting
//!   for an io_uring worker is cancelled at exit, or short with its rest
//!   not yet resubmitted): the file is then longer than its data, with a
//!   hole of zeros below, which it never held. One at a time, in the
//!   order the flusher grows a file (from its lowest page, flusher/), the
//!   backing file is always a state the file passed through.
//! - Filesystems run them one at a time anyway: ext2/3/4 holds the
//!   inode's lock exclusively until the device has completed an O_DIRECT
//!   write past the end, and XFS must wait for the writes in flight before
//!   one that starts past the end (on an XFS loop device, 16 such 512 KiB
//!   writes in flight: 230 MB/s; one at a time: 553 MB/s).
//!
//! Nothing waits forever: a held write waits only for a write the runtime
//! has been handed, and goes as soon as that one completes, failed or not
//! (`release_extending`, from `io_complete`). The held writes are bounded
//! by the device's tags, which they hold.
//!
//! Linux: the block layer does not order them; ext4 and XFS do, under
//! the inode's lock (above).

use crate::action::{Action, IoDir, IoRequest};
use crate::config::ExtendingWrites;
use crate::engine::Engine;
use crate::ids::{FileId, IoId, PAGE_SIZE};
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, VecDeque};

/// Files with a write in flight that makes them longer.
#[derive(Debug, Default)]
pub(crate) struct Growing {
    /// By file: that write, and the writes held behind it, oldest first.
    files: BTreeMap<FileId, (IoId, VecDeque<IoRequest>)>,
}

impl Engine {
    /// Whether `req` is a write-back that ends past its file's backing
    /// length (`IoRequest::extends`).
    pub(crate) fn extends_backing(&self, req: &IoRequest) -> bool {
        req.dir == IoDir::Write
            && !req.direct
            && req.first_page * PAGE_SIZE + req.bytes > self.files[req.file.index()].disk_size
    }

    /// Hands `req`, issued, to the runtime; or holds it if it extends its
    /// file while another write doing so is in flight and the device
    /// takes them one per file.
    pub(crate) fn submit_or_hold(&mut self, req: IoRequest) {
        let one_per_file =
            self.devices[req.device.index()].config.extending_writes == ExtendingWrites::OnePerFile;
        if req.extends && one_per_file {
            match self.io.growing.files.entry(req.file) {
                Entry::Occupied(mut held) => {
                    held.get_mut().1.push_back(req);
                    return;
                }
                Entry::Vacant(slot) => {
                    slot.insert((req.id, VecDeque::new()));
                }
            }
        }
        self.actions.push_back(Action::Submit(req));
    }

    /// Write `req` completed (`disk_size` counts it if it landed). If it
    /// was its file's extending write in flight, the writes held behind it
    /// go, oldest first, until one that still extends the file goes: it is
    /// the one in flight now, and the rest stay held.
    pub(crate) fn release_extending(&mut self, req: &IoRequest) {
        let file = req.file;
        if self.io.growing.files.get(&file).map(|g| g.0) != Some(req.id) {
            return;
        }
        loop {
            let (_, held) = self.io.growing.files.get_mut(&file).expect("present");
            let Some(mut next) = held.pop_front() else {
                self.io.growing.files.remove(&file);
                return;
            };
            next.extends = self.extends_backing(&next);
            if let Some(inflight) = self.io.inflight.get_mut(&next.id) {
                inflight.req.extends = next.extends;
            }
            let extends = next.extends;
            if extends {
                self.io.growing.files.get_mut(&file).expect("present").0 = next.id;
            }
            self.actions.push_back(Action::Submit(next));
            if extends {
                return;
            }
        }
    }

    /// Writes held are issued writes of their file, in flight behind one
    /// that is.
    pub(crate) fn check_growing(&self) {
        for (file, (id, held)) in &self.io.growing.files {
            let ours = |id: &IoId| {
                self.io
                    .inflight
                    .get(id)
                    .is_some_and(|w| w.req.file == *file && w.req.dir == IoDir::Write)
            };
            assert!(ours(id), "file {file:?}: its extending write is in flight");
            for req in held {
                assert!(ours(&req.id), "file {file:?}: a held write is issued");
                assert!(req.id > *id, "file {file:?}: held behind an older write");
            }
        }
    }
}
