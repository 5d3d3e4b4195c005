//! `wb sim SCENARIO --compare KNOB=V1,V2,...`: the scenario once per value
//! of one knob (anything `--set` takes), side by side: per job, IOPS,
//! bandwidth and latency percentiles for each value, then one line per job
//! with the p99 of each value against the first's (`reader p99: 0.13 ms
//! with wbt_lat_usec=-1, 32 ms with wbt_lat_usec=0 (246x)`).

use crate::bench::table::{self, Table};
use wb_scenario::Scenario;
use wb_sim::report::RunReport;

/// A knob and the values to run it at (at least two).
#[derive(Clone, Debug, PartialEq)]
pub struct Compare {
    pub knob: String,
    pub values: Vec<String>,
}

impl Compare {
    /// Parses `KNOB=V1,V2,...`; every value is checked against
    /// `scenario` (as `--set` would apply it) before anything runs.
    pub fn parse(spec: &str, scenario: &Scenario) -> Result<Compare, String> {
        let (knob, values) = spec
            .split_once('=')
            .ok_or_else(|| format!("--compare {spec:?}: expected KNOB=V1,V2,..."))?;
        let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
        if knob.trim().is_empty() || values.len() < 2 || values.iter().any(String::is_empty) {
            return Err(format!(
                "--compare {spec:?}: expected a knob and at least two values, KNOB=V1,V2,..."
            ));
        }
        let compare = Compare {
            knob: knob.trim().to_string(),
            values,
        };
        for v in &compare.values {
            compare.scenario(scenario, v)?;
        }
        Ok(compare)
    }

    /// `scenario` with the knob set to `value`.
    pub fn scenario(&self, scenario: &Scenario, value: &str) -> Result<Scenario, String> {
        let mut s = scenario.clone();
        wb_scenario::apply_set(&mut s, &format!("{}={value}", self.knob))
            .map_err(|e| format!("--compare: {e}"))?;
        Ok(s)
    }

    /// The side-by-side report of `runs` (one per value, in order).
    pub fn render(&self, runs: &[RunReport]) -> String {
        let mut out = format!(
            "{} with {} = {}\n",
            runs[0].scenario,
            self.knob,
            self.values.join(" | ")
        );
        for (j, job) in runs[0].jobs.iter().enumerate() {
            let mut t = Table::new(&[
                &job.name,
                "IOPS",
                "MiB/s",
                "p50 ms",
                "p99 ms",
                "p99.9 ms",
                "max ms",
                "p99 vs first",
            ]);
            let first_p99 = job.lat_us.p99;
            for (value, run) in self.values.iter().zip(runs) {
                let r = &run.jobs[j];
                t.row(vec![
                    format!("{}={value}", self.knob),
                    table::rate(r.iops),
                    table::rate(r.bw_mib_s),
                    table::ms(r.lat_us.p50),
                    table::ms(r.lat_us.p99),
                    table::ms(r.lat_us.p99_9),
                    table::ms(r.lat_us.max),
                    table::ratio(Some(r.lat_us.p99), Some(first_p99)),
                ]);
            }
            out.push('\n');
            out.push_str(&t.render());
        }
        out.push('\n');
        for line in self.summary(runs) {
            out.push_str(&line);
            out.push('\n');
        }
        out
    }

    /// One line per job: its p99 at each value, and each against the first.
    pub fn summary(&self, runs: &[RunReport]) -> Vec<String> {
        runs[0]
            .jobs
            .iter()
            .enumerate()
            .map(|(j, job)| {
                let first = job.lat_us.p99;
                let parts: Vec<String> = self
                    .values
                    .iter()
                    .zip(runs)
                    .enumerate()
                    .map(|(i, (value, run))| {
                        let p99 = run.jobs[j].lat_us.p99;
                        let vs = if i == 0 {
                            String::new()
                        } else {
                            format!(" ({})", table::ratio(Some(p99), Some(first)))
                        };
                        format!("{} ms with {}={value}{vs}", table::ms(p99), self.knob)
                    })
                    .collect();
                format!("{} p99: {}", job.name, parts.join(", "))
            })
            .collect()
    }
}
