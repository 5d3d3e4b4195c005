//! The requests handed to the runtime and not yet completed, and the
//! next request id (dispatch/ issues them, completion.rs retires them).

use crate::action::{IoDir, IoRequest, WbReason, WbtClass};
use crate::dispatch::extending::Growing;
use crate::ids::{DeviceId, FileId, IoId, PageIndex, TaskId};
use crate::time::Instant;
use std::collections::{BTreeMap, BTreeSet};

/// A request handed to the runtime and not yet completed.
#[derive(Debug)]
pub(crate) struct Inflight {
    pub req: IoRequest,
    pub issued_at: Instant,
    /// Counted against wbt's in-flight limit.
    pub tracked: bool,
    /// A write of a commit (`Engine::issue`).
    pub commit: bool,
    /// Frames the request still writes from after writers were given
    /// copies of their pages (page_cache/stable.rs), as (first frame, count): freed at
    /// completion.
    pub snapshot_frames: Vec<(u32, u64)>,
}

/// The requests in flight, and the next request id (ids only grow, so
/// "issued before" is "smaller id").
#[derive(Debug)]
pub(crate) struct IoTable {
    pub inflight: BTreeMap<IoId, Inflight>,
    pub next_io: u64,
    /// Direct write requests in flight, by the task that waits for them.
    pub direct_ios: BTreeMap<IoId, TaskId>,
    /// Files with a write-back in flight that makes them longer, and the
    /// ones held behind it (extending.rs).
    pub growing: Growing,
}

impl Default for IoTable {
    fn default() -> IoTable {
        IoTable {
            inflight: BTreeMap::new(),
            next_io: 1,
            direct_ios: BTreeMap::new(),
            growing: Growing::default(),
        }
    }
}

impl IoTable {
    /// A new request with the next id: `pages` pages of `file` (on
    /// `device`) from `first_page`, carrying `bytes`; `class` and
    /// `reason` for a flusher's or a sync's write-back (wbt tracks it),
    /// None for a read or a direct write.
    pub fn request(
        &mut self,
        (device, file): (DeviceId, FileId),
        dir: IoDir,
        (first_page, pages, bytes): (PageIndex, u64, u64),
        written_back: Option<(WbtClass, WbReason)>,
        direct: bool,
    ) -> IoRequest {
        let id = IoId(self.next_io);
        self.next_io += 1;
        IoRequest {
            id,
            device,
            file,
            dir,
            first_page,
            pages: pages as u32,
            bytes,
            class: written_back.map(|(class, _)| class),
            reason: written_back.map(|(_, reason)| reason),
            direct,
            commit: false,
            extends: false,
        }
    }

    /// The write among `writes` (a file's writes in flight) that carries
    /// `page` (one exists for every page under writeback).
    pub fn write_carrying(&self, writes: &BTreeSet<IoId>, page: PageIndex) -> IoId {
        *writes
            .iter()
            .find(|id| {
                let req = &self.inflight[*id].req;
                (req.first_page..req.first_page + req.pages as u64).contains(&page)
            })
            .expect("a page under writeback has its write in flight")
    }

    /// A writer got copies of pages `page..` of a run under writeback
    /// (page_cache/stable.rs): the write carrying them keeps `frames`,
    /// freed when it completes.
    pub fn keep_frames(&mut self, writes: &BTreeSet<IoId>, page: PageIndex, frames: (u32, u64)) {
        let id = self.write_carrying(writes, page);
        let write = self.inflight.get_mut(&id).expect("in flight");
        write.snapshot_frames.push(frames);
    }
}
