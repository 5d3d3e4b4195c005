//! Parsing of a device model's parameter overrides. Each model asks for its
//! parameters one by one (with default and allowed range); the parser records
//! which keys exist so that `finish` can reject unknown keys with the list of
//! known ones. Errors name the model, the key, the value and the allowed range.

use std::collections::BTreeMap;
use wb_engine::units::{format_bytes, parse_bytes, parse_duration_ns};

/// Overrides for one model, consumed key by key.
pub struct Params<'a> {
    model: &'static str,
    map: &'a BTreeMap<String, String>,
    known: Vec<&'static str>,
}

impl<'a> Params<'a> {
    pub fn new(model: &'static str, map: &'a BTreeMap<String, String>) -> Params<'a> {
        Params {
            model,
            map,
            known: Vec::new(),
        }
    }

    /// The override for `key`, if any; records `key` as known.
    fn raw(&mut self, key: &'static str) -> Option<&'a str> {
        self.known.push(key);
        self.map.get(key).map(|text| text.trim())
    }

    fn invalid(&self, key: &str, text: &str, why: &str, range: &str) -> String {
        format!(
            "{}: parameter '{key}' = '{text}' {why} (allowed: {range})",
            self.model
        )
    }

    /// A size in bytes; a plain number is bytes, units as in `parse_bytes`.
    pub fn bytes(
        &mut self,
        key: &'static str,
        default: u64,
        min: u64,
        max: u64,
    ) -> Result<u64, String> {
        let range = format!("{} to {}", format_bytes(min), format_bytes(max));
        let Some(text) = self.raw(key) else {
            return Ok(default);
        };
        let value = parse_bytes(text)
            .map_err(|e| self.invalid(key, text, &format!("is not a size: {e}"), &range))?;
        if !(min..=max).contains(&value) {
            return Err(self.invalid(key, text, "is out of range", &range));
        }
        Ok(value)
    }

    /// A size whose key names the unit `unit_bytes` (e.g. `_kib`): a plain
    /// number is in that unit, a number with a unit is parsed as a size.
    pub fn bytes_in(
        &mut self,
        key: &'static str,
        unit_bytes: u64,
        default: u64,
        max: u64,
    ) -> Result<u64, String> {
        let range = format!("0 to {} ({})", max / unit_bytes, format_bytes(max));
        let Some(text) = self.raw(key) else {
            return Ok(default);
        };
        let value = match text.parse::<f64>() {
            Ok(units) if units.is_finite() && units >= 0.0 => {
                (units * unit_bytes as f64).round() as u64
            }
            Ok(_) => return Err(self.invalid(key, text, "is out of range", &range)),
            Err(_) => parse_bytes(text)
                .map_err(|e| self.invalid(key, text, &format!("is not a size: {e}"), &range))?,
        };
        if value > max {
            return Err(self.invalid(key, text, "is out of range", &range));
        }
        Ok(value)
    }

    /// A duration in ns whose key names the unit `unit_ns` (e.g. `_ms`): a
    /// plain number is in that unit, a number with a unit is parsed as such.
    pub fn duration_ns(
        &mut self,
        key: &'static str,
        unit_ns: u64,
        default_ns: u64,
        min_ns: u64,
        max_ns: u64,
    ) -> Result<u64, String> {
        let in_unit = |ns: u64| ns as f64 / unit_ns as f64;
        let unit = unit_name(unit_ns);
        let range = format!("{}{unit} to {}{unit}", in_unit(min_ns), in_unit(max_ns));
        let Some(text) = self.raw(key) else {
            return Ok(default_ns);
        };
        let value = match text.parse::<f64>() {
            Ok(units) if units.is_finite() && units >= 0.0 => {
                (units * unit_ns as f64).round() as u64
            }
            Ok(_) => return Err(self.invalid(key, text, "is out of range", &range)),
            Err(_) => parse_duration_ns(text)
                .map_err(|e| self.invalid(key, text, &format!("is not a duration: {e}"), &range))?,
        };
        if !(min_ns..=max_ns).contains(&value) {
            return Err(self.invalid(key, text, "is out of range", &range));
        }
        Ok(value)
    }

    /// A plain real number (rates, probabilities, factors) in [min, max].
    pub fn number(
        &mut self,
        key: &'static str,
        default: f64,
        min: f64,
        max: f64,
    ) -> Result<f64, String> {
        self.plain(key, default, min..=max, "a number")
    }

    /// A plain whole number (counts) in [min, max].
    pub fn count(
        &mut self,
        key: &'static str,
        default: u64,
        min: u64,
        max: u64,
    ) -> Result<u64, String> {
        self.plain(key, default, min..=max, "a whole number")
    }

    /// A value written as a plain `T` in `range`; `what` names `T` in errors.
    fn plain<T>(
        &mut self,
        key: &'static str,
        default: T,
        range: std::ops::RangeInclusive<T>,
        what: &str,
    ) -> Result<T, String>
    where
        T: std::str::FromStr + PartialOrd + std::fmt::Display,
    {
        let shown = format!("{} to {}", range.start(), range.end());
        let Some(text) = self.raw(key) else {
            return Ok(default);
        };
        let value: T = text
            .parse()
            .map_err(|_| self.invalid(key, text, &format!("is not {what}"), &shown))?;
        // `!contains` also rejects NaN.
        if !range.contains(&value) {
            return Err(self.invalid(key, text, "is out of range", &shown));
        }
        Ok(value)
    }

    /// Rejects keys no model parameter asked for; call after reading all.
    pub fn finish(self) -> Result<(), String> {
        let unknown = self
            .map
            .keys()
            .find(|key| !self.known.contains(&key.as_str()));
        match unknown {
            Some(key) => Err(format!(
                "{}: unknown parameter '{key}' (known: {})",
                self.model,
                self.known.join(", ")
            )),
            None => Ok(()),
        }
    }
}

