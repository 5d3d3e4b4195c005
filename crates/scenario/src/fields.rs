//! Typed access to a parsed TOML document that keeps every key's and
//! value's place, so each complaint can name its line.

use crate::error::{Located, Res, Span};
use toml_edit::{Item, TableLike, Value};
use wb_engine::units::{parse_bytes, parse_duration_ns};

/// How deep `first_span` looks for a located descendant; bounded so a
/// pathological `[a.a.a...]` header cannot exhaust the stack.
const SPAN_SEARCH_DEPTH: usize = 8;

/// One `key = value` of a table.
#[derive(Clone)]
pub(crate) struct Field<'a> {
    pub key: &'a str,
    pub key_span: Span,
    pub item: &'a Item,
}

/// A table (`[x]`, `[[x]]`, inline `{...}` or dotted `x.y = ...`).
#[derive(Clone)]
pub(crate) struct TableView<'a> {
    table: &'a dyn TableLike,
    /// Starts at the header, so "missing key" errors point there.
    span: Span,
}

/// "a string", "a table" ...: what the user wrote, for type errors.
pub(crate) fn describe(item: &Item) -> &'static str {
    match item {
        Item::None => "nothing",
        Item::Table(_) => "a table",
        Item::ArrayOfTables(_) => "an array of tables",
        Item::Value(value) => match value {
            Value::String(_) => "a string",
            Value::Integer(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Boolean(_) => "a boolean",
            Value::Datetime(_) => "a date-time",
            Value::Array(_) => "an array",
            Value::InlineTable(_) => "an inline table",
        },
    }
}

/// The item's own span, or, for implicit tables that have none, the span
/// of the first located thing inside.
fn first_span(item: &Item, depth: usize) -> Span {
    if let Some(span) = item.span() {
        return Some(span);
    }
    if depth == 0 {
        return None;
    }
    let table = item.as_table_like()?;
    table
        .iter()
        .find_map(|(_, child)| first_span(child, depth - 1))
}

impl<'a> TableView<'a> {
    /// Views the document root.
    pub fn root(table: &'a toml_edit::Table) -> Self {
        TableView {
            table,
            span: Some(0..0),
        }
    }

    /// Views `item` as a table, if it is one; `fallback` locates tables the
    /// document gives no span (dotted keys).
    pub fn of(item: &'a Item, fallback: Span) -> Option<Self> {
        let table = item.as_table_like()?;
        let span = first_span(item, SPAN_SEARCH_DEPTH).or(fallback);
        Some(TableView { table, span })
    }

    fn located(table: &'a dyn TableLike, span: Span, fallback: &Span) -> Self {
        TableView {
            table,
            span: span.or_else(|| fallback.clone()),
        }
    }

    /// Where "missing key" errors point: the start of the header.
    pub fn header(&self) -> Span {
        self.span.as_ref().map(|span| span.start..span.start)
    }

    /// The table's keys in document order.
    pub fn fields(&self) -> Vec<Field<'a>> {
        let table = self.table;
        table
            .iter()
            .map(|(key, item)| Field {
                key,
                key_span: table.key(key).and_then(|k| k.span()),
                item,
            })
            .collect()
    }

    pub fn get(&self, key: &str) -> Option<Field<'a>> {
        let (k, item) = self.table.get_key_value(key)?;
        Some(Field {
            key: k.get(),
            key_span: k.span(),
            item,
        })
    }

    /// The field, or an error at the header naming what is missing.
    pub fn require(&self, key: &str) -> Res<Field<'a>> {
        let message = format!("missing required key '{key}'");
        self.get(key)
            .ok_or_else(|| Located::new(self.header(), message))
    }

    /// Rejects the first key not in `known`, explained by `explain(key)`.
    pub fn check_keys(&self, known: &[&str], explain: impl Fn(&str) -> String) -> Res<()> {
        match self.fields().into_iter().find(|f| !known.contains(&f.key)) {
            Some(field) => Err(Located::new(field.key_span_or_value(), explain(field.key))),
            None => Ok(()),
        }
    }
}

impl<'a> Field<'a> {
    /// Where problems with the value point.
    pub fn value_span(&self) -> Span {
        first_span(self.item, SPAN_SEARCH_DEPTH).or_else(|| self.key_span.clone())
    }

    /// Where problems with the key itself (unknown key) point.
    pub fn key_span_or_value(&self) -> Span {
        self.key_span.clone().or_else(|| self.value_span())
    }

    /// An error about this value, prefixed with the key.
    pub fn error(&self, problem: impl std::fmt::Display) -> Located {
        Located::new(self.value_span(), format!("{}: {problem}", self.key))
    }

