//! One run of one row: the configuration's changes made, its writer
//! started, the reader beside it a second later, the reads counted while
//! the writer ran, everything put back.

use super::configs::BenchConfig;
use super::engine_writer::EngineWriter;
use super::kernel_configs::Applied;
use super::rows::Row;
use super::sweep::SweepPoint;
use super::{Interference, CHUNK};
use crate::bench::fio::{self, LatencyLog, ReaderResult};
use crate::bench::harness::Notes;
use crate::bench::kernel_write;
use crate::bench::mount::Mount;
use crate::bench::{progress, BenchError, MIB};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use writeback::WriteFlags;

/// How long the writer runs alone before the reader starts.
const READER_DELAY: Duration = Duration::from_secs(1);
/// How often running jobs are polled.
const POLL: Duration = Duration::from_millis(20);
/// How much longer than the reader the writers are asked to run: fio
/// takes 0.3 s to start its reads on a quiet machine, up to 1.6 s seen
/// beside a writer (reads after the writer's end are not counted).
const WRITER_OVERRUN: Duration = Duration::from_secs(2);
/// The least time the reader must run beside the writer to be measured.
const MIN_OVERLAP: Duration = Duration::from_secs(1);

/// One run of one configuration.
#[derive(Clone, Copy, Debug)]
pub struct RunResult {
    pub reader: ReaderResult,
    /// Writer MiB/s; None for the floor.
    pub writer_mib_s: Option<f64>,
}

/// The writer of a run.
enum Writer {
    Fio(fio::RunningFio),
    /// Our own kernel writer (RWF_DONTCACHE, which this fio lacks).
    Kernel(kernel_write::BackgroundWriter),
    Engine(EngineWriter),
}

impl Writer {
    fn has_finished(&mut self) -> Result<bool, BenchError> {
        match self {
            Writer::Fio(f) => f.has_finished(),
            Writer::Kernel(k) => Ok(k.has_finished()),
            Writer::Engine(e) => Ok(e.has_finished()),
        }
    }
}

/// When the reader ran, and when the writer ended if it did before.
struct Overlap {
    reader_start: Instant,
    reader_end: Instant,
    writer_end: Option<(Instant, SystemTime)>,
}

/// `path` (a file of --dir) as fio sees it: through `mount` if one runs.
fn through(mount: Option<&Mount>, path: &Path) -> PathBuf {
    match mount {
        Some(m) => m.path().join(path.file_name().unwrap_or_default()),
        None => path.to_path_buf(),
    }
}

impl Interference {
    /// One run of `row`, named `label` in messages.
    pub(super) fn run_row(
        &self,
        row: &Row,
        label: &str,
        notes: &mut Notes,
    ) -> Result<RunResult, BenchError> {
        let config = row.config;
        let _ = std::fs::remove_file(&self.writer_file);
        let log = LatencyLog::new(&self.dir, "reader");
        if config == BenchConfig::Floor || config == BenchConfig::MountFloor {
            return self.run_reader_alone(config, &log);
        }
        // The kernel's dirty limits are the engine's whenever a writer runs
        // (but for kernel-dirty64m's own). The engine's files bypass the
        // kernel's page cache, but a layer under the filesystem may not (a
        // loop device writing its image through the page cache), and every
        // configuration must run on the same machine. Then the configuration's
        // scheduler, cgroup and the command its fio writer runs under.
        let applied = self
            .machine
            .apply(config, self.dirty_limits)
            .map_err(BenchError::Failed)?;
        // With --fuse, fio writes and reads the same files through the mount.
        let mount = match config {
            BenchConfig::Mount => Some(self.start_mount(row.point.as_ref())?),
            _ => None,
        };
        let mut reader_args =
            fio::reader_args(&through(mount.as_ref(), &self.reader_file), self.seconds);
        reader_args.extend(log.args());
        let mut writer = self.start_writer(row, &applied, mount.as_ref())?;
        let overlap = self.read_beside(&mut writer, &reader_args)?;
        let reader = count_reads(&log, &overlap, label, notes)?;
        let writer_mib_s = finish_writer(writer, label)?;
        if let Some(mount) = mount {
            let took = mount.stop()?;
            progress!("{label}: wb mount stopped in {:.1} s", took.as_secs_f64());
        }
        if let Some(seen) = applied.finish().map_err(BenchError::Failed)? {
            notes.push(format!("{label}: {seen}"));
        }
        let _ = std::fs::remove_file(&self.writer_file);
        Ok(RunResult {
            reader,
            writer_mib_s: Some(writer_mib_s),
        })
    }

    /// The reader alone: on --dir, or through a mount of it (what the
    /// mount's reader can do at best, with no writer beside it).
    fn run_reader_alone(
        &self,
        config: BenchConfig,
        log: &LatencyLog,
    ) -> Result<RunResult, BenchError> {
        let mount = match config {
            BenchConfig::MountFloor => Some(self.start_mount(None)?),
            _ => None,
        };
        let file = through(mount.as_ref(), &self.reader_file);
        let mut reader_args = fio::reader_args(&file, self.seconds);
        reader_args.extend(log.args());
        let reader = self.fio.spawn(&self.dir, "reader", &reader_args)?;
        let report = reader.finish()?;
        // fio's own report says whether the job failed; the figures come
        // from its log.
        fio::parse_reader(&report).map_err(BenchError::Failed)?;
        let reader = log.reads(None).map_err(BenchError::Failed)?;
        Ok(RunResult {
            reader,
            writer_mib_s: None,
        })
    }

