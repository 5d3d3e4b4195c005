//! What the sections of a scenario file share: optional keys, names and
//! their uniqueness, lists of tables, and the device-model check's type.

use crate::error::{line_column, Located, Res, Span};
use crate::fields::{Field, TableView};
use std::collections::BTreeMap;

/// Checks a device model and its params; `Err` is reported at `model`.
pub type ModelValidator<'a> = dyn Fn(&str, &BTreeMap<String, String>) -> Result<(), String> + 'a;

/// Reads `key` with `read` if present.
pub(crate) fn optional<'a, T>(
    table: &TableView<'a>,
    key: &str,
    read: impl FnOnce(&Field<'a>) -> Res<T>,
) -> Res<Option<T>> {
    table.get(key).map(|field| read(&field)).transpose()
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
