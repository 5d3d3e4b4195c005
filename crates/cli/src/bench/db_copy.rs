//! `wb bench db-copy`: a database-like workload beside a bulk copy, on a
//! directory directly (the kernel) and through `wb mount` of it.
//!
//! Per configuration:
//! 1. The hot set: a file of --hot-size is written, synced and read whole
//!    twice, so it is cached (and, in the mount, on the active list).
//! 2. Quiet: --clients threads run transactions for --seconds: three
//!    random 8 KiB reads and one random 8 KiB write of the hot file, then
//!    fdatasync (the commit). Every transaction is timed.
//! 3. The copy: a writer writes --copy-size to a new file in 1 MiB writes
//!    and fsyncs it, while the clients go on; their figures while the copy
//!    runs are kept apart.
//! 4. After the copy: how much of the hot file is still cached (the
//!    kernel: its pages resident, by mmap + mincore; the mount: the
//!    `user.writeback.cached` attribute, the engine's own count).
//!
//! The mount runs with --memory (2 GiB by default: the copy goes through
//! its cache four times); the kernel has the machine's memory.

use super::cleanup::TempFile;
use super::doc::Doc;
use super::mount::Mount;
use super::pagecache::resident_bytes;
use super::table::{self, Table};
use super::{
    free_bytes, human_bytes, parse_seconds, parse_size, prepare_dir, progress, quiesce, BenchError,
    SplitMix64, MIB,
};
use crate::html_file::HtmlFile;
use clap::Args;
use hdrhistogram::Histogram;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use serde_json::json;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The database's page.
const PAGE_BYTES: u64 = 8 << 10;
/// Reads in a transaction, before its one write and the commit.
const READS_PER_TXN: usize = 3;
const COPY_BLOCK_BYTES: usize = 1 << 20;
/// Free space left untouched on the filesystem.
const SPACE_MARGIN: u64 = 1 << 30;
/// Most clients; each is a thread.
const MAX_CLIENTS: usize = 64;

#[derive(Args)]
#[command(after_help = "\
Per configuration (--configs, in order):
  kernel   the files on --dir directly: the kernel's page cache and writeback
  mount    through `wb mount --dir` (memory --memory) on a temporary mountpoint
Each: a hot file of --hot-size written, synced and read twice; --clients clients
run transactions (3 random 8 KiB reads, 1 random 8 KiB write, fdatasync) for
--seconds (quiet), then on while a copy writes --copy-size in 1 MiB writes and
fsyncs; then how much of the hot file is still cached.
Reported: transactions/s and p99 quiet and during the copy, the copy's MiB/s,
and the hot file cached afterwards. Needs root for the mount.

Exit status: 0 on success, 1 if a run failed, 2 for bad arguments.")]
pub struct DbCopyArgs {
    /// Directory for the files, served by the mount (created if missing;
    /// the files are removed at the end).
    #[arg(long, default_value = "wb-data/bench")]
    pub dir: PathBuf,
    /// The hot set: the database file's size.
    #[arg(long, default_value = "1GiB", value_parser = parse_size, value_name = "SIZE")]
    pub hot_size: u64,
    /// Bytes the copy writes.
    #[arg(long, default_value = "8GiB", value_parser = parse_size, value_name = "SIZE")]
    pub copy_size: u64,
    /// Database clients (threads).
    #[arg(long, default_value = "4")]
    pub clients: usize,
    /// Seconds of the quiet measurement.
    #[arg(long, default_value = "20", value_parser = parse_seconds, value_name = "S")]
    pub seconds: u64,
    /// The mount's memory.
    #[arg(long, default_value = "2GiB", value_parser = parse_size, value_name = "SIZE")]
    pub memory: u64,
    /// Configurations to run, comma-separated: kernel, mount.
    #[arg(long, default_value = "kernel,mount", value_delimiter = ',')]
    pub configs: Vec<String>,
    /// A knob for the mount (e.g. lru=clock); memory is set by --memory.
    /// Repeatable.
    #[arg(long = "mount-set", value_name = "KNOB=VALUE", value_parser = super::parse_engine_set)]
    pub mount_sets: Vec<(String, String)>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Transactions of one phase.
struct Phase {
    txns: u64,
    seconds: f64,
    lat_us: Histogram<u64>,
    /// Where a transaction's time went: its reads, its write, its commit.
    parts_us: Parts,
}

/// Latencies of a transaction's parts, in microseconds.
struct Parts {
    reads: Histogram<u64>,
    write: Histogram<u64>,
    commit: Histogram<u64>,
}

impl Parts {
    fn new() -> Result<Parts, hdrhistogram::CreationError> {
        Ok(Parts {
            reads: latency_histogram()?,
            write: latency_histogram()?,
            commit: latency_histogram()?,
        })
    }

