//! `wb bench replace`: what crash safety costs the two idioms that
//! replace a file's content, through `wb mount` against the kernel on the
//! same directory.
//!
//! - rename: `NAME.tmp` written (--dirty-bytes, not synced), then renamed
//!   over NAME. The mount writes the renamed file back and waits for it
//!   before renaming (auto_da_alloc, its meta.rs); ext4 starts its
//!   write-back and does not wait.
//! - close: NAME opened with O_TRUNC, rewritten, closed. The mount writes
//!   it back at the release that follows the close (which does not wait
//!   for it); ext4 starts its write-back at close.
//!
//! Each replaces --files files that exist and are durable; per idiom the
//! call timed (rename(2), close(2)) and the whole idiom (write, then rename
//! or close), p50, p99 and max, and the mount's p50 and p99 over the
//! kernel's.

use super::cleanup::TempFile;
use super::doc::Doc;
use super::harness::{self, Experiment, Notes, Output, Report, Turn};
use super::mount::Mount;
use super::table::{ms, ratio, Table};
use super::{parse_size, prepare_dir, progress, BenchError, SplitMix64};
use crate::html_file::HtmlFile;
use clap::Args;
use hdrhistogram::Histogram;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Most files a run replaces (a limit on everything).
const MAX_FILES: u64 = 1_000_000;
/// Largest content written (one write call).
const MAX_BYTES: u64 = 64 << 20;
/// Longest latency recorded (longer ones are clamped): 10 s.
const LATENCY_MAX_US: u64 = 10_000_000;

#[derive(Args)]
#[command(after_help = "\
Configurations, one after the other, each on files of its own:
  kernel   the files in --dir, replaced there
  mount    the files replaced through `wb mount --dir`
Idioms: rename (write NAME.tmp, rename it over NAME) and close (open NAME with O_TRUNC, write,
close). Per configuration and idiom: the call (rename or close) and the whole idiom, p50, p99,
max; then the mount over the kernel. Needs root (mounting).

Exit status: 0 on success, 1 if a run failed, 2 for bad arguments.")]
pub struct ReplaceArgs {
    /// Directory served by the mount and used directly by the kernel run
    /// (created if missing; the files are removed at the end).
    #[arg(long, default_value = "wb-data/bench")]
    pub dir: PathBuf,
    /// Files replaced by each idiom.
    #[arg(long, default_value = "2000", value_parser = parse_files)]
    pub files: u64,
    /// Bytes each replacement writes (dirty when it is renamed or closed).
    #[arg(long, default_value = "20KiB", value_parser = parse_size, value_name = "SIZE")]
    pub dirty_bytes: u64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

fn parse_files(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(n) if (1..=MAX_FILES).contains(&n) => Ok(n),
        _ => Err(format!("'{text}' is not a count from 1 to {MAX_FILES}")),
    }
}

/// Latencies of one idiom in one configuration, in microseconds.
struct Idiom {
    call: Histogram<u64>,
    whole: Histogram<u64>,
}

impl Idiom {
    fn new() -> Result<Idiom, BenchError> {
        let hist = || {
            Histogram::new_with_bounds(1, LATENCY_MAX_US, 3)
                .map_err(|e| BenchError::failed("a histogram", e))
        };
        Ok(Idiom {
            call: hist()?,
            whole: hist()?,
        })
    }

    fn record(&mut self, call_us: u64, whole_us: u64) {
        self.call
            .saturating_record(call_us.clamp(1, LATENCY_MAX_US));
        self.whole
            .saturating_record(whole_us.clamp(1, LATENCY_MAX_US));
    }
}

/// The configurations, one after the other, each on files of its own.
struct Replace<'a> {
    args: &'a ReplaceArgs,
    dir: PathBuf,
}

impl Experiment for Replace<'_> {
    /// "kernel" or "mount".
    type Setup = &'static str;
    /// The rename idiom's latencies, and the close idiom's.
    type Run = (Idiom, Idiom);

    fn name(&self, config: &&'static str) -> String {
        config.to_string()
    }

    /// One run each: the name alone.
    fn label(&self, config: &&'static str, _: Turn) -> String {
        config.to_string()
    }

    fn run_once(
        &mut self,
        &config: &&'static str,
        _: &str,
        _: &mut Notes,
    ) -> Result<(Idiom, Idiom), BenchError> {
        let name = format!("wb-replace-{config}");
        let files = TempFile::new(self.dir.join(&name));
        let _ = std::fs::remove_dir_all(files.path());
        if config == "mount" {
            let mount = Mount::start(&self.dir, &[])?;
            let result = replace_all(&mount.path().join(&name), self.args);
            mount.stop()?;
            result
        } else {
            replace_all(files.path(), self.args)
        }
    }

    fn describe(&self, label: &str, (rename, close): &(Idiom, Idiom)) -> Vec<String> {
        vec![format!(
            "{label}: rename p99 {:.0} us, close p99 {:.0} us",
            rename.call.value_at_quantile(0.99),
            close.call.value_at_quantile(0.99)
        )]
    }
}

