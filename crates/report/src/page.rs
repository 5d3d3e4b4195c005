//! The HTML page: a head with its style, headings, tables and figures,
//! built as one string. Every text that comes from a report is escaped.

use crate::plot::run_css_color;

const STYLE: &str = "\
body{font-family:sans-serif;margin:24px;max-width:1040px;color:#222}\
h1{font-size:24px}h2{font-size:20px;margin-top:32px;border-bottom:1px solid #ccc}\
h3{font-size:16px;margin-bottom:4px}\
table{border-collapse:collapse;margin:8px 0;font-size:13px}\
th,td{padding:3px 10px;text-align:right;border-bottom:1px solid #eee}\
th:first-child,td:first-child{text-align:left}\
figure{margin:8px 0}figcaption{font-size:12px;color:#555}\
.charts{display:flex;flex-wrap:wrap;gap:12px}pre{font-size:13px;white-space:pre-wrap}\
.swatch{display:inline-block;width:14px;height:14px;margin-right:6px;vertical-align:middle}";

/// A page being written.
pub struct Page {
    html: String,
}

impl Page {
    pub fn new(title: &str) -> Page {
        let title = escape(title);
        Page {
            html: format!(
                "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
                 <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n"
            ),
        }
    }

    pub fn heading(&mut self, level: u8, text: &str) {
        self.html
            .push_str(&format!("<h{level}>{}</h{level}>\n", escape(text)));
    }

    /// Text shown as it is (a benchmark's lines).
    pub fn preformatted(&mut self, text: &str) {
        self.html
            .push_str(&format!("<pre>{}</pre>\n", escape(text)));
    }

    /// Figures side by side until [`Page::close_charts`].
    pub fn open_charts(&mut self) {
        self.html.push_str("<div class=\"charts\">\n");
    }

    pub fn close_charts(&mut self) {
        self.html.push_str("</div>\n");
    }

    pub fn paragraph(&mut self, text: &str) {
        self.html.push_str(&format!("<p>{}</p>\n", escape(text)));
    }

    /// The runs, each with its colour.
    pub fn legend(&mut self, runs: &[(String, String)]) {
        self.html.push_str("<ul class=\"runs\">\n");
        for (r, (label, about)) in runs.iter().enumerate() {
            self.html.push_str(&format!(
                "<li><span class=\"swatch\" style=\"background:{}\"></span><b>{}</b> {}</li>\n",
                run_css_color(r),
                escape(label),
                escape(about)
            ));
        }
        self.html.push_str("</ul>\n");
    }

    /// A table; the first row is the header.
    pub fn table(&mut self, rows: &[Vec<String>]) {
        let Some((header, body)) = rows.split_first() else {
            return;
        };
        self.html.push_str("<table>\n<tr>");
        for cell in header {
            self.html.push_str(&format!("<th>{}</th>", escape(cell)));
        }
        self.html.push_str("</tr>\n");
        for row in body {
            self.html.push_str("<tr>");
            for cell in row {
                self.html.push_str(&format!("<td>{}</td>", escape(cell)));
            }
            self.html.push_str("</tr>\n");
        }
        self.html.push_str("</table>\n");
    }

    /// A figure: an SVG drawn by plotters (trusted markup), named `id`
    /// for whoever reads the page back.
    pub fn figure(&mut self, id: &str, svg: &str, caption: &str) {
        self.html.push_str(&format!(
            "<figure class=\"plot\" data-plot=\"{}\">\n{svg}\n",
            escape(id)
        ));
        if !caption.is_empty() {
            self.html
                .push_str(&format!("<figcaption>{}</figcaption>\n", escape(caption)));
        }
        self.html.push_str("</figure>\n");
    }

    pub fn finish(mut self) -> String {
        self.html.push_str("</body>\n</html>\n");
        self.html
    }
}

/// Text as HTML: the five characters that mean markup, as entities.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_text_cannot_become_markup() {
        assert_eq!(
            escape("<script>\"a\" & 'b'</script>"),
            "&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;&lt;/script&gt;"
        );
        let mut page = Page::new("a<b");
        page.paragraph("x>y");
        let html = page.finish();
        assert!(html.contains("<title>a&lt;b</title>"));
        assert!(html.contains("<p>x&gt;y</p>"));
        assert!(!html.contains("a<b"));
    }
}