    fn add(&mut self, other: &Parts) -> Result<(), hdrhistogram::AdditionError> {
        self.reads.add(&other.reads)?;
        self.write.add(&other.write)?;
        self.commit.add(&other.commit)
    }

    /// "reads p99 X ms, write p99 Y ms, commit p99 Z ms".
    fn p99s(&self) -> String {
        let p99 = |h: &Histogram<u64>| table::ms(h.value_at_quantile(0.99) as f64);
        format!(
            "reads p99 {} ms, write p99 {} ms, commit p99 {} ms",
            p99(&self.reads),
            p99(&self.write),
            p99(&self.commit)
        )
    }
}

impl Phase {
    fn tps(&self) -> f64 {
        self.txns as f64 / self.seconds.max(1e-9)
    }

    fn p99_us(&self) -> f64 {
        self.lat_us.value_at_quantile(0.99) as f64
    }

    fn json(&self) -> serde_json::Value {
        json!({
            "tps": self.tps(),
            "lat_us": {
                "p50": self.lat_us.value_at_quantile(0.5),
                "p90": self.lat_us.value_at_quantile(0.9),
                "p99": self.lat_us.value_at_quantile(0.99),
                "max": self.lat_us.max(),
            },
        })
    }
}

struct Outcome {
    name: String,
    quiet: Phase,
    during: Phase,
    copy_mib_s: f64,
    hot_cached_bytes: u64,
}

struct Setup {
    dir: PathBuf,
    hot_size: u64,
    copy_size: u64,
    clients: usize,
    seconds: u64,
    memory: u64,
    mount_sets: Vec<(String, String)>,
}

pub fn run(args: DbCopyArgs, html: Option<HtmlFile>) -> Result<(), BenchError> {
    if args.clients == 0 || args.clients > MAX_CLIENTS {
        return Err(BenchError::BadInput(format!(
            "--clients {}: must be between 1 and {MAX_CLIENTS}",
            args.clients
        )));
    }
    if args.hot_size < PAGE_BYTES * 16 {
        return Err(BenchError::BadInput(format!(
            "--hot-size {}: must be at least {}",
            human_bytes(args.hot_size),
            human_bytes(PAGE_BYTES * 16)
        )));
    }
    for c in &args.configs {
        if c != "kernel" && c != "mount" {
            return Err(BenchError::BadInput(format!(
                "--configs: unknown configuration '{c}' (known: kernel, mount)"
            )));
        }
    }
    let dir = prepare_dir(&args.dir)?;
    let need = args.hot_size + args.copy_size + SPACE_MARGIN;
    let free = free_bytes(&dir)?;
    if free < need {
        return Err(BenchError::Failed(format!(
            "not enough free space in {}: {} available, need {}; lower --copy-size or pick another --dir",
            dir.display(),
            human_bytes(free),
            human_bytes(need)
        )));
    }
    let setup = Setup {
        dir,
        hot_size: args.hot_size,
        copy_size: args.copy_size,
        clients: args.clients,
        seconds: args.seconds,
        memory: args.memory,
        mount_sets: args.mount_sets,
    };
    let mut outcomes = Vec::new();
    for name in &args.configs {
        outcomes.push(run_config(&setup, name)?);
    }
    let doc = render(&outcomes, &setup);
    if args.json {
        let configs: Vec<_> = outcomes
            .iter()
            .map(|o| {
                json!({
                    "name": o.name,
                    "quiet": o.quiet.json(),
                    "during_copy": o.during.json(),
                    "copy_mib_s": o.copy_mib_s,
                    "hot_cached_mib": o.hot_cached_bytes as f64 / MIB,
                    "hot_mib": setup.hot_size as f64 / MIB,
                })
            })
            .collect();
        println!("{}", json!({ "configs": configs }));
    } else {
        print!("{doc}");
    }
    super::write_html(html, "wb bench db-copy", &doc)
}

fn run_config(setup: &Setup, name: &str) -> Result<Outcome, BenchError> {
    let hot = TempFile::new(setup.dir.join("wb-dbcopy-hot.dat"));
    let copy = TempFile::new(setup.dir.join("wb-dbcopy-copy.dat"));
    let mount = match name {
        "mount" => {
            let mut sets = vec![("memory".to_string(), setup.memory.to_string())];
            sets.extend(setup.mount_sets.iter().cloned());
            Some(Mount::start(&setup.dir, &sets)?)
        }
        _ => None,
    };
    let at = |file: &TempFile| match &mount {
        Some(m) => m.path().join(file.path().file_name().unwrap_or_default()),
        None => file.path().to_path_buf(),
    };
    let (hot_path, copy_path) = (at(&hot), at(&copy));
    progress!(
        "{name}: writing and reading the hot file ({})",
        human_bytes(setup.hot_size)
    );
    make_hot(&hot_path, setup.hot_size)?;
    quiesce()?;
    progress!(
        "{name}: {} clients, quiet, {} s",
        setup.clients,
        setup.seconds
    );
    let quiet = clients_for(setup, &hot_path, Duration::from_secs(setup.seconds))?;
    progress!(
        "{name}: quiet {:.0} txn/s, p99 {} ms ({}); copying {}",
        quiet.tps(),
        table::ms(quiet.p99_us()),
        quiet.parts_us.p99s(),
        human_bytes(setup.copy_size)
    );
    let (during, copy_s) = clients_during_copy(setup, &hot_path, &copy_path)?;
    let copy_mib_s = setup.copy_size as f64 / MIB / copy_s;
    let hot_cached_bytes = match &mount {
        Some(_) => mount_cached_bytes(&hot_path)?,
        None => resident_bytes(&hot_path)
            .map_err(|e| BenchError::failed(format!("mincore of {}", hot_path.display()), e))?,
    };
    progress!(
        "{name}: during the copy {:.0} txn/s, p99 {} ms, max {} ms ({}); copy {:.0} MiB/s; hot file cached {}",
        during.tps(),
        table::ms(during.p99_us()),
        table::ms(during.lat_us.max() as f64),
        during.parts_us.p99s(),
        copy_mib_s,
        human_bytes(hot_cached_bytes)
    );
    if let Some(m) = mount {
        // Where the mount's callers waited, for the reader of the progress.
        let stats = std::fs::read_to_string(m.path().join(".writeback/stats")).unwrap_or_default();
        let waits: Vec<&str> = stats
            .lines()
            .filter(|l| l.starts_with("pause_") && !l.ends_with(" 0"))
            .collect();
        progress!("{name}: waits {}", waits.join(", "));
        m.stop()?;
    }
    Ok(Outcome {
        name: name.to_string(),
        quiet,
        during,
        copy_mib_s,
        hot_cached_bytes,
    })
}

/// Writes the hot file, syncs it and reads it whole twice.
fn make_hot(path: &Path, size: u64) -> Result<(), BenchError> {
    let fail = |e| BenchError::failed(path.display(), e);
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(path)
        .map_err(fail)?;
    let mut rng = SplitMix64::seed_from_u64(0xdb);
    let mut buf = vec![0u8; COPY_BLOCK_BYTES];
    let mut off = 0;
    while off < size {
        let n = (size - off).min(buf.len() as u64) as usize;
        rng.fill_bytes(&mut buf[..n]);
        file.write_all_at(&buf[..n], off).map_err(fail)?;
        off += n as u64;
    }
    file.sync_all().map_err(fail)?;
    for _ in 0..2 {
        let mut off = 0;
        while off < size {
            let n = file.read_at(&mut buf, off).map_err(fail)?;
            if n == 0 {
                return Err(BenchError::Failed(format!(
                    "{}: short at {off} of {size} bytes",
                    path.display()
                )));
            }
            off += n as u64;
        }
    }
    Ok(())
}

/// Runs the clients for `length`.
fn clients_for(setup: &Setup, hot: &Path, length: Duration) -> Result<Phase, BenchError> {
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let threads = spawn_clients(setup, hot, &stop)?;
    std::thread::sleep(length);
    stop.store(true, Ordering::Relaxed);
    collect(threads, started.elapsed().as_secs_f64())
}

/// Runs the clients while the copy runs; returns their phase and the
/// copy's seconds (writes and the fsync).
fn clients_during_copy(setup: &Setup, hot: &Path, copy: &Path) -> Result<(Phase, f64), BenchError> {
    let stop = Arc::new(AtomicBool::new(false));
    let threads = spawn_clients(setup, hot, &stop)?;
    let started = Instant::now();
    let copied = write_copy(copy, setup.copy_size);
    let copy_s = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let phase = collect(threads, copy_s)?;
    copied?;
    Ok((phase, copy_s))
}

type Client = std::thread::JoinHandle<Result<(u64, Histogram<u64>, Parts), String>>;

fn spawn_clients(
    setup: &Setup,
    hot: &Path,
    stop: &Arc<AtomicBool>,
) -> Result<Vec<Client>, BenchError> {
    let pages = setup.hot_size / PAGE_BYTES;
    (0..setup.clients)
        .map(|i| {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(hot)
                .map_err(|e| BenchError::failed(hot.display(), e))?;
            let stop = Arc::clone(stop);
            let seed = 0x5eed + i as u64;
            Ok(std::thread::spawn(move || {
                client(&file, pages, seed, &stop)
            }))
        })
        .collect()
}

/// One client: transactions until `stop`; returns how many, their
/// latencies and their parts' latencies, in microseconds.
fn client(
    file: &File,
    pages: u64,
    seed: u64,
    stop: &AtomicBool,
) -> Result<(u64, Histogram<u64>, Parts), String> {
    let mut lat = latency_histogram().map_err(|e| e.to_string())?;
    let mut parts = Parts::new().map_err(|e| e.to_string())?;
    let us = |since: Instant| since.elapsed().as_micros() as u64;
    let mut rng = SplitMix64::seed_from_u64(seed);
    let mut buf = vec![0u8; PAGE_BYTES as usize];
    let mut txns = 0;
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        for _ in 0..READS_PER_TXN {
            let off = rng.next_u64() % pages * PAGE_BYTES;
            file.read_exact_at(&mut buf, off)
                .map_err(|e| format!("read at {off}: {e}"))?;
        }
        parts.reads.saturating_record(us(t));
        let off = rng.next_u64() % pages * PAGE_BYTES;
        rng.fill_bytes(&mut buf[..64]);
        let w = Instant::now();
        file.write_all_at(&buf, off)
            .map_err(|e| format!("write at {off}: {e}"))?;
        parts.write.saturating_record(us(w));
        let c = Instant::now();
        file.sync_data().map_err(|e| format!("fdatasync: {e}"))?;
        parts.commit.saturating_record(us(c));
        lat.saturating_record(us(t));
        txns += 1;
    }
    Ok((txns, lat, parts))
}

