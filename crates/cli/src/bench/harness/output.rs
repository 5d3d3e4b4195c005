//! Where a report goes: standard output as text, or one JSON object with
//! `--json`; and the HTML page with `--html`.

use crate::bench::doc::Doc;
use crate::bench::BenchError;
use crate::html_file::HtmlFile;

/// A bench's report: the text (tables and lines, [`Doc`]) and the JSON object.
pub struct Report {
    pub doc: Doc,
    pub json: serde_json::Value,
    /// What also goes to standard error with `--json`, before the object
    /// (the table of a long bench, for whoever watches it).
    pub stderr_with_json: Option<String>,
}

impl Report {
    pub fn new(doc: Doc, json: serde_json::Value) -> Report {
        Report {
            doc,
            json,
            stderr_with_json: None,
        }
    }
}

/// Where a report goes: `--json`, `--html` and the page's title.
pub struct Output {
    pub json: bool,
    pub html: Option<HtmlFile>,
    /// "wb bench interference".
    pub title: &'static str,
}

impl Output {
    pub fn new(title: &'static str, json: bool, html: Option<HtmlFile>) -> Output {
        Output { json, html, title }
    }

    /// Prints `report` (its text, or its JSON with `--json`) and writes the
    /// HTML page if one was asked for.
    pub fn publish(self, report: Report) -> Result<(), BenchError> {
        let doc = self.print(report);
        write_html(self.html, self.title, &doc)
    }

    /// [`Output::publish`], the page with the charts of `figures` added
    /// (drawn only for the page).
    pub fn publish_with_figures(
        self,
        report: Report,
        figures: impl FnOnce() -> Result<Vec<wb_report::Figure>, BenchError>,
    ) -> Result<(), BenchError> {
        let mut doc = self.print(report);
        if self.html.is_some() {
            doc.figures(figures()?);
        }
        write_html(self.html, self.title, &doc)
    }

    fn print(&self, report: Report) -> Doc {
        if self.json {
            if let Some(text) = &report.stderr_with_json {
                eprint!("{text}");
            }
            println!("{}", report.json);
        } else {
            print!("{}", report.doc);
        }
        report.doc
    }
}

/// Writes `doc` as an HTML page titled `title` when `--html` asked for one.
fn write_html(html: Option<HtmlFile>, title: &str, doc: &Doc) -> Result<(), BenchError> {
    let Some(out) = html else {
        return Ok(());
    };
    let page = wb_report::document(title, doc.blocks())
        .map_err(|e| BenchError::failed("the HTML report", e))?;
    out.write_page(&page).map_err(BenchError::Failed)
}
