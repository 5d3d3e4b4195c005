//! A benchmark's report as it is built: lines of text and tables, in
//! order. Printed, it is the plain text the terminal shows; with `--html`
//! the same parts become a page with a chart per numeric column
//! (wb_report::document), plus the figures drawn for the page alone.

use super::table::Table;
use std::fmt;

/// A report being written (`write!`, `push_str` and `table`).
#[derive(Default)]
pub struct Doc {
    blocks: Vec<wb_report::Block>,
}

impl Doc {
    pub fn new() -> Doc {
        Doc::default()
    }

    pub fn push_str(&mut self, text: &str) {
        if let Some(wb_report::Block::Text(last)) = self.blocks.last_mut() {
            last.push_str(text);
        } else {
            self.blocks.push(wb_report::Block::Text(text.to_string()));
        }
    }

    pub fn push(&mut self, c: char) {
        self.push_str(c.encode_utf8(&mut [0; 4]));
    }

    pub fn table(&mut self, table: Table) {
        let (headers, rows) = table.into_parts();
        self.blocks.push(wb_report::Block::Table { headers, rows });
    }

    /// Charts for the HTML page only (the text leaves them out).
    pub fn figures(&mut self, figures: Vec<wb_report::Figure>) {
        self.blocks.push(wb_report::Block::Figures(figures));
    }

    pub fn blocks(&self) -> &[wb_report::Block] {
        &self.blocks
    }
}

impl From<String> for Doc {
    fn from(text: String) -> Doc {
        Doc::from(text.as_str())
    }
}

impl From<&str> for Doc {
    fn from(text: &str) -> Doc {
        let mut doc = Doc::new();
        doc.push_str(text);
        doc
    }
}

impl fmt::Write for Doc {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push_str(s);
        Ok(())
    }
}

impl fmt::Display for Doc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for block in &self.blocks {
            match block {
                wb_report::Block::Text(text) => f.write_str(text)?,
                wb_report::Block::Table { headers, rows } => {
                    f.write_str(&super::table::render(headers, rows))?
                }
                wb_report::Block::Figures(_) => {}
            }
        }
        Ok(())
    }
}
