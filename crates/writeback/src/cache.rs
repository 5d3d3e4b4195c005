//! [`Cache`]: a page cache over files on real filesystems, written back by
//! the engine's policies. Backing files are opened with O_DIRECT, so the
//! engine, not the kernel's page cache, decides what is cached and when it
//! is written.

use crate::error::Error;
use crate::file::File;
use crate::io::{self, DeviceProfile};
use crate::runtime::block_queue::{
    max_sectors_kb, nr_requests, queue_depth, read_ahead_kb, serial, stable_writes_required,
};
use crate::runtime::diskstats::DiskStats;
use crate::runtime::shared::Shared;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};
use wb_engine::{Config, DeviceConfig, DomainId, Engine, FileId, Stats};

/// Idle read latency assumed for a device when calibration is off (1 ms).
pub const UNCALIBRATED_READ_LATENCY_NS: u64 = 1_000_000;
/// How long calibrating a new device may take.
pub const CALIBRATION_BUDGET: Duration = Duration::from_secs(3);

/// Builds a [`Cache`].
///
/// ```
/// let dir = std::env::temp_dir();
/// let cache = writeback::Cache::builder()
///     .knob("memory", "64MiB")?
///     .knob("dirty_ratio", "20")?
///     .device_knob("wbt_lat_usec", "-1")?
///     .calibrate(false)
///     .build()?;
/// # Ok::<(), writeback::Error>(())
/// ```
pub struct CacheBuilder {
    config: Config,
    device: DeviceConfig,
    data_dir: PathBuf,
    calibrate: bool,
    io_backend: Option<String>,
    io_workers: usize,
    max_files: Option<usize>,
    faults: Option<crate::io::Faults>,
    writeout: Writeout,
    follow_memory_pressure: bool,
}

/// How writeback hands pages to the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Writeout {
    /// From the cache's own frames (O_DIRECT from the aligned frames, no
    /// copy). What a writer may do with a page under writeback is the
    /// device's `stable_writes`.
    #[default]
    ZeroCopy,
    /// Each page copied into an I/O buffer first (a snapshot of every page
    /// written, whatever the device needs): the path of before zero-copy,
    /// kept to measure zero-copy against (`wb bench stable`).
    Copy,
}

impl CacheBuilder {
    /// Sets a cache-wide knob (`memory`, `dirty_ratio`, `dirty_bytes`, ...).
    pub fn knob(mut self, knob: &str, value: &str) -> Result<Self, Error> {
        self.config.set(knob, value)?;
        Ok(self)
    }

    /// Replaces all cache-wide knobs at once.
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Sets a knob for every device the cache meets (`wbt_lat_usec`, `max_ratio`, ...).
    pub fn device_knob(mut self, knob: &str, value: &str) -> Result<Self, Error> {
        self.device.set(knob, value)?;
        Ok(self)
    }

