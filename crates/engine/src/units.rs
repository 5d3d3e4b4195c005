//! Parsing of human-written quantities: sizes ("4KiB", "100MB") and
//! durations ("200ms", "3s"). Used by knobs, scenario files and CLIs alike.
//! Also the engine's shares of quantities (`mul_div`).

use std::fmt;

/// Why a quantity could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitError(pub String);

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UnitError {}

fn split_number(text: &str) -> Result<(f64, &str), UnitError> {
    let text = text.trim();
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(end);
    if num.is_empty() {
        return Err(UnitError(format!("'{text}' does not start with a number")));
    }
    let value: f64 = num
        .parse()
        .map_err(|_| UnitError(format!("'{num}' is not a number")))?;
    Ok((value, unit.trim()))
}

/// Parses a size in bytes: a plain integer, or a number with a unit
/// (B, K/KiB, M/MiB, G/GiB, T/TiB are powers of 1024; KB, MB, GB, TB powers of 1000).
pub fn parse_bytes(text: &str) -> Result<u64, UnitError> {
    let (value, unit) = split_number(text)?;
    let multiplier: f64 = match unit {
        "" | "B" | "b" => 1.0,
        "K" | "k" | "KiB" | "kib" | "Ki" => 1024.0,
        "M" | "m" | "MiB" | "mib" | "Mi" => 1024.0 * 1024.0,
        "G" | "g" | "GiB" | "gib" | "Gi" => 1024.0 * 1024.0 * 1024.0,
        "T" | "t" | "TiB" | "tib" | "Ti" => 1024.0f64.powi(4),
        "KB" | "kB" | "kb" => 1e3,
        "MB" | "mb" => 1e6,
        "GB" | "gb" => 1e9,
        "TB" | "tb" => 1e12,
        other => {
            return Err(UnitError(format!(
            "unknown size unit '{other}' in '{text}' (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)"
        )))
        }
    };
    let bytes = value * multiplier;
    if !bytes.is_finite() || bytes > u64::MAX as f64 / 2.0 {
        return Err(UnitError(format!("size '{text}' is too large")));
    }
    Ok(bytes.round() as u64)
}

/// Parses a duration into nanoseconds: a number with a unit (ns, us, ms, s, m, h).
/// A plain number without a unit is rejected, since its meaning would be a guess.
pub fn parse_duration_ns(text: &str) -> Result<u64, UnitError> {
    let (value, unit) = split_number(text)?;
    let multiplier: f64 = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" | "sec" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        "" => {
            return Err(UnitError(format!(
                "duration '{text}' needs a unit (ns, us, ms, s, min, h)"
            )))
        }
        other => {
            return Err(UnitError(format!(
                "unknown duration unit '{other}' in '{text}' (use ns, us, ms, s, min, h)"
            )))
        }
    };
    let ns = value * multiplier;
    if !ns.is_finite() || ns > u64::MAX as f64 / 2.0 {
        return Err(UnitError(format!("duration '{text}' is too long")));
    }
    Ok(ns.round() as u64)
}

/// Pages as MiB (for reports and plots).
pub fn pages_mib(pages: u64) -> f64 {
    (pages * crate::ids::PAGE_SIZE) as f64 / (1024.0 * 1024.0)
}

/// Formats bytes with a binary unit, for people.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes}B")
    } else {
        format!("{value:.1}{}", UNITS[unit])
    }
}

/// `a * b / c` without overflow (u128 inside), rounded down.
pub(crate) fn mul_div(a: u64, b: u64, c: u64) -> u64 {
    debug_assert!(c > 0);
    u64::try_from(a as u128 * b as u128 / c as u128).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("4KiB"), Ok(4096));
        assert_eq!(parse_bytes("1.5 MiB"), Ok(1_572_864));
        assert_eq!(parse_bytes("100MB"), Ok(100_000_000));
        assert!(parse_bytes("MiB").is_err());
        assert!(parse_bytes("4 parsecs").is_err());
        assert!(parse_bytes("-4").is_err());
    }

    #[test]
    fn sizes_format_for_people_and_parse_back() {
        assert_eq!(format_bytes(0), "0B");
        assert_eq!(format_bytes(1023), "1023B");
        assert_eq!(format_bytes(128 << 10), "128.0KiB");
        assert_eq!(format_bytes(1 << 20), "1.0MiB");
        assert_eq!(format_bytes(3 << 29), "1.5GiB");
        assert_eq!(format_bytes(5 << 40), "5.0TiB");
        assert_eq!(format_bytes(5000 << 40), "5000.0TiB");
        // What `wb` prints, a person can type back in (to a tenth of the unit).
        for bytes in [4096, 100_000_000, (3 << 29) + 12_345] {
            let back = parse_bytes(&format_bytes(bytes)).expect("parses back");
            assert!(back.abs_diff(bytes) * 20 <= bytes, "{bytes} -> {back}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("200ms"), Ok(200_000_000));
        assert_eq!(parse_duration_ns("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_duration_ns("75us"), Ok(75_000));
        assert!(parse_duration_ns("10").is_err());
        assert!(parse_duration_ns("10 fortnights").is_err());
    }
}
