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
    /// Write requests in flight: id -> (file, first page, versions).
    inflight: HashMap<u64, (usize, usize, Pages)>,
    /// Per job: the version of its write in progress, and the versions
    /// its sync in progress will acknowledge (file, versions).
    op_version: Vec<u64>,
    syncing: Vec<Vec<(usize, Pages)>>,
    next_version: u64,
}

impl DataModel {
    /// For files on devices `device` (one entry a file), and `jobs` jobs.
    pub fn new(device: &[usize], jobs: usize) -> DataModel {
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
        room(&mut self.cache[file], end)[first..end].fill(v);
    }

    /// A write request of `pages` pages of `file` from `first` is submitted.
    pub fn submitted(&mut self, id: u64, file: usize, first: usize, pages: usize) {
        let cache = room(&mut self.cache[file], first + pages);
        let versions = cache[first..first + pages].to_vec();
        self.inflight.insert(id, (file, first, versions));
    }

    /// Request `id` completed (`ok`: without error).
    pub fn completed(&mut self, id: u64, ok: bool) {
        let Some((file, first, versions)) = self.inflight.remove(&id) else {
            return;
        };
        if ok {
            let end = first + versions.len();
            room(&mut self.volatile[file], end)[first..end].copy_from_slice(&versions);
        }
    }

    /// A flush of `file`'s device: its whole volatile cache is durable.
    pub fn flushed(&mut self, file: usize) {
        let device = self.device[file];
        for f in 0..self.cache.len() {
            if self.device[f] == device {
                let volatile = &self.volatile[f];
                room(&mut self.durable[f], volatile.len())[..volatile.len()]
                    .copy_from_slice(volatile);
            }
        }
    }

    /// Job `job` starts an fsync of `file`, or a sync (None: every file).
    pub fn sync_begins(&mut self, job: usize, file: Option<usize>) {
        let files: Vec<usize> = match file {
            Some(f) => vec![f],
            None => (0..self.cache.len()).collect(),
        };
        self.syncing[job] = files
            .into_iter()
            .map(|f| (f, self.cache[f].clone()))
            .collect();
    }

    /// Job `job`'s sync returned (`ok`: Ok): what it began with is acknowledged.
    pub fn sync_returned(&mut self, job: usize, ok: bool) {
        let synced = std::mem::take(&mut self.syncing[job]);
        if !ok {
            return;
        }
        for (file, versions) in synced {
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
            let (file, first, versions) = &self.inflight[&id];
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