    /// Where device calibrations are remembered (default `./wb-data`).
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = dir.into();
        self
    }

    /// Measure each new device's idle read latency (default on). Off, the
    /// automatic wbt target assumes 1 ms reads.
    pub fn calibrate(mut self, on: bool) -> Self {
        self.calibrate = on;
        self
    }

    /// Forces an I/O backend: "io_uring" or "threads" (default: io_uring if it works).
    pub fn io_backend(mut self, name: &str) -> Self {
        self.io_backend = Some(name.to_string());
        self
    }

    /// How many backing files the cache keeps open at most before it lets
    /// go of idle ones (default: the knob `backing_files_percent`, 50, of
    /// the process's open-file limit, within [64, 65536]; given here, the
    /// knob changes nothing).
    pub fn max_files(mut self, files: usize) -> Self {
        self.max_files = Some(files.max(1));
        self
    }

    /// Sends every I/O through the fault seam: the writes `faults` asks
    /// for fail (for tests of write-back errors; see [`crate::io::Faults`]).
    pub fn faults(mut self, faults: crate::io::Faults) -> Self {
        self.faults = Some(faults);
        self
    }

    /// How writeback hands pages to the device (default
    /// [`Writeout::ZeroCopy`]).
    pub fn writeout(mut self, writeout: Writeout) -> Self {
        self.writeout = writeout;
        self
    }

    /// Follow memory pressure (default off): ten times a second the cache
    /// samples the memory where the process runs (MemAvailable, the
    /// limits of its cgroups and their use, PSI memory stalls) and the
    /// engine moves the budget between `memory_min` and `memory`: it
    /// gives memory back at once when others need it (clean pages first,
    /// oldest first; dirty ones once written back) and takes it again,
    /// gradually, once the pressure is gone. `memory` is then the
    /// ceiling; [`Stats::memory`] tells where the budget stands and why.
    /// See [`crate::sample_memory`] and `wb_engine::start_budget` for a
    /// `memory` taken from where the process runs.
    pub fn follow_memory_pressure(mut self, on: bool) -> Self {
        self.follow_memory_pressure = on;
        self
    }

    pub fn build(self) -> Result<Cache, Error> {
        let (tx, rx) = std::sync::mpsc::channel();
        let backend = match &self.io_backend {
            Some(name) => io::backend_by_name(name, tx.clone(), self.io_workers)
                .map_err(|e| Error::io(format!("io backend {name}"), e))?,
            None => io::open_backend(tx.clone(), self.io_workers),
        };
        let backend: Box<dyn io::IoBackend> = match self.faults.clone() {
            Some(faults) => Box::new(io::faults::FaultyBackend::new(backend, faults, tx)),
            None => backend,
        };
        let clock_start = wb_engine::Instant::ZERO;
        let mut engine = Engine::new(self.config, clock_start);
        // Backing files kept open at most: the engine chooses which go.
        let percent = engine.config().backing_files_percent;
        let max_files = self
            .max_files
            .unwrap_or_else(|| crate::runtime::open_files::backing_files_max(percent));
        engine.set_max_files(Some(max_files));
        let memory_bytes = engine.frame_pages() * wb_engine::PAGE_SIZE;
        let shared = Shared::new(engine, backend, self.writeout).map_err(|e| {
            Error::io(
                format!(
                    "reserving the cache's memory ({})",
                    wb_engine::units::format_bytes(memory_bytes)
                ),
                e,
            )
        })?;
        let shared = Arc::new(shared);
        let completion = {
            let s = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("wb-completion".into())
                .spawn(move || s.completion_loop(rx))
                .map_err(|e| Error::io("thread wb-completion", e))?
        };
        let timer = {
            let s = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("wb-timer".into())
                .spawn(move || s.timer_loop())
                .map_err(|e| Error::io("thread wb-timer", e))?
        };
        let release = {
            let s = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("wb-release".into())
                .spawn(move || s.release_loop())
                .map_err(|e| Error::io("thread wb-release", e))?
        };
        let populate = {
            let s = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("wb-populate".into())
                .spawn(move || crate::runtime::populate::populate_loop(&s))
                .map_err(|e| Error::io("thread wb-populate", e))?
        };
        let mut threads = vec![completion, timer, release, populate];
        if self.follow_memory_pressure {
            let s = Arc::clone(&shared);
            let follow = std::thread::Builder::new()
                .name("wb-memory".into())
                .spawn(move || crate::runtime::memory_follow::follow_loop(&s))
                .map_err(|e| Error::io("thread wb-memory", e))?;
            threads.push(follow);
        }
        Ok(Cache {
            shared,
            threads,
            device_defaults: self.device,
            data_dir: self.data_dir,
            calibrate: self.calibrate,
            max_files_given: self.max_files.is_some(),
        })
    }
}

/// A page cache with Linux's writeback policies over files on real filesystems.
///
/// Dropping the cache writes back all dirty data first; call
/// [`Cache::sync`] to see whether that succeeded.
pub struct Cache {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    device_defaults: DeviceConfig,
    data_dir: PathBuf,
    calibrate: bool,
    /// The builder was given `max_files`: `backing_files_percent` changes
    /// nothing.
    max_files_given: bool,
}

/// A writeback domain of a [`Cache`] (see [`Cache::domain`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Domain(DomainId);

impl Domain {
    /// The domain every file belongs to unless opened in another.
    pub const ROOT: Domain = Domain(DomainId(0));
}

/// How to open a file.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenOptions {
    /// Create the file if it does not exist.
    pub create: bool,
}

impl Cache {
    pub fn builder() -> CacheBuilder {
        CacheBuilder {
            config: Config::default(),
            device: DeviceConfig::default(),
            data_dir: PathBuf::from("wb-data"),
            calibrate: true,
            io_backend: None,
            writeout: Writeout::default(),
            io_workers: 4,
            max_files: None,
            faults: None,
            follow_memory_pressure: false,
        }
    }

