//! The scenario file's top level: reading, syntax, scalar keys and
//! `[cache]`; devices and jobs have their own modules.

use crate::device::parse_devices;
use crate::error::{Located, Res, ScenarioError};
use crate::fields::{Field, TableView};
use crate::job::parse_jobs;
use crate::model::Scenario;
use crate::section::{optional, ModelValidator};
use std::path::Path;
use toml_edit::ImDocument;
use wb_engine::Config;

/// Scenario files are written by hand; anything larger is a mistake, and
/// the cap bounds the parser's work on hostile input.
const MAX_FILE_BYTES: usize = 4 << 20;
/// Default and largest simulated duration.
const DEFAULT_DURATION_NS: u64 = 3600 * 1_000_000_000;
const MAX_DURATION_NS: u64 = 24 * DEFAULT_DURATION_NS;

const TOP_KEYS: &[&str] = &[
    "name",
    "description",
    "seed",
    "duration",
    "cache",
    "device",
    "job",
];

/// Parses and validates scenario `text`; `path` only names the file in errors.
/// `validate_model(model, params)` is called once per device.
pub fn parse(
    path: &Path,
    text: &str,
    validate_model: &ModelValidator<'_>,
) -> Result<Scenario, ScenarioError> {
    if text.len() > MAX_FILE_BYTES {
        let message = format!(
            "file is too large ({} bytes, at most {MAX_FILE_BYTES})",
            text.len()
        );
        return Err(ScenarioError::whole_file(path, message));
    }
    let doc = ImDocument::parse(text).map_err(|e| syntax_error(path, text, &e))?;
    let root = TableView::root(doc.as_table());
    build(&root, text, validate_model).map_err(|e| e.into_error(path, text))
}

/// Reads and parses the file at `path`.
pub fn load(path: &Path, validate_model: &ModelValidator<'_>) -> Result<Scenario, ScenarioError> {
    let bytes = std::fs::read(path)
        .map_err(|e| ScenarioError::whole_file(path, format!("cannot read scenario: {e}")))?;
    // Decode ourselves so a bad byte is reported where it is, not as a bare
    // "stream did not contain valid UTF-8".
    match std::str::from_utf8(&bytes) {
        Ok(text) => parse(path, text, validate_model),
        Err(e) => {
            let valid = String::from_utf8_lossy(&bytes[..e.valid_up_to()]);
            let message = "the file is not valid UTF-8 text";
            Err(ScenarioError::at(path, &valid, valid.len(), message))
        }
    }
}

/// Turns the TOML parser's error into ours. Its message may span several
/// lines ("invalid key\nexpected ..."); one line reads better after a path.
fn syntax_error(path: &Path, text: &str, error: &toml_edit::TomlError) -> ScenarioError {
    let offset = error.span().map_or(0, |span| span.start);
    let parts: Vec<&str> = error
        .message()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let message = format!("TOML syntax error: {}", parts.join("; "));
    ScenarioError::at(path, text, offset, message)
}

fn build(root: &TableView<'_>, text: &str, validate_model: &ModelValidator<'_>) -> Res<Scenario> {
    root.check_keys(TOP_KEYS, |key| {
        format!(
            "unknown key '{key}' at the top level (known: {})",
            TOP_KEYS.join(", ")
        )
    })?;
    let name_field = root.require("name")?;
    let name = name_field.str()?.to_string();
    if name.trim().is_empty() {
        return Err(name_field.error("must not be empty"));
    }
    // Top to bottom, so the first error reported is the first in the file.
    let description = optional(root, "description", |f| Ok(f.str()?.to_string()))?;
    let seed = optional(root, "seed", |f| f.count_from(0))?;
    let duration_ns = optional(root, "duration", duration)?;
    let cache = optional(root, "cache", cache)?;
    let devices = parse_devices(root, text, validate_model)?;
    let jobs = parse_jobs(root, &devices, text)?;
    Ok(Scenario {
        name,
        description: description.unwrap_or_default(),
        seed: seed.unwrap_or(1),
        duration_ns: duration_ns.unwrap_or(DEFAULT_DURATION_NS),
        cache: cache.unwrap_or_default(),
        devices,
        jobs,
    })
}

fn duration(field: &Field<'_>) -> Res<u64> {
    let ns = field.duration()?;
    if ns == 0 || ns > MAX_DURATION_NS {
        return Err(field.error("must be more than 0 and at most 24h"));
    }
    Ok(ns)
}

/// `[cache]`: every key is a [`Config`] knob, set through `Config::set` so
/// the file and `--set` accept exactly the same values.
fn cache(field: &Field<'_>) -> Res<Config> {
    let table = field.table()?;
    let mut config = Config::default();
    for knob in table.fields() {
        if !Config::KNOBS.contains(&knob.key) {
            let known = Config::KNOBS.join(", ");
            let message = format!("unknown key '{}' in [cache] (known: {known})", knob.key);
            return Err(Located::new(knob.key_span_or_value(), message));
        }
        let value = knob.knob_text(false)?;
        config
            .set(knob.key, &value)
            .map_err(|e| Located::new(knob.value_span(), e.to_string()))?;
    }
    Ok(config)
}