fn unit_name(unit_ns: u64) -> &'static str {
    match unit_ns {
        1 => "ns",
        1_000 => "us",
        1_000_000 => "ms",
        1_000_000_000 => "s",
        _ => " units",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn plain_numbers_take_the_key_unit_and_units_are_accepted() {
        let m = map(&[
            ("a_ms", "0.5"),
            ("b_ms", "250us"),
            ("c_kib", "4"),
            ("d_kib", "1MiB"),
        ]);
        let mut p = Params::new("x", &m);
        assert_eq!(
            p.duration_ns("a_ms", 1_000_000, 0, 0, u64::MAX),
            Ok(500_000)
        );
        assert_eq!(
            p.duration_ns("b_ms", 1_000_000, 0, 0, u64::MAX),
            Ok(250_000)
        );
        assert_eq!(p.bytes_in("c_kib", 1024, 0, 1 << 30), Ok(4096));
        assert_eq!(p.bytes_in("d_kib", 1024, 0, 1 << 30), Ok(1 << 20));
        assert!(p.finish().is_ok());
    }

    #[test]
    fn errors_name_key_value_and_range() {
        let m = map(&[("rate", "fast")]);
        let mut p = Params::new("x", &m);
        let err = p.number("rate", 1.0, 0.5, 2.0).unwrap_err();
        assert!(
            err.contains("'rate'") && err.contains("'fast'") && err.contains("0.5 to 2"),
            "{err}"
        );
        let m = map(&[("rate", "NaN")]);
        assert!(Params::new("x", &m).number("rate", 1.0, 0.5, 2.0).is_err());
        let m = map(&[("typo", "1")]);
        let mut p = Params::new("x", &m);
        assert_eq!(p.count("n", 3, 1, 9), Ok(3));
        let err = p.finish().unwrap_err();
        assert!(
            err.contains("unknown parameter 'typo'") && err.contains("known: n"),
            "{err}"
        );
    }
}