    /// The I/O backend in use: "io_uring" or "threads".
    pub fn io_backend(&self) -> &'static str {
        self.shared.backend_name
    }

    /// Opens (or with `create`, creates) a file through the cache. Every
    /// handle of the same file shares its cached pages. The file belongs
    /// to the root writeback domain unless it was opened before in another.
    pub fn open(&self, path: impl AsRef<Path>, options: OpenOptions) -> Result<File, Error> {
        self.open_in(path, options, Domain::ROOT)
    }

    /// The writeback domain (tenant) named `name`, made if new. A domain
    /// has its own dirty share, flusher accounting and uncached-write
    /// count on each device, as a cgroup has in Linux; `stats().domains`
    /// reports each. Names are 1 to 256 printable characters.
    ///
    /// ```
    /// use writeback::{Cache, OpenOptions};
    /// # let dir = std::env::temp_dir().join(format!("wb-doc-dom-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # if !writeback::io::supports_direct(&dir) { wb_testkit::skip("no O_DIRECT in the temp dir"); return Ok(()); }
    /// let cache = Cache::builder().knob("memory", "64MiB")?.calibrate(false).build()?;
    /// let batch = cache.domain("batch")?;
    /// let file = cache.open_in(dir.join("job"), OpenOptions { create: true }, batch)?;
    /// file.write_at(&[1u8; 65536], 0)?;
    /// let stats = cache.stats();
    /// let d = stats.domains.iter().find(|d| d.domain == "batch").unwrap();
    /// assert_eq!(d.dirtied_pages, 16);
    /// assert!(cache.domain("").is_err());
    /// # drop(file); drop(cache); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn domain(&self, name: &str) -> Result<Domain, Error> {
        let mut core = self.shared.lock();
        core.engine
            .domain(name)
            .map(Domain)
            .map_err(|e| Error::Domain(e.to_string()))
    }

    /// As [`Cache::open`], the file in writeback domain `domain` (if the
    /// cache does not know the file yet; a file belongs to the domain it
    /// was first opened in, as a Linux inode belongs to the cgroup that
    /// first dirtied it).
    pub fn open_in(
        &self,
        path: impl AsRef<Path>,
        options: OpenOptions,
        domain: Domain,
    ) -> Result<File, Error> {
        let path = path.as_ref();
        let backing = io::open_direct(path, options.create).map_err(|e| Error::io(path, e))?;
        self.open_backing_in(backing, path, domain)
    }

    /// Sets up the device (filesystem) holding `dir` with its own knobs,
    /// before any file on it is opened; later files on it share them.
    /// Calibrates the device if calibration is on. Returns false if the
    /// device was already set up (its knobs are left as they are).
    pub fn add_device(&self, dir: &Path, name: &str, config: DeviceConfig) -> Result<bool, Error> {
        let st_dev = io::device_id(dir).map_err(|e| Error::io(dir, e))?;
        if self.shared.lock().devices.contains_key(&st_dev) {
            return Ok(false);
        }
        let idle_ns = self.idle_latency(dir)?;
        flush_at_start(dir)?;
        let mut core = self.shared.lock();
        if core.devices.contains_key(&st_dev) {
            return Ok(false);
        }
        let config = with_device_queue(config, st_dev);
        let d = core.engine.add_device(name, config, idle_ns);
        core.engine
            .set_stable_writes_required(d, stable_writes_required(st_dev))
            .expect("the device was just added");
        core.devices.insert(st_dev, d);
        register_dir(&mut core, d, dir, self.shared.clock.now());
        if let Some(stats) = DiskStats::for_st_dev(st_dev) {
            core.diskstats.push((d, stats));
        }
        Ok(true)
    }

    fn idle_latency(&self, dir: &Path) -> Result<u64, Error> {
        if !self.calibrate {
            return Ok(UNCALIBRATED_READ_LATENCY_NS);
        }
        let profile: DeviceProfile = io::calibrate(dir, &self.data_dir, CALIBRATION_BUDGET)
            .map_err(|e| Error::io(dir, e))?;
        Ok(profile.idle_read_latency_ns)
    }

    /// The engine device for a filesystem, calibrated on first use.
    fn device_for(&self, path: &Path, st_dev: u64) -> Result<wb_engine::DeviceId, Error> {
        if let Some(&d) = self.shared.lock().devices.get(&st_dev) {
            return Ok(d);
        }
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let idle_ns = self.idle_latency(dir)?;
        flush_at_start(dir)?;
        let mut core = self.shared.lock();
        if let Some(&d) = core.devices.get(&st_dev) {
            return Ok(d);
        }
        let name = format!("dev-{st_dev:x}");
        let config = with_device_queue(self.device_defaults.clone(), st_dev);
        let d = core.engine.add_device(&name, config, idle_ns);
        core.engine
            .set_stable_writes_required(d, stable_writes_required(st_dev))
            .expect("the device was just added");
        core.devices.insert(st_dev, d);
        register_dir(&mut core, d, dir, self.shared.clock.now());
        if let Some(stats) = DiskStats::for_st_dev(st_dev) {
            core.diskstats.push((d, stats));
        }
        Ok(d)
    }

    /// Removes a file's name. Open handles keep working (as on Unix).
    ///
    /// When that was the file's last name, the release of its data (its
    /// cached and dirty pages, and on the backing filesystem its blocks,
    /// which ext4 frees synchronously: seconds for a large fragmented
    /// file) is deferred work on its device's backlog: the name is gone
    /// when this returns, the blocks are freed in steps behind it, after
    /// the last handle closes. A full backlog holds the caller back for
    /// about `backlog_wait_ms` (the engine's `backlog/`); [`Cache::sync`]
    /// waits until every release is done.
    pub fn unlink(&self, path: impl AsRef<Path>) -> Result<(), Error> {
        self.remove(path.as_ref(), false)
    }

    /// Removes the regular file at `path` later, name and all: for a front
    /// end that first moves a file's last name where only it looks (the
    /// mount's orphan directory), so that a crash cannot leave a file
    /// nobody can name. Its release (cached and dirty pages dropped, its
    /// blocks freed in steps) is backlog work as for [`Cache::unlink`],
    /// after its last handle closes; its last step removes `path`. A crash
    /// before then leaves `path`: pass it here again at the next start.
    /// A file with another name is just unlinked (nothing to release).
    pub fn remove_later(&self, path: impl AsRef<Path>) -> Result<(), Error> {
        self.remove(path.as_ref(), true)
    }

    /// Removes `path`'s name now, or (`later`) by the last step of the
    /// file's release; the release is the backlog's.
    fn remove(&self, path: &Path, later: bool) -> Result<(), Error> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(path).map_err(|e| Error::io(path, e))?;
        if !meta.is_file() || meta.nlink() > 1 {
            // Nothing to release: another name keeps the data, or it is
            // not a regular file.
            return std::fs::remove_file(path).map_err(|e| Error::io(path, e));
        }
        // Known to the cache, or made known: the cache's descriptor keeps
        // the blocks until the backlog releases them.
        let file = self.known_file(path, &meta)?;
        if later {
            let name = path.to_path_buf();
            self.shared.lock().remove_at_release.insert(file, name);
        } else {
            std::fs::remove_file(path).map_err(|e| Error::io(path, e))?;
        }
        self.shared.unlink_when_closed(file)
    }

    /// The cache's file for the regular file at `path` (with `meta`),
    /// added (opened read/write, no handle) if the cache does not know it.
    fn known_file(&self, path: &Path, meta: &std::fs::Metadata) -> Result<FileId, Error> {
        use std::os::unix::fs::MetadataExt;
        let key = (meta.dev(), meta.ino());
        if let Some(&f) = self.shared.lock().by_inode.get(&key) {
            return Ok(f);
        }
        let device = self.device_for(path, meta.dev())?;
        let backing = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        let mut core = self.shared.lock();
        if core.closed {
            return Err(Error::Closed);
        }
        if let Some(&f) = core.by_inode.get(&key) {
            return Ok(f);
        }
        let now = self.shared.clock.now();
        let f = core
            .engine
            .add_file(now, device, DomainId(0), meta.len())
            .map_err(|e| Error::Internal(format!("adding {}: {e}", path.display())))?;
        core.add_file(f, backing, key, meta.len());
        Ok(f)
    }

    /// Writes back every dirty page and waits for it (sync(2)); then makes
    /// the backing files durable.
    pub fn sync(&self) -> Result<(), Error> {
        self.shared
            .run_op(|e, now, task| e.sync(now, task), None, |_, _, _| {})
    }

    /// Changes a cache-wide knob at run time.
    pub fn set_knob(&self, knob: &str, value: &str) -> Result<(), Error> {
        let mut core = self.shared.lock();
        core.engine.set_knob(knob, value)?;
        self.shared.tuning.update(core.engine.config());
        if knob == "backing_files_percent" && !self.max_files_given {
            let percent = core.engine.config().backing_files_percent;
            let max_files = crate::runtime::open_files::backing_files_max(percent);
            core.engine.set_max_files(Some(max_files));
        }
        Ok(())
    }

    pub fn stats(&self) -> Stats {
        self.shared.lock().engine.stats()
    }

    /// The cache's figures as metric families (counters, gauges,
    /// histograms with labels), from one snapshot of [`Cache::stats`]:
    /// render them with [`crate::telemetry::render_prometheus`].
    pub fn metric_families(&self) -> Vec<crate::telemetry::Family> {
        let (stats, age) = self.shared.snapshot(&self.shared.lock());
        crate::telemetry::families(&stats, age)
    }

    /// Publishes the cache's counters and gauges to the `metrics` facade
    /// now (the timer thread does every second; see telemetry/). Without
    /// a recorder installed, nothing happens.
    #[cfg(feature = "metrics")]
    pub fn publish_metrics(&self) {
        let families = self.metric_families();
        crate::telemetry::facade::publish(&families);
    }

    /// Bytes of the cache's memory backed ahead of use or in use, as its
    /// populating thread last saw them: at most 32 MiB beyond the highest
    /// frame in use, never beyond the budget (runtime/populate.rs).
    pub fn populated_bytes(&self) -> u64 {
        self.shared
            .populated_pages
            .load(std::sync::atomic::Ordering::Acquire)
            * wb_engine::PAGE_SIZE
    }

    /// How many writes the cache carried out on the thread of a caller
    /// waiting for them, instead of handing them to its I/O backend: the
    /// writes of commits (an fsync or sync of a few pages, as the engine
    /// defines them), which then wait for no other thread.
    pub fn writes_on_caller(&self) -> u64 {
        self.shared
            .writes_on_caller
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The frames in use end below this many bytes of the cache's memory
    /// (the engine hands frames out first fit, from the start).
    pub fn frames_used_bytes(&self) -> u64 {
        self.shared.lock().engine.frames_used_end() * wb_engine::PAGE_SIZE
    }

    /// The few counters a timeline samples (dirty, writeback, cached,
    /// thresholds, per-device progress, stall totals): cheaper than
    /// [`Cache::stats`], which copies every histogram and name.
    pub fn gauges(&self) -> wb_engine::Gauges {
        self.shared.lock().engine.gauges()
    }

    /// How long the oldest dirty data has waited to be written back (since
    /// its file was first dirtied), None with nothing dirty: what a crash
    /// of this process would lose is at most this old (and the flusher
    /// writes back what is `dirty_expire_centisecs` old).
    pub fn oldest_dirty_age(&self) -> Option<Duration> {
        let since = self.shared.lock().engine.oldest_dirtied_at()?;
        let now = self.shared.clock.now();
        Some(Duration::from_nanos(now.since_ns(since)))
    }

    /// Starts recording a trace of the cache (a [`crate::Trace`]: each
    /// task's stalls by reason, each device's reads and writes in flight,
    /// dirty and writeback pages), keeping the last `events` events (at
    /// least one); a trace already under way is dropped. Get it with
    /// [`Cache::stop_trace`] and write it with `Trace::write_json` for
    /// Perfetto:
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let cache = writeback::Cache::builder().build()?;
    /// cache.start_trace(100_000);
    /// // ... work ...
    /// if let Some(trace) = cache.stop_trace() {
    ///     trace.write_json(&mut std::fs::File::create("trace.json")?)?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn start_trace(&self, events: usize) {
        self.shared.lock().trace = Some(crate::runtime::trace::RuntimeTrace::new(events));
    }

    /// Whether a trace is being recorded.
    pub fn tracing(&self) -> bool {
        self.shared.lock().trace.is_some()
    }

    /// Stops recording and hands the trace over (None if none was on).
    pub fn stop_trace(&self) -> Option<crate::Trace> {
        self.shared.lock().trace.take().map(|t| t.trace)
    }

    // ---- For front ends that open files themselves (the FUSE server). ----

    /// Opens through the cache a backing file the caller already opened
    /// read/write with O_DIRECT (a FUSE server opens files relative to a
    /// directory descriptor so that it never follows a symlink). `path`
    /// names the file in errors; its parent directory is where a device
    /// met for the first time is calibrated. If the cache already knows the
    /// file (same st_dev and st_ino), `backing` is closed and the cache's
    /// own descriptor is used, as [`Cache::open`] does.
    pub fn open_backing(
        &self,
        backing: std::fs::File,
        path: impl Into<PathBuf>,
    ) -> Result<File, Error> {
        self.open_backing_in(backing, path, Domain::ROOT)
    }

    /// As [`Cache::open_backing`], in writeback domain `domain` (see
    /// [`Cache::open_in`]).
    pub fn open_backing_in(
        &self,
        backing: std::fs::File,
        path: impl Into<PathBuf>,
        domain: Domain,
    ) -> Result<File, Error> {
        use std::os::unix::fs::MetadataExt;
        let path = path.into();
        let meta = backing.metadata().map_err(|e| Error::io(&path, e))?;
        let key = (meta.dev(), meta.ino());
        let device = self.device_for(&path, meta.dev())?;
        let mut core = self.shared.lock();
        if core.closed {
            return Err(Error::Closed);
        }
        let file = match core.by_inode.get(&key) {
            Some(&f) => f,
            None => {
                let now = self.shared.clock.now();
                let f = core
                    .engine
                    .add_file(now, device, domain.0, meta.len())
                    .map_err(|e| Error::Internal(format!("adding {}: {e}", path.display())))?;
                core.add_file(f, backing, key, meta.len());
                f
            }
        };
        let handle = core
            .engine
            .open(file)
            .map_err(|e| Error::Internal(format!("opening {}: {e}", path.display())))?;
        let size = Arc::clone(&core.sizes[file.index()]);
        let modified = Arc::clone(&core.modified[file.index()]);
        // Adding a file may have let idle ones go (their flushes first).
        let out = core.drain(None);
        drop(core);
        self.shared.carry_out(out);
        Ok(File::new(
            Arc::clone(&self.shared),
            file,
            handle,
            size,
            modified,
            path,
        ))
    }

    /// A file the cache knows, by its backing `st_dev` and `st_ino`, has
    /// no name left (a front end removed it): its release (its pages, and
    /// its blocks, cut in steps) is handed to its device's backlog, after
    /// its last handle closes (see [`Cache::unlink`]). Returns false for a
    /// file the cache does not know.
    pub fn release_unlinked(&self, st_dev: u64, st_ino: u64) -> Result<bool, Error> {
        let Some(file) = self.shared.lock().by_inode.get(&(st_dev, st_ino)).copied() else {
            return Ok(false);
        };
        self.shared.unlink_when_closed(file)?;
        Ok(true)
    }

    /// Writes back the dirty data of a file the cache knows, by its backing
    /// `st_dev` and `st_ino`, and waits until it has landed, without a
    /// flush (see [`File::write_back`]). Returns false for a file the cache
    /// does not know (nothing of it is cached).
    pub fn write_back(&self, st_dev: u64, st_ino: u64) -> Result<bool, Error> {
        let Some(file) = self.shared.lock().by_inode.get(&(st_dev, st_ino)).copied() else {
            return Ok(false);
        };
        self.shared.run_op(
            |e, now, task| e.write_back_file(now, task, file),
            None,
            |_, _, _| {},
        )?;
        Ok(true)
    }

    /// Sets the modification time of a file the cache knows, by its
    /// backing `st_dev` and `st_ino` (a front end setting times, as
    /// utimensat does): its write-backs keep the backing file's mtime at
    /// `time` until the next change through the cache. The caller sets the
    /// backing file's own times. Returns false for a file the cache does
    /// not know.
    pub fn set_modified(&self, st_dev: u64, st_ino: u64, time: SystemTime) -> bool {
        let core = self.shared.lock();
        let Some(file) = core.by_inode.get(&(st_dev, st_ino)).copied() else {
            return false;
        };
        let ns = crate::runtime::times::from_system_time(time);
        core.modified[file.index()].store(ns, Ordering::Relaxed);
        true
    }

    /// The length and modification time of a file the cache knows, by its
    /// backing `st_dev` and `st_ino`: the length including extensions not
    /// yet written back, and when it was last changed through the cache
    /// (None if it has not been: the backing file's mtime is right). None
    /// if the cache does not know the file.
    pub fn cached_state(&self, st_dev: u64, st_ino: u64) -> Option<(u64, Option<SystemTime>)> {
        let core = self.shared.lock();
        let file = *core.by_inode.get(&(st_dev, st_ino))?;
        let len = core.sizes[file.index()].load(Ordering::Acquire);
        let ns = core.modified[file.index()].load(Ordering::Relaxed);
        Some((len, crate::runtime::times::to_system_time(ns)))
    }

    /// Lets go of a file nobody uses, by its backing `st_dev` and `st_ino`:
    /// if no [`File`] has it open and nothing of it is dirty or in flight,
    /// its writes are made durable, its cached pages dropped and its backing
    /// descriptor closed. Returns whether it went (false if busy or
    /// unknown). The cache also does this by itself when it holds too many
    /// files; a front end calls it when a file's last name and handle are
    /// gone, so its space is freed at once.
    pub fn evict(&self, st_dev: u64, st_ino: u64) -> Result<bool, Error> {
        let key = (st_dev, st_ino);
        let mut core = self.shared.lock();
        let Some(file) = core.by_inode.get(&key).copied() else {
            return Ok(false);
        };
        if !core.engine.release_file(file) {
            return Ok(false);
        }
        let out = core.drain(None);
        drop(core);
        // Its flush, if it needs one, then the eviction itself.
        self.shared.carry_out(out);
        let core = self.shared.lock();
        if core.by_inode.contains_key(&key) && core.engine.file_unsynced(file) {
            return Err(Error::Internal(
                "the file's landed writes could not be flushed; the next sync reports why".into(),
            ));
        }
        Ok(!core.by_inode.contains_key(&key))
    }

    /// Files the cache knows and has not evicted (each holds a backing
    /// descriptor).
    pub fn files(&self) -> usize {
        self.shared.lock().engine.live_files()
    }

    /// The length of a file the cache knows, by its backing `st_dev` and
    /// `st_ino`, including extensions not yet written back; None if the
    /// cache never opened it. Until written back, the backing file's own
    /// length may be shorter, or longer by up to a page (O_DIRECT writes
    /// whole pages), so a front end reporting sizes must ask here first.
    pub fn cached_len(&self, st_dev: u64, st_ino: u64) -> Option<u64> {
        let core = self.shared.lock();
        let file = *core.by_inode.get(&(st_dev, st_ino))?;
        Some(core.sizes[file.index()].load(Ordering::Acquire))
    }

    /// How much of a file the cache holds, by its backing `st_dev` and
    /// `st_ino`: (cached bytes, of which on the active list: used
    /// repeatedly, kept from a stream; see the engine's lru.rs). None if
    /// the cache does not know the file.
    pub fn cached_bytes(&self, st_dev: u64, st_ino: u64) -> Option<(u64, u64)> {
        let core = self.shared.lock();
        let file = *core.by_inode.get(&(st_dev, st_ino))?;
        let (cached, active) = core.engine.file_cached_pages(file)?;
        Some((cached * wb_engine::PAGE_SIZE, active * wb_engine::PAGE_SIZE))
    }

    /// The names of the devices (filesystems) the cache has set up, in the
    /// order of [`Stats::devices`].
    pub fn device_names(&self) -> Vec<String> {
        let stats = self.shared.lock().engine.stats();
        stats.devices.into_iter().map(|d| d.name).collect()
    }

    /// A cache-wide knob's value, in the form [`Cache::set_knob`] accepts.
    pub fn knob(&self, knob: &str) -> Option<String> {
        self.shared.lock().engine.config().get(knob)
    }

    /// A device knob's value (device by name, see [`Cache::device_names`]).
    pub fn device_knob(&self, device: &str, knob: &str) -> Option<String> {
        let core = self.shared.lock();
        let id = Self::device_by_name(&core.engine, device)?;
        core.engine.device_config(id)?.get(knob)
    }

    /// Changes a device's knob at run time. An unknown device or knob, or
    /// a bad value, is an [`Error::Knob`] and changes nothing.
    pub fn set_device_knob(&self, device: &str, knob: &str, value: &str) -> Result<(), Error> {
        let mut core = self.shared.lock();
        let Some(id) = Self::device_by_name(&core.engine, device) else {
            return Err(Error::Knob(wb_engine::KnobError::Invalid {
                knob: format!("{device}.{knob}"),
                value: value.to_string(),
                reason: format!("no device '{device}'"),
            }));
        };
        core.engine.set_device_knob(id, knob, value)?;
        Ok(())
    }

    fn device_by_name(engine: &Engine, name: &str) -> Option<wb_engine::DeviceId> {
        let index = engine.stats().devices.iter().position(|d| d.name == name)?;
        Some(wb_engine::DeviceId(index as u32))
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        if let Err(e) = self.sync() {
            eprintln!("writeback: writing back dirty data at shutdown failed: {e}");
        }
        // The sync waited for the backlog: the release thread may go.
        self.shared.close_releases();
        self.shared.lock().closed = true;
        self.shared.closed.store(true, Ordering::Release);
        self.shared.timer_cv.notify_all();
        // Dropping the backend joins its workers and closes the completion channel.
        let backend = self.shared.backend.write().map(|mut b| b.take());
        drop(backend);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Remembers a directory on device `d`'s filesystem and reports its free
/// space, so the engine reserves it for dirty data from the first write
/// (a device whose space cannot be read is not limited); notes whether
/// the filesystem runs extending writes synchronously (`IoOp::blocks`).
fn register_dir(
    core: &mut crate::runtime::core::Core,
    d: wb_engine::DeviceId,
    dir: &Path,
    now: wb_engine::Instant,
) {
    if core.device_dirs.len() <= d.index() {
        core.device_dirs
            .resize(d.index() + 1, std::path::PathBuf::new());
    }
    core.device_dirs[d.index()] = dir.to_path_buf();
    if core.extends_synchronously.len() <= d.index() {
        core.extends_synchronously.resize(d.index() + 1, false);
    }
    core.extends_synchronously[d.index()] =
        crate::runtime::statfs::serialises_extending_writes(dir);
    // The device was just added: it exists.
    let _ = match crate::runtime::statfs::free_bytes(dir) {
        Ok(bytes) => core.engine.set_free_space(now, d, bytes),
        Err(_) => core.engine.space_unknown(d),
    };
}

/// Makes durable what earlier processes left on the filesystem of `dir`
/// (syncfs: a device cache flush among it), once, when the cache meets a
/// device: after a crash, data the crashed process wrote may sit in the
/// device's volatile cache, and an fsync through this cache of a file it
/// has not changed asks the device for nothing (the simulator's restart
/// check found it).
fn flush_at_start(dir: &Path) -> Result<(), Error> {
    use std::os::fd::AsRawFd;
    let d = std::fs::File::open(dir).map_err(|e| Error::io(dir, e))?;
    // SAFETY: syncfs takes a descriptor, open for the whole call (`d`
    // lives to the end of the function), and no pointers.
    let rc = unsafe { libc::syncfs(d.as_raw_fd()) };
    if rc != 0 {
        return Err(Error::io(dir, std::io::Error::last_os_error()));
    }
    Ok(())
}

/// `config` with the device's own readahead window (`queue/read_ahead_kb`,
/// as Linux's bdi takes it), largest request (`queue/max_sectors_kb`, as
/// Linux builds bios), queue depth (blk_queue_depth, which wbt scales
/// from), tags (`queue/nr_requests`) and whether it serves one request at
/// a time (a buffered loop device) unless they were set; and, unless set,
/// a file's writes that make it longer one at a time (`extending_writes =
/// one-per-file`): a killed process may leave a write it handed to the
/// kernel unstarted while a higher one lands, a hole below it, on any
/// filesystem (wb-engine's dispatch/extending.rs).
fn with_device_queue(mut config: DeviceConfig, st_dev: u64) -> DeviceConfig {
    let defaults = DeviceConfig::default();
    let number = |n: Option<u32>| n.map(|n| n.to_string());
    let declared = [
        ("read_ahead_kb", number(read_ahead_kb(st_dev))),
        ("max_sectors_kb", number(max_sectors_kb(st_dev))),
        ("queue_depth", number(queue_depth(st_dev))),
        ("nr_requests", number(nr_requests(st_dev))),
        ("serial", number(serial(st_dev).map(u32::from))),
        ("extending_writes", Some("one-per-file".to_string())),
    ];
    for (knob, value) in declared {
        let unset = config.get(knob) == defaults.get(knob);
        if let (true, Some(value)) = (unset, value) {
            // A value out of the knob's range keeps the default.
            let _ = config.set(knob, &value);
        }
    }
    config
}
