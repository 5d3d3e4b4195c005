//! `--sweep KNOB=V1,V2,...` of `wb bench interference`: the engine
//! configuration (the mount's with `--fuse`) run once per value of one
//! engine knob, each value a row of its own (`engine[wbt_lat_usec=2000]`).
//!
//! Everything is checked before any run starts: the form, the list, the
//! knob's name, each value on its own ([`parse_sweep`], from clap), and
//! each value together with the `--engine-set` knobs ([`Sweep::check_with`]),
//! since some knobs are checked against others (min_ratio <= max_ratio).

use wb_engine::{Config as EngineConfig, DeviceConfig};

/// The values of one knob to run the engine with, in the order given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sweep {
    pub knob: String,
    pub values: Vec<String>,
}

/// One point of a sweep: the knob and one of its values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepPoint {
    pub knob: String,
    pub value: String,
}

impl SweepPoint {
    /// The row's name: `engine[wbt_lat_usec=2000]`.
    pub fn row_name(&self, config: &str) -> String {
        format!("{config}[{}={}]", self.knob, self.value)
    }
}

impl Sweep {
    /// The points, in the order given.
    pub fn points(&self) -> impl Iterator<Item = SweepPoint> + '_ {
        self.values.iter().map(|value| SweepPoint {
            knob: self.knob.clone(),
            value: value.clone(),
        })
    }

    /// Checks each value applied after the `--engine-set` knobs `sets`,
    /// as the engine will get them.
    pub fn check_with(&self, sets: &[(String, String)]) -> Result<(), String> {
        for value in &self.values {
            let mut config = EngineConfig::default();
            let mut device = DeviceConfig::default();
            let pairs = sets.iter().map(|(k, v)| (k.as_str(), v.as_str()));
            for (knob, v) in pairs.chain(std::iter::once((self.knob.as_str(), value.as_str()))) {
                if EngineConfig::KNOBS.contains(&knob) {
                    config.set(knob, v)
                } else {
                    device.set(knob, v)
                }
                .map_err(|e| {
                    format!(
                        "--sweep {}={value} with the --engine-set knobs: {e}",
                        self.knob
                    )
                })?;
            }
        }
        Ok(())
    }
}

/// Parses `KNOB=V1,V2,...` for clap: a known engine knob (cache-wide or
/// per device) and one or more values it accepts, none twice.
pub fn parse_sweep(text: &str) -> Result<Sweep, String> {
    let (knob, list) = text.split_once('=').ok_or_else(|| {
        format!("'{text}': expected KNOB=V1,V2,... (e.g. wbt_lat_usec=1000,4000)")
    })?;
    let knob = knob.trim();
    if knob.is_empty() {
        return Err(format!("'{text}': no knob before '='"));
    }
    if !EngineConfig::KNOBS.contains(&knob) && !DeviceConfig::KNOBS.contains(&knob) {
        return Err(format!(
            "unknown knob '{knob}'; cache knobs: {}; device knobs: {}",
            EngineConfig::KNOBS.join(", "),
            DeviceConfig::KNOBS.join(", ")
        ));
    }
    let values: Vec<String> = list.split(',').map(|v| v.trim().to_string()).collect();
    if list.trim().is_empty() {
        return Err(format!("'{text}': no values after '=' (e.g. {knob}=V1,V2)"));
    }
    let mut seen: Vec<&str> = Vec::new();
    for value in &values {
        if value.is_empty() {
            return Err(format!("'{text}': an empty value in the list"));
        }
        if seen.contains(&value.as_str()) {
            return Err(format!("'{text}': {value} is listed twice"));
        }
        seen.push(value);
        crate::bench::parse_engine_set(&format!("{knob}={value}"))?;
    }
    Ok(Sweep {
        knob: knob.to_string(),
        values,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_of_values_parses_in_order() {
        let s = parse_sweep("wbt_lat_usec=500,1000,2000,4000,8000,0").expect("valid");
        assert_eq!(s.knob, "wbt_lat_usec");
        assert_eq!(s.values, ["500", "1000", "2000", "4000", "8000", "0"]);
        let names: Vec<String> = s.points().map(|p| p.row_name("engine")).collect();
        assert_eq!(names[0], "engine[wbt_lat_usec=500]");
        assert_eq!(names[5], "engine[wbt_lat_usec=0]");
        // A cache-wide knob, a single value, spaces around the values.
        let s = parse_sweep("dirty_ratio= 10 , 40").expect("valid");
        assert_eq!(s.values, ["10", "40"]);
        assert_eq!(parse_sweep("queue_depth=8").map(|s| s.values.len()), Ok(1));
    }

    #[test]
    fn bad_sweeps_are_refused_with_the_reason() {
        let err = |text: &str| parse_sweep(text).expect_err(text);
        assert!(err("wbt_lat_usec").contains("expected KNOB=V1,V2"));
        assert!(err("=1,2").contains("no knob"));
        assert!(err("wbt_lat_usec=").contains("no values"));
        assert!(err("wbt_lat_usec= ").contains("no values"));
        assert!(err("wbt_lat_usec=1000,,2000").contains("empty value"));
        assert!(err("wbt_lat_usec=1000,1000").contains("listed twice"));
        let unknown = err("wbt_lat=1000");
        assert!(
            unknown.contains("unknown knob 'wbt_lat'") && unknown.contains("device knobs: "),
            "{unknown}"
        );
        // Values the engine rejects: out of range, not a number.
        assert!(err("wbt_lat_usec=1000,-5").contains("wbt_lat_usec"));
        assert!(err("queue_depth=8,lots").contains("queue_depth"));
        assert!(err("stable_writes=wait,sometimes").contains("stable_writes"));
    }

    #[test]
    fn values_are_checked_with_the_engine_sets() {
        let sweep = parse_sweep("min_ratio=10,60").expect("valid alone");
        assert_eq!(sweep.check_with(&[]), Ok(()));
        let sets = [("max_ratio".to_string(), "50".to_string())];
        let err = sweep.check_with(&sets).expect_err("60 > max_ratio 50");
        assert!(err.contains("min_ratio=60"), "{err}");
    }
}
