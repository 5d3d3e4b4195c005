//! Dispatch: handing requests to the device. Reads need only a request
//! tag (they queue for one in arrival order); writes need a tag and wbt's
//! admission for their class. `pump` issues what the device can take now:
//! waiting reads first, then integrity (sync) writes, then flusher writes
//! in round robin over the device's writeback contexts.
//!
//! A device with `extending_writes = one-per-file` takes a file's
//! write-backs that make it longer one at a time, in order: `issue` holds
//! such a write while another of the file is in flight, and its
//! completion hands the held one over (extending.rs, with the reasons: a
//! killed process must leave no hole below a higher write, and ext4 and
//! XFS run these writes one at a time anyway).

pub(crate) mod extending;
pub(crate) mod inflight;

use crate::action::WbReason;
use crate::action::WbtClass;
use crate::action::{IoDir, IoRequest};
use crate::config::ExtendingWrites;
use crate::dispatch::extending::extends_backing;
use crate::dispatch::inflight::Inflight;
use crate::engine::Engine;
use crate::ids::{DeviceId, FileId, IoId, PageIndex, WbId, PAGE_SIZE};
use crate::page_cache::{PG_DIRTY, PG_WRITEBACK};
use crate::time::Instant;

/// How many works one flusher looks at per request before giving up
/// (works that find nothing to write end at once).
const MAX_WORKS_PER_PICK: usize = 8;

/// The wbt class a flusher work's writes are admitted under.
pub(crate) fn class_of(reason: WbReason) -> WbtClass {
    match reason {
        // Integrity writeback is REQ_SYNC.
        WbReason::Sync => WbtClass::Sync,
        // Background and kupdate writeback is REQ_BACKGROUND.
        WbReason::Background | WbReason::Periodic => WbtClass::Background,
        // Uncached writes' writeback is neither: Linux's
        // filemap_fdatawrite_range and the DONTCACHE work set no flag.
        WbReason::Vmscan | WbReason::BalanceDirty | WbReason::Dontcache => WbtClass::Normal,
    }
}

impl Engine {
    /// Issues whatever the device can take now: waiting reads first (they
    /// only need a tag), then integrity writes, then flusher writes in
    /// round robin over the device's contexts, each as wbt admits it.
    pub(crate) fn pump(&mut self, now: Instant, device: DeviceId) {
        // An unlinked file's release may have waited for this I/O.
        self.pump_backlog(now, device);
        loop {
            loop {
                let dev = &mut self.devices[device.index()];
                // Reads go in arrival order, no more in flight than the
                // device may reorder without favouring one reader.
                if dev.tags_used >= dev.config.nr_requests
                    || dev.reads_inflight >= dev.read_depth_max
                {
                    break;
                }
                // A write phase holds reads (`wbt_slice.rs`); what
                // arrived after a held read waits behind it.
                let held = |r: &IoRequest| r.dir == IoDir::Read && dev.wbt.holds_reads(now);
                if dev.tag_waiters.front().is_none_or(held) {
                    break;
                }
                let Some(req) = dev.tag_waiters.pop_front() else {
                    break;
                };
                self.issue(now, req, false, false);
            }
            let dev = &self.devices[device.index()];
            if dev.tags_used >= dev.config.nr_requests {
                return;
            }
            if self.pump_syncs(now, device) {
                continue;
            }
            let dev = &self.devices[device.index()];
            let n = dev.wbs.len();
            let start = dev.next_wb;
            let mut progress = false;
            for k in 0..n {
                let idx = (start + k) % n;
                let wb = self.devices[device.index()].wbs[idx];
                if self.pump_wb(now, wb) {
                    self.devices[device.index()].next_wb = idx + 1;
                    progress = true;
                    break;
                }
            }
            if !progress {
                return;
            }
        }
    }

    /// Issues one request from a context's flusher, if wbt and the work allow.
    fn pump_wb(&mut self, now: Instant, wb_id: WbId) -> bool {
        for _ in 0..MAX_WORKS_PER_PICK {
            if !self.flusher_pick(now, wb_id) {
                return false;
            }
            let reason = self.wbs[wb_id.index()]
                .flusher
                .current
                .as_ref()
                .map(|w| w.reason)
                .expect("picked");
            let device = self.wbs[wb_id.index()].device;
            let class = class_of(reason);
            let recent = self.devices[device.index()].recent_dirty_sleep(now);
            let wbt = &mut self.devices[device.index()].wbt;
            if !wbt.may_issue(class, now, recent) {
                wbt.note_refused(class, now);
                return false;
            }
            match self.flusher_build(now, wb_id) {
                Some(req) => {
                    self.issue(now, req, true, false);
                    return true;
                }
                None => {
                    // The work found nothing (more) to write: it is done.
                    self.wbs[wb_id.index()].flusher.current = None;
                }
            }
        }
        false
    }

