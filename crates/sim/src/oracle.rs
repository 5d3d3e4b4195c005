//! The durability oracle: what each page of each file holds in the cache,
//! in the device's volatile write cache and on its media, as version
//! numbers (the simulator moves no data: a version stands for the bytes
//! one write put there), and what syncs acknowledged.
//!
//! - A write's copy into the cache (`Action::CopyIn`) gives its pages the
//!   version of the write.
//! - A write request carries its pages' versions as they are when it is
//!   submitted; completed without error, they are in the device's volatile
//!   cache.
//! - A flush (`Action::MakeDurable`) makes the device's whole volatile
//!   cache durable, as a FLUSH does.
//! - An fsync (or sync) that returns Ok acknowledges the versions its
//!   file's (every file's) pages had when it began.
//! - A power cut loses the volatile cache; writes in flight are torn,
//!   each 4 KiB page either written or not. Then every acknowledged
//!   version must be on the media, or a newer one (`durability`).
//! - The backing file's length (`disk_len`) grows as writes complete, by
//!   the bytes each carried (`IoRequest::bytes`), and a flush sets it to
//!   the file's length.
//! - A process crash loses the cache, not the device's: every
//!   acknowledged version must be in the volatile cache or on the media,
//!   and every file at least as long as a sync found it. What the backing
//!   file holds must be a state the file passed through: never longer
//!   than the file ever was (no page-rounded tail), and no page below its
//!   length that was never written back unless the file held zeros there
//!   (a hole it was extended over) or it was there at the start. The
//!   engine then restarts over what survived, at the backing file's
//!   length; its cache holds what the device holds.

use crate::rng::Rng;
use std::collections::HashMap;
use wb_engine::PAGE_SIZE;

/// Versions of one file's pages (as long as needed so far: files grow).
type Pages = Vec<u64>;

/// `pages` with room for `len` pages at least.
fn room(pages: &mut Pages, len: usize) -> &mut Pages {
    if pages.len() < len {
        pages.resize(len, 0);
    }
    pages
}

pub struct DataModel {
    /// Per engine file: the cache's, the volatile cache's, the media's and
    /// the acknowledged version of each page (0: never written).
    cache: Vec<Pages>,
    volatile: Vec<Pages>,
    durable: Vec<Pages>,
    acked: Vec<Pages>,
    /// The device of each file.
    device: Vec<usize>,
    /// Write requests in flight: id -> (file, first page, versions, the
    /// byte their data ends at).
    inflight: HashMap<u64, (usize, usize, Pages, u64)>,
    /// Per job: the version of its write in progress, and the versions
    /// its sync in progress will acknowledge (file, versions).
    op_version: Vec<u64>,
    syncing: Vec<Vec<(usize, Pages, u64)>>,
    next_version: u64,
    /// Per file: the length its last flush persisted, and the longest a
    /// sync that returned Ok found it.
    durable_size: Vec<u64>,
    synced_size: Vec<u64>,
    /// Per file: the backing file's length (grown by completed writes,
    /// set by flushes), the file's length now and the longest it has been.
    disk_len: Vec<u64>,
    size_now: Vec<u64>,
    max_len: Vec<u64>,
    /// Per file: pages the device held at the start (version 0 there is
    /// their old content), and pages that may read as zeros: the file held
    /// zeros there at some moment (a hole a write past the end skipped
    /// over), or their write-back failed (an error every handle hears of).
    start_pages: Vec<usize>,
    zero_held: Vec<Vec<bool>>,
}

impl DataModel {
    /// For files on devices `device` of `sizes` bytes at the start (one
    /// entry a file: what is on the device already), and `jobs` jobs.
    pub fn new(device: &[usize], sizes: &[u64], jobs: usize) -> DataModel {
        let blank: Vec<Pages> = vec![Vec::new(); device.len()];
        DataModel {
            cache: blank.clone(),
            volatile: blank.clone(),
            durable: blank.clone(),
            acked: blank,
            device: device.to_vec(),
            inflight: HashMap::new(),
            op_version: vec![0; jobs],
            syncing: vec![Vec::new(); jobs],
            next_version: 1,
            durable_size: sizes.to_vec(),
            synced_size: vec![0; device.len()],
            disk_len: sizes.to_vec(),
            size_now: sizes.to_vec(),
            max_len: sizes.to_vec(),
            start_pages: sizes
                .iter()
                .map(|&s| s.div_ceil(PAGE_SIZE) as usize)
                .collect(),
            zero_held: vec![Vec::new(); device.len()],
        }
    }

