//! What a report makes of a configuration's runs: medians, and ratios to
//! a named baseline row.

use crate::bench::median;
use crate::bench::table::{self, Table};

/// The median of `figure` over `runs`.
pub fn median_of<R>(runs: &[R], figure: impl Fn(&R) -> f64) -> f64 {
    median(&runs.iter().map(figure).collect::<Vec<_>>())
}

/// The median of `figure` over the runs that have it; None if none has.
pub fn median_some<R>(runs: &[R], figure: impl Fn(&R) -> Option<f64>) -> Option<f64> {
    let values: Vec<f64> = runs.iter().filter_map(figure).collect();
    (!values.is_empty()).then(|| median(&values))
}

/// A row's figures, by name, for [`ratio_table`].
pub struct Values {
    pub name: String,
    pub values: Vec<Option<f64>>,
}

/// Every row's figures over the `base` row's ("1.50x"; "-" where either is
/// missing), one column per figure under `columns`, the first column headed
/// `title`. The base row itself is left out.
pub fn ratio_table(title: &str, columns: &[&str], rows: &[Values], base: &Values) -> Table {
    let headers: Vec<&str> = std::iter::once(title)
        .chain(columns.iter().copied())
        .collect();
    let mut t = Table::new(&headers);
    for row in rows.iter().filter(|r| r.name != base.name) {
        let cells = row
            .values
            .iter()
            .zip(&base.values)
            .map(|(&x, &b)| table::ratio(x, b));
        t.row(std::iter::once(row.name.clone()).chain(cells).collect());
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_ratios_to_a_base_row() {
        let runs = [(1.0, Some(4.0)), (3.0, None), (2.0, Some(6.0))];
        assert_eq!(median_of(&runs, |r| r.0), 2.0);
        assert_eq!(median_some(&runs, |r| r.1), Some(5.0));
        assert_eq!(median_some(&runs[1..2], |r| r.1), None);
        let row = |name: &str, values: [Option<f64>; 2]| Values {
            name: name.into(),
            values: values.to_vec(),
        };
        let base = row("floor", [Some(2.0), None]);
        let rows = [base_copy(&base), row("kernel", [Some(3.0), Some(1.0)])];
        let text = ratio_table("ratio to floor", &["p50", "writer"], &rows, &base).render();
        assert_eq!(
            text,
            "ratio to floor    p50  writer\nkernel          1.50x       -\n"
        );
    }

    fn base_copy(f: &Values) -> Values {
        Values {
            name: f.name.clone(),
            values: f.values.clone(),
        }
    }
}
