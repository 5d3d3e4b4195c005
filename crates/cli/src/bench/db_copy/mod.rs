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

mod clients;
pub(super) mod files;
mod report;

use super::cleanup::TempFile;
use super::harness::{self, Experiment, Notes, Output, Report, Turn};
use super::mount::Mount;
use super::pagecache::resident_bytes;
use super::table;
use super::{
    free_bytes, parse_seconds, parse_size, prepare_dir, progress, quiesce, BenchError, MIB,
};
use crate::html_file::HtmlFile;
use clap::Args;
use clients::{clients_during_copy, clients_for, Phase};
use files::{make_hot, mount_cached_bytes};
use std::path::PathBuf;
use std::time::Duration;
use wb_engine::units::format_bytes;

/// The database's page.
const PAGE_BYTES: u64 = 8 << 10;
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

pub struct Outcome {
    pub name: String,
    pub quiet: Phase,
    pub during: Phase,
    pub copy_mib_s: f64,
    pub hot_cached_bytes: u64,
}

/// What every configuration shares.
pub struct DbCopy {
    dir: PathBuf,
    hot_size: u64,
    copy_size: u64,
    clients: usize,
    seconds: u64,
    memory: u64,
    mount_sets: Vec<(String, String)>,
}

impl Experiment for DbCopy {
    /// "kernel" or "mount".
    type Setup = String;
    type Run = Outcome;

    fn name(&self, config: &String) -> String {
        config.clone()
    }

    /// One run each: the name alone.
    fn label(&self, config: &String, _: Turn) -> String {
        config.clone()
    }

    fn run_once(&mut self, config: &String, _: &str, _: &mut Notes) -> Result<Outcome, BenchError> {
        run_config(self, config)
    }

    /// A run says what it does as it goes ([`run_config`]).
    fn describe(&self, _: &str, _: &Outcome) -> Vec<String> {
        Vec::new()
    }
}

impl DbCopy {
    /// `wb mount` of --dir with --memory and the --mount-set knobs.
    fn start_mount(&self) -> Result<Mount, BenchError> {
        let mut sets = vec![("memory".to_string(), self.memory.to_string())];
        sets.extend(self.mount_sets.iter().cloned());
        Mount::start(&self.dir, &sets)
    }
}

pub fn run(args: DbCopyArgs, html: Option<HtmlFile>) -> Result<(), BenchError> {
    check(&args)?;
    let dir = prepare_dir(&args.dir)?;
    let need = args.hot_size + args.copy_size + SPACE_MARGIN;
    let free = free_bytes(&dir)?;
    if free < need {
        return Err(BenchError::Failed(format!(
            "not enough free space in {}: {} available, need {}; lower --copy-size or pick another --dir",
            dir.display(),
            format_bytes(free),
            format_bytes(need)
        )));
    }
    let mut exp = DbCopy {
        dir,
        hot_size: args.hot_size,
        copy_size: args.copy_size,
        clients: args.clients,
        seconds: args.seconds,
        memory: args.memory,
        mount_sets: args.mount_sets,
    };
    let measured = harness::run(&mut exp, args.configs, 1, &mut Notes::new())?;
    let outcomes: Vec<Outcome> = measured.into_iter().flat_map(|m| m.runs).collect();
    let report = Report::new(
        report::render(&outcomes, &exp),
        report::to_json(&outcomes, &exp),
    );
    Output::new("wb bench db-copy", args.json, html).publish(report)
}

/// The arguments that clap does not check.
fn check(args: &DbCopyArgs) -> Result<(), BenchError> {
    if args.clients == 0 || args.clients > MAX_CLIENTS {
        return Err(BenchError::BadInput(format!(
            "--clients {}: must be between 1 and {MAX_CLIENTS}",
            args.clients
        )));
    }
    if args.hot_size < PAGE_BYTES * 16 {
        return Err(BenchError::BadInput(format!(
            "--hot-size {}: must be at least {}",
            format_bytes(args.hot_size),
            format_bytes(PAGE_BYTES * 16)
        )));
    }
    for c in &args.configs {
        if c != "kernel" && c != "mount" {
            return Err(BenchError::BadInput(format!(
                "--configs: unknown configuration '{c}' (known: kernel, mount)"
            )));
        }
    }
    Ok(())
}

/// One configuration: the hot file, the clients quiet, then beside the
/// copy, then what of the hot file is still cached.
fn run_config(exp: &DbCopy, name: &str) -> Result<Outcome, BenchError> {
    let hot = TempFile::new(exp.dir.join("wb-dbcopy-hot.dat"));
    let copy = TempFile::new(exp.dir.join("wb-dbcopy-copy.dat"));
    let mount = match name {
        "mount" => Some(exp.start_mount()?),
        _ => None,
    };
    let at = |file: &TempFile| match &mount {
        Some(m) => m.path().join(file.path().file_name().unwrap_or_default()),
        None => file.path().to_path_buf(),
    };
    let (hot_path, copy_path) = (at(&hot), at(&copy));
    progress!(
        "{name}: writing and reading the hot file ({})",
        format_bytes(exp.hot_size)
    );
    make_hot(&hot_path, exp.hot_size)?;
    quiesce()?;
    progress!("{name}: {} clients, quiet, {} s", exp.clients, exp.seconds);
    let quiet = clients_for(exp, &hot_path, Duration::from_secs(exp.seconds))?;
    progress!(
        "{name}: quiet {:.0} txn/s, p99 {} ms ({}); copying {}",
        quiet.tps(),
        table::ms(quiet.p99_us()),
        quiet.parts_us.p99s(),
        format_bytes(exp.copy_size)
    );
    let (during, copy_s) = clients_during_copy(exp, &hot_path, &copy_path)?;
    let copy_mib_s = exp.copy_size as f64 / MIB / copy_s;
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
        format_bytes(hot_cached_bytes)
    );
    if let Some(m) = mount {
        show_waits(&m, name);
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

/// Where the mount's callers waited, for the reader of the progress.
fn show_waits(m: &Mount, name: &str) {
    let stats = std::fs::read_to_string(m.path().join(".writeback/stats")).unwrap_or_default();
    let waits: Vec<&str> = stats
        .lines()
        .filter(|l| l.starts_with("pause_") && !l.ends_with(" 0"))
        .collect();
    progress!("{name}: waits {}", waits.join(", "));
}
