//! Plain-text tables for the benchmark reports: the first column
//! left-aligned, the others right-aligned, columns two spaces apart.

/// A table being built.
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are blank, extra ones are dropped.
    pub fn row(&mut self, cells: Vec<String>) {
        let mut cells = cells;
        cells.resize(self.headers.len(), String::new());
        self.rows.push(cells);
    }

    /// The headers and the rows.
    pub fn into_parts(self) -> (Vec<String>, Vec<Vec<String>>) {
        (self.headers, self.rows)
    }

    pub fn render(&self) -> String {
        render(&self.headers, &self.rows)
    }
}

/// A table's text: `headers` over `rows`, columns aligned.
pub fn render(headers: &[String], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for line in std::iter::once(headers).chain(rows.iter().map(Vec::as_slice)) {
        let mut text = String::new();
        for (i, (cell, w)) in line.iter().zip(&widths).enumerate() {
            if i == 0 {
                text.push_str(&format!("{cell:<w$}"));
            } else {
                text.push_str(&format!("  {cell:>w$}"));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    out
}

/// A latency in microseconds shown in milliseconds, with precision that
/// suits its size.
pub fn ms(us: f64) -> String {
    let ms = us / 1000.0;
    if ms >= 100.0 {
        format!("{ms:.0}")
    } else if ms >= 10.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.3}")
    }
}

/// A rate (IOPS, ops/s, MiB/s) without needless decimals.
pub fn rate(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// `a / b` as "1.23x", or "-" when `b` is 0 or either is missing.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        // Small ratios keep two significant digits (0.0013x, not 0.00x).
        (Some(a), Some(b)) if b > 0.0 && a.is_finite() => {
            let r = a / b;
            if r > 0.0 && r < 0.1 {
                let digits = (1.0 - r.log10().floor()) as usize;
                format!("{r:.digits$}x")
            } else {
                format!("{r:.2}x")
            }
        }
        _ => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_ratios_keep_two_significant_digits() {
        assert_eq!(ratio(Some(0.446), Some(335.0)), "0.0013x");
        assert_eq!(ratio(Some(5.0), Some(100.0)), "0.050x");
        assert_eq!(ratio(Some(1.5), Some(1.0)), "1.50x");
        assert_eq!(ratio(Some(0.0), Some(1.0)), "0.00x");
        assert_eq!(ratio(Some(1.0), Some(0.0)), "-");
    }

    #[test]
    fn columns_line_up() {
        let mut t = Table::new(&["config", "p99 ms"]);
        t.row(vec!["floor".into(), "0.046".into()]);
        t.row(vec!["kernel-dontcache".into(), "123".into()]);
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "config            p99 ms");
        assert_eq!(lines[1], "floor              0.046");
        assert_eq!(lines[2], "kernel-dontcache     123");
    }

    #[test]
    fn ratios_and_units() {
        assert_eq!(ratio(Some(3.0), Some(2.0)), "1.50x");
        assert_eq!(ratio(Some(3.0), Some(0.0)), "-");
        assert_eq!(ratio(None, Some(1.0)), "-");
        assert_eq!(ms(46.336), "0.046");
        assert_eq!(ms(20410.583), "20.4");
        assert_eq!(rate(26499.2), "26499");
    }
}
