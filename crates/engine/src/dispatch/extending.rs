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
//! (`Growing::release`, from `io_complete`). The held writes are bounded
//! by the device's tags, which they hold.
//!
//! Linux: the block layer does not order them; ext4 and XFS do, under
//! the inode's lock (above).

use crate::action::{Action, IoDir, IoRequest};
use crate::ids::{FileId, IoId, PageIndex, PAGE_SIZE};
use crate::page_cache::CachedFile;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, VecDeque};

/// Files with a write in flight that makes them longer.
#[derive(Debug, Default)]
pub(crate) struct Growing {
    /// By file: that write, and the writes held behind it, oldest first.
    files: BTreeMap<FileId, (IoId, VecDeque<IoRequest>)>,
}

/// Whether `req`, of file `f`, is a write-back that ends past the file's
/// backing length (`IoRequest::extends`).
pub(crate) fn extends_backing(req: &IoRequest, f: &CachedFile) -> bool {
    req.dir == IoDir::Write && !req.direct && req.first_page * PAGE_SIZE + req.bytes > f.disk_size
}

impl Growing {
    /// Hands `req`, issued, to the runtime (`out`); or holds it if it
    /// extends its file while another write doing so is in flight and
    /// the device takes them `one_per_file`.
    pub fn submit_or_hold(
        &mut self,
        req: IoRequest,
        one_per_file: bool,
        out: &mut VecDeque<Action>,
    ) {
        if req.extends && one_per_file {
            match self.files.entry(req.file) {
                Entry::Occupied(mut held) => {
                    held.get_mut().1.push_back(req);
                    return;
                }
                Entry::Vacant(slot) => {
                    slot.insert((req.id, VecDeque::new()));
                }
            }
        }
        out.push_back(Action::Submit(req));
    }

    /// Write `req` of file `f` completed (`disk_size` counts it if it
    /// landed). If it was its file's extending write in flight, the writes
    /// held behind it go, oldest first, until one that still extends the
    /// file goes: it is the one in flight now, and the rest stay held.
    /// `note_extends` tells the table of requests in flight whether each
    /// write handed over extends the file now.
    pub fn release(
        &mut self,
        req: &IoRequest,
        f: &CachedFile,
        mut note_extends: impl FnMut(IoId, bool),
        out: &mut VecDeque<Action>,
    ) {
        let file = req.file;
        let Some((current, held)) = self.files.get_mut(&file) else {
            return;
        };
        if *current != req.id {
            return;
        }
        while let Some(mut next) = held.pop_front() {
            next.extends = extends_backing(&next, f);
            note_extends(next.id, next.extends);
            let extends = next.extends;
            if extends {
                *current = next.id;
            }
            out.push_back(Action::Submit(next));
            if extends {
                return;
            }
        }
        self.files.remove(&file);
    }

    /// Whether page `page` of `file` is in a write held back (issued, its
    /// pages under writeback, not yet handed to the runtime).
    pub fn holds(&self, file: FileId, page: PageIndex) -> bool {
        let held = self.files.get(&file).into_iter().flat_map(|(_, h)| h);
        held.into_iter()
            .any(|r| r.first_page <= page && page < r.first_page + r.pages as u64)
    }

    /// Writes held are issued writes of their file, in flight behind one
    /// that is. `write_of`: the file of a write in flight, by id.
    pub fn check(&self, write_of: impl Fn(IoId) -> Option<FileId>) {
        for (file, (id, held)) in &self.files {
            let ours = |id: &IoId| write_of(*id) == Some(*file);
            assert!(ours(id), "file {file:?}: its extending write is in flight");
            for req in held {
                assert!(ours(&req.id), "file {file:?}: a held write is issued");
                assert!(req.id > *id, "file {file:?}: held behind an older write");
            }
        }
    }
}
