//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use wb_scenario::{parse, Scenario, ScenarioError};

/// A stand-in for the simulator's model check: three models, and one
/// parameter (`readahead_kib`) that must be a number.
pub fn validate(model: &str, params: &BTreeMap<String, String>) -> Result<(), String> {
    if !["hdd", "nvme", "sata-ssd"].contains(&model) {
        return Err(format!(
            "unknown device model '{model}' (known: hdd, nvme, sata-ssd)"
        ));
    }
    for (key, value) in params {
        match key.as_str() {
            "readahead_kib" if value.parse::<u64>().is_ok() => {}
            "readahead_kib" => {
                return Err(format!("param readahead_kib: '{value}' is not a number"))
            }
            other => return Err(format!("unknown param '{other}' for model {model}")),
        }
    }
    Ok(())
}

pub fn parse_text(text: &str) -> Result<Scenario, ScenarioError> {
    parse(Path::new("test.toml"), text, &validate)
}

/// Parses `text`, which must fail at `line` with `phrase` in the message.
#[track_caller]
pub fn assert_error(text: &str, line: usize, phrase: &str) -> ScenarioError {
    let error = match parse_text(text) {
        Ok(_) => panic!("expected an error containing {phrase:?}, but the text parsed:\n{text}"),
        Err(e) => e,
    };
    assert!(
        error.message.contains(phrase),
        "message {:?} lacks {phrase:?}",
        error.message
    );
    assert_eq!(error.line, line, "wrong line for {error}");
    assert!(error.column >= 1, "no column in {error}");
    assert_eq!(error.path, Path::new("test.toml"));
    error
}

/// A minimal valid file; tests append to it or replace parts of it.
/// Line numbers: 1 name, 3 [[device]], 4 name, 5 model, 7 [[job]],
/// 8 name, 9 kind, 10 device, 11 file_size.
pub const BASE: &str = r#"name = "t"

[[device]]
name = "disk"
model = "hdd"

[[job]]
name = "w"
kind = "writer"
device = "disk"
file_size = "1MiB"
"#;

/// `BASE` with `from` replaced by `to` (which must occur).
#[track_caller]
pub fn base_with(from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "BASE lacks {from:?}");
    BASE.replacen(from, to, 1)
}