    /// Moves pages from dirty to under writeback and builds their request.
    pub(crate) fn start_writeback(
        &mut self,
        file: FileId,
        start: PageIndex,
        pages: u64,
        class: WbtClass,
        reason: WbReason,
    ) -> IoRequest {
        let f = &mut self.cache.files[file.index()];
        let before = f.counts();
        f.update(start, start + pages, |flags| {
            assert!(flags & PG_DIRTY != 0 && flags & PG_WRITEBACK == 0);
            (flags & !PG_DIRTY) | PG_WRITEBACK
        });
        assert_eq!(
            before.dirty - f.counts().dirty,
            pages,
            "all pages were dirty"
        );
        f.writeback_index = start + pages;
        self.cache.account(file, before);
        let f = &mut self.cache.files[file.index()];
        let wb = &mut self.wbs[f.wb.index()];
        if f.counts().dirty == 0 {
            if let Some(when) = f.dirtied_when.take() {
                wb.dirty_files.remove(&(when, file));
            }
        }
        let device = f.device;
        let bytes = write_bytes(f.size, start, pages);
        let c = &self.cache;
        self.stats
            .note_peaks(c.nr_dirty, c.nr_writeback, c.nr_cached);
        let id = IoId(self.io.next_io);
        self.io.next_io += 1;
        IoRequest {
            id,
            device,
            file,
            dir: IoDir::Write,
            first_page: start,
            pages: pages as u32,
            bytes,
            class: Some(class),
            reason: Some(reason),
            direct: false,
            commit: false,
            extends: false,
        }
    }

    /// Hands a request to the runtime. `commit`: a write of an fsync that
    /// tagged at most `COMMIT_WRITE_MAX_PAGES` in all, someone's commit
    /// waiting (wbt.rs; sync/ decides).
    /// A write-back that extends its file may be held behind another
    /// (extending.rs): it is issued all the same, and handed over later.
    pub(crate) fn issue(&mut self, now: Instant, mut req: IoRequest, tracked: bool, commit: bool) {
        req.commit = commit;
        req.extends = extends_backing(&req, &self.cache.files[req.file.index()]);
        let dev = &mut self.devices[req.device.index()];
        assert!(
            dev.tags_used < dev.config.nr_requests,
            "issue without a free tag"
        );
        dev.tags_used += 1;
        dev.stats.inflight_peak = dev.stats.inflight_peak.max(dev.tags_used);
        match req.dir {
            IoDir::Write => {
                if tracked {
                    dev.wbt.on_write_issue(now);
                }
                if commit {
                    dev.wbt.on_commit_issue(now);
                }
                dev.stats.writes += 1;
                self.cache.files[req.file.index()]
                    .inflight_writes
                    .insert(req.id);
            }
            IoDir::Read => {
                dev.reads_inflight += 1;
                dev.wbt.slice.note_read_issued(req.id);
                dev.wbt.on_read_issue(now, req.id);
                dev.stats.reads += 1;
            }
        }
        self.io.inflight.insert(
            req.id,
            Inflight {
                req: req.clone(),
                issued_at: now,
                tracked,
                commit,
                snapshot_frames: Vec::new(),
            },
        );
        let device = &self.devices[req.device.index()].config;
        let one_per_file = device.extending_writes == ExtendingWrites::OnePerFile;
        let out = &mut self.actions;
        self.io.growing.submit_or_hold(req, one_per_file, out);
    }

    /// Issues an untracked request (a read, a direct write) if a tag is
    /// free and none waits before it (and, for a read, the device may
    /// take another); else it waits for a tag in arrival order.
    pub(crate) fn issue_or_queue(&mut self, now: Instant, req: IoRequest) {
        let dev = &mut self.devices[req.device.index()];
        let read_room = req.dir != IoDir::Read || dev.reads_inflight < dev.read_depth_max;
        let held = req.dir == IoDir::Read && dev.wbt.holds_reads(now);
        if dev.tags_used < dev.config.nr_requests
            && dev.tag_waiters.is_empty()
            && read_room
            && !held
        {
            self.issue(now, req, false, false);
        } else {
            if held {
                dev.wbt.slice.note_read_held(now, req.id);
            }
            dev.tag_waiters.push_back(req);
        }
    }

    /// Reads pages that were inserted as PG_READING.
    pub(crate) fn submit_read(
        &mut self,
        now: Instant,
        file: FileId,
        first_page: PageIndex,
        pages: u64,
    ) {
        let req = self.untracked_request(file, IoDir::Read, first_page, pages, false);
        self.issue_or_queue(now, req);
    }

    /// A new request that wbt does not track (a read, a direct write),
    /// with the next id.
    pub(crate) fn untracked_request(
        &mut self,
        file: FileId,
        dir: IoDir,
        first_page: PageIndex,
        pages: u64,
        direct: bool,
    ) -> IoRequest {
        let id = IoId(self.io.next_io);
        self.io.next_io += 1;
        IoRequest {
            id,
            device: self.cache.files[file.index()].device,
            file,
            dir,
            first_page,
            pages: pages as u32,
            bytes: pages * PAGE_SIZE,
            class: None,
            reason: None,
            direct,
            commit: false,
            extends: false,
        }
    }
}

/// A planted bug for the simulator's oracle (wb-sim's tests/planted.rs):
/// writes carry whole pages, past the file's end.
const PLANTED_WHOLE_PAGES: bool = cfg!(feature = "planted-whole-pages");

/// The bytes a write of `pages` pages from `start` carries in a file of
/// `size` bytes: whole pages, but never past the file's end. A dirty page
/// lies below the end (truncation discards the pages past it), so the
/// write holds at least one byte; were that broken, the whole pages go, as
/// before this bound existed, rather than a write of nothing that would
/// mark dirty data clean.
pub(crate) fn write_bytes(size: u64, start: PageIndex, pages: u64) -> u64 {
    let whole = pages * PAGE_SIZE;
    let to_end = size.saturating_sub(start * PAGE_SIZE);
    debug_assert!(to_end > 0, "a dirty page past the file's end");
    if to_end == 0 || PLANTED_WHOLE_PAGES {
        whole
    } else {
        whole.min(to_end)
    }
}
