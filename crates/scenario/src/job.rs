//! `[[job]]` tables: common keys, then the keys of the job's kind.

use crate::error::{Located, Res};
use crate::fields::{Field, TableView};
use crate::model::{DeviceSpec, JobKind, JobSpec, WriteMode};
use crate::section::{optional, table_list, valid_name, Unique};

/// Enough for any experiment we have in mind; bounds the simulator's work.
const MAX_JOBS: usize = 1024;
const MAX_FILES: i64 = 100_000;
const MAX_BLOCK_BYTES: u64 = 64 << 20;
/// The engine counts a file's pages in u32: 16 TiB of 4 KiB pages.
const MAX_FILE_BYTES: u64 = 1 << 44;
const KIB4: u64 = 4096;
const MIB1: u64 = 1 << 20;

const COMMON_KEYS: &[&str] = &[
    "name",
    "kind",
    "device",
    "domain",
    "start",
    "runtime",
    "background",
    "mode",
];

/// A job kind before its keys are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Writer,
    Reader,
    OccasionalWriter,
    FsyncLoop,
    Dbench,
    Remover,
}

const KINDS: [Kind; 6] = [
    Kind::Writer,
    Kind::Reader,
    Kind::OccasionalWriter,
    Kind::FsyncLoop,
    Kind::Dbench,
    Kind::Remover,
];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Writer => "writer",
            Kind::Reader => "reader",
            Kind::OccasionalWriter => "occasional-writer",
            Kind::FsyncLoop => "fsync-loop",
            Kind::Dbench => "dbench",
            Kind::Remover => "remover",
        }
    }

    /// The keys only this kind accepts.
    fn keys(self) -> &'static [&'static str] {
        match self {
            Kind::Writer => &[
                "files",
                "file_size",
                "block_size",
                "pattern",
                "sync",
                "fsync_each",
            ],
            Kind::Reader => &["file_size", "block_size", "pattern", "rate_iops"],
            Kind::OccasionalWriter => &["block_size", "interval", "count"],
            Kind::FsyncLoop => &["block_size", "interval", "count"],
            Kind::Dbench => &[
                "files",
                "file_size",
                "block_size",
                "read_every",
                "flush_every",
                "count",
            ],
            Kind::Remover => &[
                "files",
                "file_size",
                "big_files",
                "big_file_size",
                "unlink_cost",
            ],
        }
    }
}

/// "a", "a or b", "a, b or c".
fn either(items: &[&str]) -> String {
    match items.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => last.to_string(),
        None => String::new(),
    }
}

/// All `[[job]]` tables, in file order; at least one runs in the foreground.
pub(crate) fn parse_jobs(
    root: &TableView<'_>,
    devices: &[DeviceSpec],
    text: &str,
) -> Res<Vec<JobSpec>> {
    let tables = table_list(root, "job", MAX_JOBS)?;
    let mut names = Unique::new(text, "job");
    let mut jobs = Vec::with_capacity(tables.len());
    for (index, table) in tables.iter().enumerate() {
        jobs.push(parse_job(table, index, devices, &mut names)?);
    }
    // Background jobs run until the foreground ones finish; with none,
    // nothing would ever end the run but `duration`.
    if jobs.iter().all(|job| job.background) {
        let message = "at least one foreground job is required (every job has background = true)";
        return Err(Located::new(
            tables.first().and_then(TableView::header),
            message,
        ));
    }
    Ok(jobs)
}

fn parse_job(
    table: &TableView<'_>,
    index: usize,
    devices: &[DeviceSpec],
    names: &mut Unique<'_>,
) -> Res<JobSpec> {
    let name_field = table
        .require("name")
        .map_err(|e| e.within(&format!("job #{}", index + 1)))?;
    let name = valid_name(&name_field)?;
    names.insert(&name, &name_field)?;
    let context = format!("job '{name}'");
    let kind = kind(table).map_err(|e| e.within(&context))?;
    check_keys(table, kind, &name)?;
    let job = job_body(table, kind, name, devices).map_err(|e| e.within(&context))?;
    // Every foreground job needs a natural end, or the run would only stop
    // at `duration`; readers are the one kind without one.
    if matches!(job.kind, JobKind::Reader { .. }) && !job.background && job.runtime_ns.is_none() {
        let message =
            format!("{context}: a foreground reader needs runtime, or set background = true");
        return Err(Located::new(table.header(), message));
    }
    Ok(job)
}

