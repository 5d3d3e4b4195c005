//! A one-line progress report on standard error, shown only on a terminal:
//! how much simulated time has passed, against the scenario's time limit.

use std::io::{IsTerminal, Write};

pub struct Progress {
    enabled: bool,
    label: String,
    limit_s: f64,
    last_tenth: Option<u64>,
}

impl Progress {
    pub fn new(label: &str, limit_s: f64) -> Progress {
        Progress {
            enabled: std::io::stderr().is_terminal(),
            label: label.to_string(),
            limit_s,
            last_tenth: None,
        }
    }

    /// `fraction` of the time limit has been simulated.
    pub fn update(&mut self, fraction: f64) {
        if !self.enabled {
            return;
        }
        let simulated_s = fraction.clamp(0.0, 1.0) * self.limit_s;
        let tenth = (simulated_s * 10.0) as u64;
        if self.last_tenth == Some(tenth) {
            return;
        }
        self.last_tenth = Some(tenth);
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "\r{}: {simulated_s:.1}s simulated (time limit {:.0}s)",
            self.label, self.limit_s
        );
        let _ = err.flush();
    }

    pub fn finish(&mut self) {
        if self.enabled && self.last_tenth.is_some() {
            let mut err = std::io::stderr();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}
