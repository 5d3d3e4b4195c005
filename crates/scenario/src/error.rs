//! The two error types users see, and the internal "message at a span"
//! the parser passes around before it knows the file's name.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// A problem in a scenario file, located at the offending key or value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    pub path: PathBuf,
    /// 1-based; 0 when the problem has no place in the text (unreadable file).
    pub line: usize,
    /// 1-based, in characters; 0 together with `line`.
    pub column: usize,
    pub message: String,
}

impl ScenarioError {
    /// An error about the file as a whole (it could not be read at all).
    pub(crate) fn whole_file(path: &Path, message: impl Into<String>) -> Self {
        ScenarioError {
            path: path.to_path_buf(),
            line: 0,
            column: 0,
            message: message.into(),
        }
    }

    /// An error at byte `offset` of `text`.
    pub(crate) fn at(path: &Path, text: &str, offset: usize, message: impl Into<String>) -> Self {
        let (line, column) = line_column(text, offset);
        ScenarioError {
            path: path.to_path_buf(),
            line,
            column,
            message: message.into(),
        }
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        match (self.line, self.column) {
            (0, _) => write!(f, "{path}: {}", self.message),
            (line, 0) => write!(f, "{path}:{line}: {}", self.message),
            (line, column) => write!(f, "{path}:{line}:{column}: {}", self.message),
        }
    }
}

impl std::error::Error for ScenarioError {}

/// A rejected `--set` override. The field holds `"{spec}: {message}"`;
/// Display prefixes it with `--set ` so the user sees which flag failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetError(pub String);

impl SetError {
    pub(crate) fn new(spec: &str, message: impl fmt::Display) -> Self {
        SetError(format!("{spec}: {message}"))
    }
}

impl fmt::Display for SetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "--set {}", self.0)
    }
}

impl std::error::Error for SetError {}

/// A byte range in the scenario text, when the document knows one.
pub(crate) type Span = Option<Range<usize>>;

/// A message at a place in the text; becomes a [`ScenarioError`] once the
/// path is attached. Keeps the tree-walking code free of path plumbing.
#[derive(Clone, Debug)]
pub(crate) struct Located {
    pub span: Span,
    pub message: String,
}

impl Located {
    pub fn new(span: Span, message: impl Into<String>) -> Self {
        Located {
            span,
            message: message.into(),
        }
    }

    /// Prefixes the message with where it happened ("job 'writers'"), since
    /// a key like `block_size` alone does not say which job is wrong.
    pub fn within(mut self, context: &str) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }

    pub fn into_error(self, path: &Path, text: &str) -> ScenarioError {
        let offset = self.span.map_or(0, |span| span.start);
        ScenarioError::at(path, text, offset, self.message)
    }
}

/// Results inside the parser.
pub(crate) type Res<T> = Result<T, Located>;

/// 1-based line and column (in characters) of byte `offset` in `text`.
/// Offsets past the end or inside a character are clamped, never a panic.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text.as_bytes()[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let column = text
        .get(line_start..offset)
        .map_or(offset - line_start, |s| s.chars().count());
    (line, column + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(line_column(text, 0), (1, 1));
        assert_eq!(line_column(text, 4), (1, 5));
        assert_eq!(line_column(text, 6), (2, 1));
        // After "bé" (three bytes, two characters) comes column 3.
        assert_eq!(line_column(text, 9), (2, 3));
        // Inside 'é' and past the end are clamped.
        assert_eq!(line_column(text, 8), (2, 2));
        assert_eq!(line_column(text, 1000), (3, 1));
    }

    #[test]
    fn display_omits_missing_position() {
        let e = ScenarioError::whole_file(Path::new("x.toml"), "cannot read");
        assert_eq!(e.to_string(), "x.toml: cannot read");
        let e = ScenarioError::at(Path::new("x.toml"), "a\nb", 2, "bad");
        assert_eq!(e.to_string(), "x.toml:2:1: bad");
        assert_eq!(SetError::new("a=b", "oops").to_string(), "--set a=b: oops");
    }
}