fn kind(table: &TableView<'_>) -> Res<Kind> {
    let names: Vec<&str> = KINDS.iter().map(|k| k.name()).collect();
    let field = table
        .require("kind")
        .map_err(|e| Located::new(e.span, format!("{} ({})", e.message, either(&names))))?;
    let text = field.str()?;
    KINDS.into_iter().find(|k| k.name() == text).ok_or_else(|| {
        field.error(format!(
            "unknown job kind '{text}' (expected {})",
            either(&names)
        ))
    })
}

/// Rejects keys that are neither common nor of this kind, saying which
/// kinds a misplaced key belongs to.
fn check_keys(table: &TableView<'_>, kind: Kind, name: &str) -> Res<()> {
    let stray = table
        .fields()
        .into_iter()
        .find(|f| !COMMON_KEYS.contains(&f.key) && !kind.keys().contains(&f.key));
    let Some(field) = stray else { return Ok(()) };
    let key = field.key;
    let owners: Vec<&str> = KINDS
        .into_iter()
        .filter(|k| k.keys().contains(&key))
        .map(Kind::name)
        .collect();
    let message = if owners.is_empty() {
        format!(
            "unknown key '{key}' in job '{name}' (known for {}: {}; for every job: {})",
            kind.name(),
            kind.keys().join(", "),
            COMMON_KEYS.join(", ")
        )
    } else {
        format!(
            "key '{key}' in job '{name}' applies only to {} jobs, not {}",
            either(&owners),
            kind.name()
        )
    };
    Err(Located::new(field.key_span_or_value(), message))
}

fn job_body(
    table: &TableView<'_>,
    kind: Kind,
    name: String,
    devices: &[DeviceSpec],
) -> Res<JobSpec> {
    let device = device_index(&table.require("device")?, devices)?;
    let domain = optional(table, "domain", valid_name)?.unwrap_or_else(|| "root".to_string());
    let start_ns = optional(table, "start", Field::duration)?.unwrap_or(0);
    let runtime_ns = optional(table, "runtime", positive_duration)?;
    let background = optional(table, "background", Field::bool)?.unwrap_or(false);
    let mode = optional(table, "mode", |field| write_mode(field, kind))?.unwrap_or_default();
    let kind = match kind {
        Kind::Writer => writer(table)?,
        Kind::Reader => reader(table)?,
        Kind::OccasionalWriter => occasional_writer(table)?,
        Kind::FsyncLoop => fsync_loop(table)?,
        Kind::Dbench => dbench(table)?,
        Kind::Remover => remover(table)?,
    };
    Ok(JobSpec {
        name,
        device,
        domain,
        start_ns,
        runtime_ns,
        background,
        mode,
        kind,
    })
}

fn write_mode(field: &Field<'_>, kind: Kind) -> Res<WriteMode> {
    if kind == Kind::Reader || kind == Kind::Remover {
        let what = if kind == Kind::Reader {
            "a reader"
        } else {
            "a remover"
        };
        return Err(field.error(format!(
            "{what} writes nothing: 'mode' applies to writing jobs"
        )));
    }
    let text = field.str()?;
    WriteMode::ALL
        .into_iter()
        .find(|m| m.name() == text)
        .ok_or_else(|| {
            let known: Vec<&str> = WriteMode::ALL.iter().map(|m| m.name()).collect();
            field.error(format!(
                "unknown mode \"{text}\" (known: {})",
                known.join(", ")
            ))
        })
}

fn pattern(field: &Field<'_>) -> Res<bool> {
    match field.str()? {
        "sequential" => Ok(false),
        "random" => Ok(true),
        other => Err(field.error(format!(
            "expected \"sequential\" or \"random\", found \"{other}\""
        ))),
    }
}

fn device_index(field: &Field<'_>, devices: &[DeviceSpec]) -> Res<usize> {
    let wanted = field.str()?;
    devices
        .iter()
        .position(|d| d.name == wanted)
        .ok_or_else(|| {
            let known: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
            field.error(format!(
                "unknown device '{wanted}' (devices: {})",
                known.join(", ")
            ))
        })
}

fn positive_duration(field: &Field<'_>) -> Res<u64> {
    match field.duration()? {
        0 => Err(field.error("must be more than 0")),
        ns => Ok(ns),
    }
}

fn block_size(table: &TableView<'_>, default: u64) -> Res<u64> {
    let read = |f: &Field<'_>| f.size_in(1, MAX_BLOCK_BYTES, "64MiB");
    Ok(optional(table, "block_size", read)?.unwrap_or(default))
}