/// Microseconds from 1 to 10 minutes, 3 significant digits (a longer
/// transaction counts as 10 minutes).
fn latency_histogram() -> Result<Histogram<u64>, hdrhistogram::CreationError> {
    Histogram::new_with_bounds(1, 600_000_000, 3)
}

fn collect(threads: Vec<Client>, seconds: f64) -> Result<Phase, BenchError> {
    let mut phase = Phase {
        txns: 0,
        seconds,
        lat_us: latency_histogram().map_err(|e| BenchError::Failed(e.to_string()))?,
        parts_us: Parts::new().map_err(|e| BenchError::Failed(e.to_string()))?,
    };
    for t in threads {
        let (txns, lat, parts) = t
            .join()
            .map_err(|_| BenchError::Failed("a client panicked".into()))?
            .map_err(|e| BenchError::Failed(format!("a client failed: {e}")))?;
        phase.txns += txns;
        phase
            .lat_us
            .add(&lat)
            .map_err(|e| BenchError::Failed(e.to_string()))?;
        phase
            .parts_us
            .add(&parts)
            .map_err(|e| BenchError::Failed(e.to_string()))?;
    }
    Ok(phase)
}

/// The copy: `size` bytes in 1 MiB writes to a new file, then fsync.
fn write_copy(path: &Path, size: u64) -> Result<(), BenchError> {
    let fail = |e| BenchError::failed(path.display(), e);
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(path)
        .map_err(fail)?;
    let mut buf = vec![0u8; COPY_BLOCK_BYTES];
    SplitMix64::seed_from_u64(0xc0b7).fill_bytes(&mut buf);
    let mut off = 0;
    while off < size {
        let n = (size - off).min(buf.len() as u64) as usize;
        // Each block differs, so nothing below can deduplicate it.
        buf[..8].copy_from_slice(&off.to_ne_bytes());
        file.write_all_at(&buf[..n], off).map_err(fail)?;
        off += n as u64;
    }
    file.sync_all().map_err(fail)
}