pub fn run(args: ReplaceArgs, html: Option<HtmlFile>) -> Result<(), BenchError> {
    if args.dirty_bytes > MAX_BYTES {
        return Err(BenchError::BadInput(format!(
            "--dirty-bytes: at most {}",
            wb_engine::units::format_bytes(MAX_BYTES)
        )));
    }
    let dir = prepare_dir(&args.dir)?;
    progress!(
        "replacing {} files of {} in {}",
        args.files,
        wb_engine::units::format_bytes(args.dirty_bytes),
        dir.display()
    );
    let mut exp = Replace { args: &args, dir };
    let measured = harness::run(&mut exp, vec!["kernel", "mount"], 1, &mut Notes::new())?;
    let results: Vec<(&str, Idiom, Idiom)> = measured
        .into_iter()
        .flat_map(|m| m.runs.into_iter().map(move |(r, c)| (m.setup, r, c)))
        .collect();
    let report = Report::new(render(&results), to_json(&results));
    Output::new("wb bench replace", args.json, html).publish(report)
}

/// Makes the files (durable), then replaces each by rename, then each by
/// truncate-and-rewrite.
fn replace_all(dir: &Path, args: &ReplaceArgs) -> Result<(Idiom, Idiom), BenchError> {
    let fail =
        |what: &str, e: std::io::Error| BenchError::failed(format!("{}: {what}", dir.display()), e);
    std::fs::create_dir_all(dir).map_err(|e| fail("mkdir", e))?;
    let mut rng = SplitMix64::seed_from_u64(1);
    let mut data = vec![0u8; args.dirty_bytes as usize];
    let path = |i: u64| dir.join(format!("f{i:07}"));
    for i in 0..args.files {
        rng.fill_bytes(&mut data);
        let mut f = std::fs::File::create(path(i)).map_err(|e| fail("create", e))?;
        f.write_all(&data).map_err(|e| fail("write", e))?;
        f.sync_all().map_err(|e| fail("fsync", e))?;
    }
    let (mut rename, mut close) = (Idiom::new()?, Idiom::new()?);
    for i in 0..args.files {
        rng.fill_bytes(&mut data);
        let start = Instant::now();
        let tmp = dir.join(format!("f{i:07}.tmp"));
        let mut f = std::fs::File::create(&tmp).map_err(|e| fail("create", e))?;
        f.write_all(&data).map_err(|e| fail("write", e))?;
        drop(f);
        let call = Instant::now();
        std::fs::rename(&tmp, path(i)).map_err(|e| fail("rename", e))?;
        let end = Instant::now();
        rename.record(us(end - call), us(end - start));
    }
    for i in 0..args.files {
        rng.fill_bytes(&mut data);
        let start = Instant::now();
        let mut f = std::fs::File::create(path(i)).map_err(|e| fail("open O_TRUNC", e))?;
        f.write_all(&data).map_err(|e| fail("write", e))?;
        let call = Instant::now();
        drop(f);
        let end = Instant::now();
        close.record(us(end - call), us(end - start));
    }
    Ok((rename, close))
}

fn us(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn render(results: &[(&str, Idiom, Idiom)]) -> Doc {
    let mut table = Table::new(&[
        "config",
        "idiom",
        "call p50",
        "call p99",
        "call max",
        "whole p50",
        "whole p99",
        "whole max",
    ]);
    for (config, rename, close) in results {
        for (idiom, h) in [("rename", rename), ("close", close)] {
            let q = |h: &Histogram<u64>, q: f64| ms(h.value_at_quantile(q) as f64);
            table.row(vec![
                config.to_string(),
                idiom.to_string(),
                q(&h.call, 0.5),
                q(&h.call, 0.99),
                ms(h.call.max() as f64),
                q(&h.whole, 0.5),
                q(&h.whole, 0.99),
                ms(h.whole.max() as f64),
            ]);
        }
    }
    let mut doc = Doc::new();
    doc.push_str("replacing a file's content: latencies (ms)\n");
    doc.table(table);
    if let [(_, kr, kc), (_, mr, mc)] = results {
        let mut ratios = Table::new(&["idiom", "call p50", "call p99", "whole p50", "whole p99"]);
        for (idiom, k, m) in [("rename", kr, mr), ("close", kc, mc)] {
            let r = |m: &Histogram<u64>, k: &Histogram<u64>, q: f64| {
                ratio(
                    Some(m.value_at_quantile(q) as f64),
                    Some(k.value_at_quantile(q) as f64),
                )
            };
            ratios.row(vec![
                idiom.to_string(),
                r(&m.call, &k.call, 0.5),
                r(&m.call, &k.call, 0.99),
                r(&m.whole, &k.whole, 0.5),
                r(&m.whole, &k.whole, 0.99),
            ]);
        }
        doc.push_str("\nthe mount over the kernel\n");
        doc.table(ratios);
    }
    doc
}

fn to_json(results: &[(&str, Idiom, Idiom)]) -> serde_json::Value {
    let q = |h: &Histogram<u64>| {
        json!({
            "p50_us": h.value_at_quantile(0.5),
            "p99_us": h.value_at_quantile(0.99),
            "max_us": h.max(),
        })
    };
    let configs: Vec<_> = results
        .iter()
        .map(|(config, rename, close)| {
            json!({
                "config": config,
                "rename": { "call": q(&rename.call), "whole": q(&rename.whole) },
                "close": { "call": q(&close.call), "whole": q(&close.whole) },
            })
        })
        .collect();
    json!({ "bench": "replace", "configs": configs })
}
