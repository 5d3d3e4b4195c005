//! A one-line progress bar on standard error, shown only on a terminal.

use std::io::{IsTerminal, Write};

pub struct Progress {
    enabled: bool,
    label: String,
    last_percent: Option<u32>,
}

impl Progress {
    pub fn new(label: &str) -> Progress {
        Progress {
            enabled: std::io::stderr().is_terminal(),
            label: label.to_string(),
            last_percent: None,
        }
    }

    pub fn update(&mut self, fraction: f64) {
        if !self.enabled {
            return;
        }
        let percent = (fraction.clamp(0.0, 1.0) * 100.0) as u32;
        if self.last_percent == Some(percent) {
            return;
        }
        self.last_percent = Some(percent);
        let filled = (percent / 5) as usize;
        let bar = format!("{}{}", "#".repeat(filled), "-".repeat(20 - filled));
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "\r{} [{bar}] {percent:3}% of the time limit",
            self.label
        );
        let _ = err.flush();
    }

    pub fn finish(&mut self) {
        if self.enabled && self.last_percent.is_some() {
            let mut err = std::io::stderr();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}