    fn expected(&self, what: &str) -> Located {
        self.error(format!("expected {what}, found {}", describe(self.item)))
    }

    pub fn str(&self) -> Res<&'a str> {
        self.item.as_str().ok_or_else(|| self.expected("a string"))
    }

    pub fn bool(&self) -> Res<bool> {
        self.item
            .as_bool()
            .ok_or_else(|| self.expected("a boolean (true or false)"))
    }

    pub fn int(&self) -> Res<i64> {
        self.item
            .as_integer()
            .ok_or_else(|| self.expected("an integer"))
    }

    /// An integer within `min..=max`.
    pub fn int_in(&self, min: i64, max: i64) -> Res<i64> {
        let value = self.int()?;
        if value < min || value > max {
            return Err(self.error(format!("must be between {min} and {max}, found {value}")));
        }
        Ok(value)
    }

    /// An integer >= `min`, as u64.
    pub fn count_from(&self, min: u64) -> Res<u64> {
        let value = self.int()?;
        match u64::try_from(value) {
            Ok(n) if n >= min => Ok(n),
            _ => Err(self.error(format!("must be at least {min}, found {value}"))),
        }
    }

    /// A table nested in this field (`[device.params]`, `params = {...}`).
    pub fn table(&self) -> Res<TableView<'a>> {
        TableView::of(self.item, self.key_span.clone()).ok_or_else(|| self.expected("a table"))
    }

    /// The tables of `[[key]]`, or of `key = [{...}, ...]`; `what` names
    /// the expected form in the type error.
    pub fn tables(&self, what: &str) -> Res<Vec<TableView<'a>>> {
        let fallback = self.key_span.clone();
        if let Some(array) = self.item.as_array_of_tables() {
            let tables = array
                .iter()
                .map(|t| TableView::located(t, t.span(), &fallback));
            return Ok(tables.collect());
        }
        let array = self.item.as_array().ok_or_else(|| self.expected(what))?;
        array
            .iter()
            .map(|value| match value.as_inline_table() {
                Some(t) => Ok(TableView::located(t, t.span(), &fallback)),
                None => Err(Located::new(
                    value.span().or_else(|| fallback.clone()),
                    format!(
                        "{}: expected {what}, found an array element that is not a table",
                        self.key
                    ),
                )),
            })
            .collect()
    }

    /// A size: bytes as an integer, or a string with a unit ("4KiB").
    pub fn size(&self) -> Res<u64> {
        if let Some(n) = self.item.as_integer() {
            return u64::try_from(n).map_err(|_| self.error(format!("size {n} is negative")));
        }
        let text = self
            .item
            .as_str()
            .ok_or_else(|| self.expected("a size (bytes, or a string like \"4KiB\")"))?;
        parse_bytes(text).map_err(|e| self.error(e))
    }

    /// A size within `min..=max`; `max_text` is `max` for people.
    pub fn size_in(&self, min: u64, max: u64, max_text: &str) -> Res<u64> {
        let bytes = self.size()?;
        if bytes < min || bytes > max {
            let min_text = if min == 1 {
                "1 byte".to_string()
            } else {
                format!("{min} bytes")
            };
            return Err(self.error(format!("must be between {min_text} and {max_text}")));
        }
        Ok(bytes)
    }

    /// A duration: a string with a unit ("200ms"). Bare integers are
    /// rejected with the unit hint, since their unit would be a guess.
    pub fn duration(&self) -> Res<u64> {
        let text = match self.item {
            Item::Value(Value::Integer(n)) => n.value().to_string(),
            item => item
                .as_str()
                .ok_or_else(|| self.expected("a duration (a string like \"10s\")"))?
                .to_string(),
        };
        parse_duration_ns(&text).map_err(|e| self.error(e))
    }

    /// A knob value as the text `Config::set`/`DeviceConfig::set` parse.
    pub fn knob_text(&self, allow_bool: bool) -> Res<String> {
        match self.item {
            Item::Value(Value::Integer(n)) => Ok(n.value().to_string()),
            Item::Value(Value::String(s)) => Ok(s.value().clone()),
            Item::Value(Value::Boolean(b)) if allow_bool => Ok(b.value().to_string()),
            _ if allow_bool => Err(self.expected("an integer, a string or a boolean")),
            _ => Err(self.expected("an integer or a string")),
        }
    }

    /// A model parameter: strings pass through, numbers become their text.
    pub fn param_text(&self) -> Res<String> {
        match self.item {
            Item::Value(Value::Integer(n)) => Ok(n.value().to_string()),
            Item::Value(Value::Float(x)) => Ok(x.value().to_string()),
            Item::Value(Value::String(s)) => Ok(s.value().clone()),
            _ => Err(self.expected("a string or a number")),
        }
    }
}