    /// `wb mount` of the bench directory with the engine's memory and knobs,
    /// and the --sweep knob's value `point` last.
    fn start_mount(&self, point: Option<&SweepPoint>) -> Result<Mount, BenchError> {
        let mut sets = vec![("memory".to_string(), self.memory.to_string())];
        sets.extend(self.engine_sets.iter().cloned());
        sets.extend(point.map(|p| (p.knob.clone(), p.value.clone())));
        Mount::start(&self.dir, &sets)
    }

    /// Starts the writer of `row`. Every writer runs longer than the
    /// reader, over its file again once it reaches the end, so the reader
    /// always has it beside it: a fast writer finishing early would leave
    /// the reader alone.
    fn start_writer(
        &self,
        row: &Row,
        applied: &Applied,
        mount: Option<&Mount>,
    ) -> Result<Writer, BenchError> {
        let runtime = READER_DELAY + Duration::from_secs(self.seconds) + WRITER_OVERRUN;
        let config = row.config;
        Ok(match config {
            BenchConfig::Kernel
            | BenchConfig::KernelKyber
            | BenchConfig::KernelBfq
            | BenchConfig::KernelBfqIdle
            | BenchConfig::KernelDirty64m
            | BenchConfig::KernelNocache
            | BenchConfig::KernelDirect
            | BenchConfig::KernelBlkio
            | BenchConfig::Mount => {
                let args = applied.writer_args(fio::timed_writer_args(
                    &through(mount, &self.writer_file),
                    self.writer_size,
                    runtime,
                ));
                let wrapper = &applied.wrapper;
                Writer::Fio(self.fio.spawn_under(&self.dir, "writer", &args, wrapper)?)
            }
            BenchConfig::KernelDontcache => Writer::Kernel(
                kernel_write::BackgroundWriter::start(
                    &self.writer_file,
                    kernel_write::Mode::Dontcache,
                    self.writer_size,
                    CHUNK,
                    Some(runtime),
                )
                .map_err(|e| BenchError::failed(self.writer_file.display(), e))?,
            ),
            BenchConfig::Floor
            | BenchConfig::MountFloor
            | BenchConfig::EngineWbtOff
            | BenchConfig::Engine
            | BenchConfig::EngineDontcache => {
                let flags = if config == BenchConfig::EngineDontcache {
                    WriteFlags::DONTCACHE
                } else {
                    WriteFlags::default()
                };
                let wbt_auto = matches!(config, BenchConfig::Engine | BenchConfig::EngineDontcache);
                let point = row.point.as_ref();
                Writer::Engine(EngineWriter::start(self, wbt_auto, point, flags, runtime)?)
            }
        })
    }

    /// Starts the reader a second after the writer and waits for it,
    /// noting when the writer ends.
    fn read_beside(
        &self,
        writer: &mut Writer,
        reader_args: &[String],
    ) -> Result<Overlap, BenchError> {
        // Counted from here: the engine's writer may have calibrated its
        // device first.
        let writer_start = Instant::now();
        let mut writer_end: Option<(Instant, SystemTime)> = None;
        while writer_start.elapsed() < READER_DELAY {
            std::thread::sleep(POLL);
        }
        let reader_start = Instant::now();
        let mut reader = self.fio.spawn(&self.dir, "reader", reader_args)?;
        loop {
            if writer_end.is_none() && writer.has_finished()? {
                writer_end = Some((Instant::now(), SystemTime::now()));
            }
            if reader.has_finished()? {
                break;
            }
            std::thread::sleep(POLL);
        }
        let reader_end = Instant::now();
        fio::parse_reader(&reader.finish()?).map_err(BenchError::Failed)?;
        Ok(Overlap {
            reader_start,
            reader_end,
            writer_end,
        })
    }
}

/// The reads of the run: only those made while the writer ran measure
/// its interference.
fn count_reads(
    log: &LatencyLog,
    overlap: &Overlap,
    label: &str,
    notes: &mut Notes,
) -> Result<ReaderResult, BenchError> {
    let Overlap {
        reader_start,
        reader_end,
        writer_end,
    } = *overlap;
    match writer_end {
        Some((end, _)) if end < reader_start + MIN_OVERLAP => {
            return Err(BenchError::Failed(format!(
                "{label}: the writer finished {:.1} s after the reader started, \
                 too soon to measure the reader beside it (use a larger --writer-size)",
                end.saturating_duration_since(reader_start).as_secs_f64()
            )));
        }
        Some((end, end_wall)) => {
            notes.push(format!(
                "{label}: the writer finished {:.1} s before the reader; \
                 the reader's {:.1} s beside it are counted",
                (reader_end - end).as_secs_f64(),
                (end - reader_start).as_secs_f64()
            ));
            let until_ms = end_wall
                .duration_since(UNIX_EPOCH)
                .map_err(|e| BenchError::failed("the clock", e))?
                .as_millis() as u64;
            log.reads(Some(until_ms))
        }
        None => log.reads(None),
    }
    .map_err(BenchError::Failed)
}

/// Waits for the writer; returns its MiB/s.
fn finish_writer(writer: Writer, label: &str) -> Result<f64, BenchError> {
    Ok(match writer {
        Writer::Fio(f) => {
            let w = fio::parse_writer(&f.finish()?).map_err(BenchError::Failed)?;
            w.bw_bytes_s / MIB
        }
        Writer::Kernel(k) => k.finish().map_err(BenchError::Failed)?.mib_s(),
        Writer::Engine(e) => {
            let outcome = e.finish()?;
            progress!("{label}: {}", outcome.describe());
            outcome.mib_s()
        }
    })
}