/// The engine's cached bytes of a file on the mount (its
/// `user.writeback.cached` attribute: "CACHED ACTIVE").
fn mount_cached_bytes(path: &Path) -> Result<u64, BenchError> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| BenchError::BadInput(format!("{}: path contains a NUL", path.display())))?;
    let name = c"user.writeback.cached";
    let mut buf = [0u8; 64];
    // SAFETY: both strings are NUL-terminated and alive for the call; the
    // kernel writes at most buf.len() bytes into buf.
    let n = unsafe {
        libc::getxattr(
            c_path.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(BenchError::failed(
            format!("getxattr user.writeback.cached {}", path.display()),
            std::io::Error::last_os_error(),
        ));
    }
    let text = String::from_utf8_lossy(&buf[..n as usize]).to_string();
    text.split_whitespace()
        .next()
        .and_then(|w| w.parse().ok())
        .ok_or_else(|| BenchError::Failed(format!("user.writeback.cached: '{text}'")))
}

fn render(outcomes: &[Outcome], setup: &Setup) -> Doc {
    let mut out = Doc::from(format!(
        "{} clients: 3 random 8 KiB reads + 1 write + fdatasync per transaction, over a {} hot \
         file; quiet for {} s, then during a {} copy (1 MiB writes, fsync); mount memory {}{}.\n\n",
        setup.clients,
        human_bytes(setup.hot_size),
        setup.seconds,
        human_bytes(setup.copy_size),
        human_bytes(setup.memory),
        setup
            .mount_sets
            .iter()
            .map(|(k, v)| format!(", {k}={v}"))
            .collect::<String>(),
    ));
    let mut t = Table::new(&[
        "config",
        "quiet txn/s",
        "quiet p99 ms",
        "copy txn/s",
        "copy p99 ms",
        "txn/s during/quiet",
        "p99 during/quiet",
        "copy MiB/s",
        "hot cached",
    ]);
    for o in outcomes {
        t.row(vec![
            o.name.clone(),
            format!("{:.0}", o.quiet.tps()),
            table::ms(o.quiet.p99_us()),
            format!("{:.0}", o.during.tps()),
            table::ms(o.during.p99_us()),
            table::ratio(Some(o.during.tps()), Some(o.quiet.tps())),
            table::ratio(Some(o.during.p99_us()), Some(o.quiet.p99_us())),
            table::rate(o.copy_mib_s),
            format!(
                "{:.1}%",
                100.0 * o.hot_cached_bytes as f64 / setup.hot_size as f64
            ),
        ]);
    }
    out.table(t);
    let copy = |n: &str| outcomes.iter().find(|o| o.name == n).map(|o| o.copy_mib_s);
    if let (Some(m), Some(k)) = (copy("mount"), copy("kernel")) {
        out.push_str(&format!(
            "\ncopy, mount/kernel: {}\n",
            table::ratio(Some(m), Some(k))
        ));
    }
    out
}
