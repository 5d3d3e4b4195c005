//! Parsing a knob's value from text, and the error when it is rejected.

use crate::units::{parse_bytes, UnitError};
use std::fmt;

/// A knob value that was rejected; nothing was changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KnobError {
    /// No knob by that name.
    Unknown {
        knob: String,
        known: &'static [&'static str],
    },
    /// The value does not parse or is out of range.
    Invalid {
        knob: String,
        value: String,
        reason: String,
    },
}

impl fmt::Display for KnobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KnobError::Unknown { knob, known } => {
                write!(f, "unknown knob '{knob}' (known: {})", known.join(", "))
            }
            KnobError::Invalid {
                knob,
                value,
                reason,
            } => {
                write!(f, "invalid value '{value}' for {knob}: {reason}")
            }
        }
    }
}

impl std::error::Error for KnobError {}

pub(super) fn invalid(knob: &str, value: &str, reason: impl Into<String>) -> KnobError {
    KnobError::Invalid {
        knob: knob.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

pub(super) fn parse_int<T>(knob: &str, value: &str, min: T, max: T) -> Result<T, KnobError>
where
    T: std::str::FromStr + PartialOrd + fmt::Display + Copy,
{
    let parsed: T = value
        .trim()
        .parse()
        .map_err(|_| invalid(knob, value, "not an integer"))?;
    if parsed < min || parsed > max {
        return Err(invalid(
            knob,
            value,
            format!("must be between {min} and {max}"),
        ));
    }
    Ok(parsed)
}

pub(super) fn parse_size(knob: &str, value: &str, min: u64, max: u64) -> Result<u64, KnobError> {
    let bytes = parse_bytes(value).map_err(|UnitError(e)| invalid(knob, value, e))?;
    if bytes != 0 && (bytes < min || bytes > max) {
        return Err(invalid(
            knob,
            value,
            format!("must be 0 or between {min} and {max} bytes"),
        ));
    }
    Ok(bytes)
}

pub(super) fn parse_bool(knob: &str, value: &str) -> Result<bool, KnobError> {
    match value.trim() {
        "1" | "true" | "on" | "yes" => Ok(true),
        "0" | "false" | "off" | "no" => Ok(false),
        _ => Err(invalid(knob, value, "expected 0/1, true/false or on/off")),
    }
}

/// One of `modes`, by its name.
pub(super) fn parse_mode<T: Copy>(
    knob: &str,
    value: &str,
    modes: &[T],
    name: fn(T) -> &'static str,
) -> Result<T, KnobError> {
    if let Some(&mode) = modes.iter().find(|&&m| name(m) == value.trim()) {
        return Ok(mode);
    }
    let names: Vec<String> = modes.iter().map(|&m| format!("'{}'", name(m))).collect();
    let expected = match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    };
    Err(invalid(knob, value, format!("expected {expected}")))
}