fn file_size(table: &TableView<'_>) -> Res<u64> {
    table
        .require("file_size")?
        .size_in(1, MAX_FILE_BYTES, "16TiB")
}

fn flag(table: &TableView<'_>, key: &str) -> Res<bool> {
    Ok(optional(table, key, Field::bool)?.unwrap_or(false))
}

fn files(table: &TableView<'_>) -> Res<u32> {
    Ok(match table.get("files") {
        // In range by `int_in`, so the conversion cannot fail.
        Some(field) => u32::try_from(field.int_in(1, MAX_FILES)?).unwrap_or(1),
        None => 1,
    })
}

fn writer(table: &TableView<'_>) -> Res<JobKind> {
    Ok(JobKind::Writer {
        files: files(table)?,
        file_size: file_size(table)?,
        block_size: block_size(table, MIB1)?,
        random: optional(table, "pattern", pattern)?.unwrap_or(false),
        sync: flag(table, "sync")?,
        fsync_each: flag(table, "fsync_each")?,
    })
}

/// `file_size` and a `block_size` (default 4 KiB) that fits in it, for a
/// job (`whose`: "a reader's") whose operations stay inside one file.
fn block_within_file(table: &TableView<'_>, whose: &str) -> Res<(u64, u64)> {
    let file_size_field = table.require("file_size")?;
    let file_size = file_size(table)?;
    let block_size = block_size(table, KIB4)?;
    if block_size > file_size {
        // Point at the block size if given, else at the file size that is
        // too small for the default.
        let at = table.get("block_size").unwrap_or(file_size_field);
        return Err(at.error(format!(
            "{whose} block_size ({block_size} bytes) must not exceed its file_size ({file_size} bytes)"
        )));
    }
    Ok((file_size, block_size))
}

fn reader(table: &TableView<'_>) -> Res<JobKind> {
    let (file_size, block_size) = block_within_file(table, "a reader's")?;
    let random = optional(table, "pattern", pattern)?;
    Ok(JobKind::Reader {
        file_size,
        block_size,
        random: random.unwrap_or(false),
        rate_iops: optional(table, "rate_iops", |f| f.count_from(1))?,
    })
}

fn occasional_writer(table: &TableView<'_>) -> Res<JobKind> {
    Ok(JobKind::OccasionalWriter {
        block_size: block_size(table, KIB4)?,
        interval_ns: table.require("interval")?.duration()?,
        count: table.require("count")?.count_from(1)?,
    })
}

fn fsync_loop(table: &TableView<'_>) -> Res<JobKind> {
    Ok(JobKind::FsyncLoop {
        block_size: block_size(table, KIB4)?,
        interval_ns: optional(table, "interval", Field::duration)?.unwrap_or(0),
        count: table.require("count")?.count_from(1)?,
    })
}

/// Default `unlink_cost`: what an unlink costs its caller when nothing
/// holds it back (directory update, inode bookkeeping).
const DEFAULT_UNLINK_COST_NS: u64 = 20_000;

fn remover(table: &TableView<'_>) -> Res<JobKind> {
    let big_files = optional(table, "big_files", |f| f.int_in(0, MAX_FILES))?.unwrap_or(0) as u32;
    let big_file_size = match table.get("big_file_size") {
        Some(field) => field.size_in(1, MAX_FILE_BYTES, "16TiB")?,
        None if big_files > 0 => {
            return Err(table
                .require("big_files")?
                .error("big_files needs big_file_size"))
        }
        None => 0,
    };
    Ok(JobKind::Remover {
        files: files(table)?,
        file_size: file_size(table)?,
        big_files,
        big_file_size,
        unlink_cost_ns: optional(table, "unlink_cost", Field::duration)?
            .unwrap_or(DEFAULT_UNLINK_COST_NS),
    })
}

fn dbench(table: &TableView<'_>) -> Res<JobKind> {
    let (file_size, block_size) = block_within_file(table, "a dbench job's")?;
    let every = |key: &str| -> Res<u64> {
        Ok(optional(table, key, |f| f.int_in(0, 1_000_000))?.unwrap_or(0) as u64)
    };
    Ok(JobKind::Dbench {
        files: files(table)?,
        file_size,
        block_size,
        read_every: every("read_every")?,
        flush_every: every("flush_every")?,
        count: table.require("count")?.count_from(1)?,
    })
}
