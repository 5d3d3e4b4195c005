//! A one-line progress bar on standard error (indicatif), shown only on a
//! terminal: a log or a pipe gets nothing, so no escape codes end up in
//! files. Two kinds: simulated time against a scenario's time limit
//! (`wb sim`), and items done out of a known number (`wb vopr`'s seeds);
//! both with the rate and the time left. The line is cleared when the
//! work ends (or the bar is dropped), so the report that follows stands
//! alone.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressFinish, ProgressState, ProgressStyle};
use std::io::IsTerminal;

/// Redraws per second at most: the line is for a person.
const REDRAWS_PER_S: u8 = 10;

/// Simulated time in milliseconds, the bar's unit for `wb sim`.
const MS_PER_S: f64 = 1000.0;

pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// Simulated time against `limit_s`, the scenario's time limit;
    /// advanced with [`Progress::update`].
    pub fn simulated(label: &str, limit_s: f64) -> Progress {
        let limit_ms = (limit_s * MS_PER_S).max(1.0) as u64;
        let style = simulated_style()
            .with_key(
                "simulated",
                |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(w, "{:.1}s", s.pos() as f64 / MS_PER_S);
                },
            )
            .with_key("limit", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.0}s", s.len().unwrap_or(0) as f64 / MS_PER_S);
            })
            .with_key("speed", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                // Simulated milliseconds per wall second / 1000: how many
                // times faster than real time the run goes.
                let speed = short_rate(s.per_sec() / MS_PER_S);
                let _ = write!(w, "{speed}x real time");
            });
        Progress::new(label, limit_ms, style, true)
    }

    /// `total` items called `items` ("seeds"), advanced with
    /// [`Progress::set`]; not shown at all unless `shown`.
    pub fn counted(label: &str, total: u64, items: &str, shown: bool) -> Progress {
        let style = counted_style(items).with_key(
            "rate",
            |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{}", short_rate(s.per_sec()));
            },
        );
        Progress::new(label, total, style, shown)
    }

    fn new(label: &str, len: u64, style: ProgressStyle, shown: bool) -> Progress {
        let target = if shown && std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr_with_hz(REDRAWS_PER_S)
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(len), target)
            .with_style(style)
            .with_prefix(label.to_string())
            .with_finish(ProgressFinish::AndClear);
        Progress { bar }
    }

    /// `fraction` of the time limit has been simulated.
    pub fn update(&self, fraction: f64) {
        let len = self.bar.length().unwrap_or(0);
        self.bar
            .set_position((fraction.clamp(0.0, 1.0) * len as f64) as u64);
    }

    /// `done` items are done; `note` follows the count ("2 violations").
    pub fn set(&self, done: u64, note: String) {
        self.bar.set_message(note);
        self.bar.set_position(done);
    }

    /// Clears the line.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// `simulating s1: 12.3s of 60s simulated, 48x real time, 1s left [=====>    ]`
fn simulated_style() -> ProgressStyle {
    ProgressStyle::with_template(
        "{prefix}: {simulated} of {limit} simulated, {speed}, {eta} left [{wide_bar}]",
    )
    .expect("a valid template")
    .progress_chars("=> ")
}

/// `wb vopr: 120/1000 seeds, 0 violations, 41 seeds/s, 21s left [=====>    ]`
fn counted_style(items: &str) -> ProgressStyle {
    ProgressStyle::with_template(&format!(
        "{{prefix}}: {{pos}}/{{len}} {items}, {{msg}}, {{rate}} {items}/s, {{eta}} left [{{wide_bar}}]"
    ))
    .expect("a valid template")
    .progress_chars("=> ")
}

/// `x` with two digits that matter below 10, none after the point from
/// 10 on: as many digits as a reader can use.
fn short_rate(x: f64) -> String {
    if x < 1.0 {
        format!("{x:.2}")
    } else if x < 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_build_and_count_without_a_terminal() {
        let sim = Progress::simulated("simulating s", 60.0);
        sim.update(0.5);
        assert_eq!(sim.bar.position(), 30_000);
        sim.update(2.0);
        assert_eq!(sim.bar.position(), 60_000);
        sim.finish();
        let seeds = Progress::counted("wb vopr", 10, "seeds", false);
        assert!(seeds.bar.is_hidden());
        seeds.set(3, "0 violations".into());
        assert_eq!(seeds.bar.position(), 3);
        seeds.finish();
    }

    #[test]
    fn a_zero_time_limit_still_makes_a_bar() {
        let sim = Progress::simulated("simulating s", 0.0);
        assert_eq!(sim.bar.length(), Some(1));
        sim.update(1.0);
        assert_eq!(sim.bar.position(), 1);
    }

    #[test]
    fn rates_keep_the_digits_a_reader_uses() {
        assert_eq!(short_rate(0.0665), "0.07");
        assert_eq!(short_rate(1.26), "1.3");
        assert_eq!(short_rate(9.94), "9.9");
        assert_eq!(short_rate(104.4), "104");
    }
}