    /// Job `job` starts a write: its copies carry a new version.
    pub fn write_begins(&mut self, job: usize) {
        self.op_version[job] = self.next_version;
        self.next_version += 1;
    }

    /// `Action::CopyIn` of job `job` into `file`'s bytes `pos..pos + len`.
    pub fn copy_in(&mut self, job: usize, file: usize, pos: u64, len: u64) {
        let v = self.op_version[job];
        let first = (pos / PAGE_SIZE) as usize;
        let end = (pos + len).div_ceil(PAGE_SIZE) as usize;
        // A write past the end: the whole pages it skips are a hole the
        // file now holds as zeros.
        let hole_from = self.size_now[file].div_ceil(PAGE_SIZE) as usize;
        if first > hole_from {
            let held = &mut self.zero_held[file];
            if held.len() < first {
                held.resize(first, false);
            }
            held[hole_from..first].fill(true);
        }
        self.size_now[file] = self.size_now[file].max(pos + len);
        self.max_len[file] = self.max_len[file].max(self.size_now[file]);
        room(&mut self.cache[file], end)[first..end].fill(v);
    }

    /// A write request of `pages` pages of `file` from `first`, carrying
    /// `bytes` bytes, is submitted.
    pub fn submitted(&mut self, id: u64, file: usize, first: usize, pages: usize, bytes: u64) {
        let cache = room(&mut self.cache[file], first + pages);
        let versions = cache[first..first + pages].to_vec();
        let end = first as u64 * PAGE_SIZE + bytes;
        self.inflight.insert(id, (file, first, versions, end));
    }

    /// Request `id` completed (`ok`: without error).
    pub fn completed(&mut self, id: u64, ok: bool) {
        let Some((file, first, versions, end_byte)) = self.inflight.remove(&id) else {
            return;
        };
        let end = first + versions.len();
        if ok {
            room(&mut self.volatile[file], end)[first..end].copy_from_slice(&versions);
            self.disk_len[file] = self.disk_len[file].max(end_byte);
        } else {
            let held = &mut self.zero_held[file];
            if held.len() < end {
                held.resize(end, false);
            }
            held[first..end].fill(true);
        }
    }

    /// A flush of `file`, setting its backing file's length to `len` first
    /// if given: its device's whole volatile cache is durable, and the
    /// backing file's length.
    pub fn flushed(&mut self, file: usize, len: Option<u64>) {
        if let Some(len) = len {
            self.disk_len[file] = len;
        }
        self.durable_size[file] = self.disk_len[file];
        let device = self.device[file];
        for f in 0..self.cache.len() {
            if self.device[f] == device {
                self.persist(f);
            }
        }
    }

    /// The backing file of `file` was set to `len` bytes (a truncation).
    pub fn length_set(&mut self, file: usize, len: u64) {
        self.disk_len[file] = len;
        self.size_now[file] = len;
    }

    /// What the volatile cache holds of file `f` is on the media.
    fn persist(&mut self, f: usize) {
        let volatile = &self.volatile[f];
        room(&mut self.durable[f], volatile.len())[..volatile.len()].copy_from_slice(volatile);
    }

    /// Job `job` starts an fsync of `file`, or a sync (None: every file);
    /// `size(file)` is a file's length now.
    pub fn sync_begins(&mut self, job: usize, file: Option<usize>, size: impl Fn(usize) -> u64) {
        let files: Vec<usize> = match file {
            Some(f) => vec![f],
            None => (0..self.cache.len()).collect(),
        };
        self.syncing[job] = files
            .into_iter()
            .map(|f| (f, self.cache[f].clone(), size(f)))
            .collect();
    }

    /// Job `job`'s sync returned (`ok`: Ok): what it began with is acknowledged.
    pub fn sync_returned(&mut self, job: usize, ok: bool) {
        let synced = std::mem::take(&mut self.syncing[job]);
        if !ok {
            return;
        }
        for (file, versions, size) in synced {
            self.synced_size[file] = self.synced_size[file].max(size);
            let acked = room(&mut self.acked[file], versions.len());
            for (acked, v) in acked.iter_mut().zip(versions) {
                *acked = (*acked).max(v);
            }
        }
    }

