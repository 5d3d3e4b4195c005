//! The scenario file's top level: reading, syntax, scalar keys and
//! `[cache]`; devices and jobs have their own modules.

use crate::device::parse_devices;
use crate::error::{line_column, Located, Res, ScenarioError, Span};
use crate::fields::{Field, TableView};
use crate::job::parse_jobs;
use crate::model::Scenario;
use std::collections::BTreeMap;
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

/// Checks a device model and its params; `Err` is reported at `model`.
pub type ModelValidator<'a> = dyn Fn(&str, &BTreeMap<String, String>) -> Result<(), String> + 'a;

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

/// Reads `key` with `read` if present.
pub(crate) fn optional<'a, T>(
    table: &TableView<'a>,
    key: &str,
    read: impl FnOnce(&Field<'a>) -> Res<T>,
) -> Res<Option<T>> {
    table.get(key).map(|field| read(&field)).transpose()
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

/// Checks a device or job name: it appears in reports and `--set DEVICE.KNOB`,
/// so it must be short and free of spaces and dots.
pub(crate) fn valid_name(field: &Field<'_>) -> Res<String> {
    let name = field.str()?;
    let ok_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if name.is_empty() || name.len() > 32 || !name.chars().all(ok_char) {
        return Err(field.error(format!(
            "'{name}' is not a valid name (1 to 32 letters, digits, '_' or '-')"
        )));
    }
    Ok(name.to_string())
}

/// Remembers names seen so far and rejects a repeat, naming the first use.
pub(crate) struct Unique<'t> {
    text: &'t str,
    what: &'static str,
    seen: BTreeMap<String, Span>,
}

impl<'t> Unique<'t> {
    pub fn new(text: &'t str, what: &'static str) -> Self {
        Unique {
            text,
            what,
            seen: BTreeMap::new(),
        }
    }

    pub fn insert(&mut self, name: &str, field: &Field<'_>) -> Res<()> {
        if let Some(first) = self.seen.get(name) {
            let (line, _) = line_column(self.text, first.as_ref().map_or(0, |s| s.start));
            let message = format!(
                "duplicate {} name '{name}' (first used on line {line})",
                self.what
            );
            return Err(Located::new(field.value_span(), message));
        }
        self.seen.insert(name.to_string(), field.value_span());
        Ok(())
    }
}

/// The tables of `[[key]]`: at least one, at most `max`.
pub(crate) fn table_list<'a>(
    root: &TableView<'a>,
    key: &str,
    max: usize,
) -> Res<Vec<TableView<'a>>> {
    let needed = format!("a scenario needs at least one [[{key}]]");
    let field = root
        .get(key)
        .ok_or_else(|| Located::new(root.header(), needed.clone()))?;
    let tables = field.tables(&format!("an array of tables ([[{key}]])"))?;
    if tables.is_empty() {
        return Err(Located::new(field.value_span(), needed));
    }
    if let Some(extra) = tables.get(max) {
        let message = format!(
            "too many [[{key}]] tables: {} (at most {max})",
            tables.len()
        );
        return Err(Located::new(extra.header(), message));
    }
    Ok(tables)
}