    /// The power goes: the volatile caches are lost, writes in flight torn
    /// (each page written or not, drawn from `rng`). Returns the first
    /// acknowledged page not on the media, as (file, page, acked, found),
    /// and how many pages were checked.
    pub fn power_cut(&mut self, rng: &mut Rng) -> (Option<(usize, usize, u64, u64)>, u64) {
        let mut ids: Vec<u64> = self.inflight.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let (file, first, versions, _) = &self.inflight[&id];
            let durable = room(&mut self.durable[*file], first + versions.len());
            for (i, &v) in versions.iter().enumerate() {
                if rng.below(2) == 1 {
                    durable[first + i] = v;
                }
            }
        }
        let mut checked = 0;
        for (file, acked) in self.acked.iter().enumerate() {
            for (page, &want) in acked.iter().enumerate() {
                checked += 1;
                let found = self.durable[file].get(page).copied().unwrap_or(0);
                if found < want {
                    return (Some((file, page, want, found)), checked);
                }
            }
        }
        (None, checked)
    }
}

/// A page or a length that a crash lost.
#[derive(Debug, PartialEq, Eq)]
pub enum Lost {
    /// (file, page, acknowledged version, surviving version).
    Page(usize, usize, u64, u64),
    /// (file, length a sync found, length that survived).
    Size(usize, u64, u64),
    /// (file, backing file's length, the longest the file ever was).
    Longer(usize, u64, u64),
    /// (file, page): below the backing file's length, never written back,
    /// and never a hole of the file.
    Hole(usize, usize),
}

impl DataModel {
    /// The version of `file`'s `page` the device holds (cache or media).
    fn on_device(&self, file: usize, page: usize) -> u64 {
        let v = self.volatile[file].get(page).copied().unwrap_or(0);
        v.max(self.durable[file].get(page).copied().unwrap_or(0))
    }

    /// The process crashes: the cache is gone, the device keeps its
    /// volatile cache and finishes the writes in flight (those `fails`
    /// names fail). Returns the first
    /// acknowledged page or length that did not survive, and the checks
    /// made. The cache then holds what the device does (a restarted
    /// engine reads it back), and syncs in progress are gone.
    pub fn crash(&mut self, fails: impl Fn(u64) -> bool) -> (Option<Lost>, u64) {
        // What the process handed to the device lands (a kernel finishes
        // the I/O a killed process submitted), unless it fails.
        let mut ids: Vec<u64> = self.inflight.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let ok = !fails(id);
            self.completed(id, ok);
        }
        let mut checked = 0;
        let mut lost = None;
        for (file, acked) in self.acked.iter().enumerate() {
            for (page, &want) in acked.iter().enumerate() {
                checked += 1;
                let survived = self.on_device(file, page);
                if survived < want && lost.is_none() {
                    lost = Some(Lost::Page(file, page, want, survived));
                }
            }
            checked += 1;
            let (synced, kept) = (self.synced_size[file], self.disk_len[file]);
            if kept < synced && lost.is_none() {
                lost = Some(Lost::Size(file, synced, kept));
            }
            if lost.is_none() {
                lost = self.passed_through(file);
            }
            checked += 1;
        }
        for file in 0..self.cache.len() {
            let survived: Pages = (0..self.cache[file].len())
                .map(|p| self.on_device(file, p))
                .collect();
            self.cache[file] = survived;
            self.size_now[file] = self.disk_len[file];
        }
        for syncing in &mut self.syncing {
            syncing.clear();
        }
        (lost, checked)
    }

    /// Whether the backing file of `file` is a state the file passed
    /// through: never longer than it was, and every page below its length
    /// written back, there at the start, or a hole the file held.
    fn passed_through(&self, file: usize) -> Option<Lost> {
        let len = self.disk_len[file];
        if len > self.max_len[file] {
            return Some(Lost::Longer(file, len, self.max_len[file]));
        }
        let held = &self.zero_held[file];
        (self.start_pages[file]..len.div_ceil(PAGE_SIZE) as usize)
            .find(|&page| {
                self.on_device(file, page) == 0 && !held.get(page).copied().unwrap_or(false)
            })
            .map(|page| Lost::Hole(file, page))
    }

    /// A restarted engine flushes every device once (as the runtime does
    /// when it meets a device: syncfs of its directory).
    pub fn flush_all(&mut self) {
        for f in 0..self.cache.len() {
            self.persist(f);
        }
    }

    /// The length a restarted engine finds `file` at: the backing file's.
    pub fn surviving_size(&self, file: usize) -> u64 {
        self.disk_len[file]
    }
}
