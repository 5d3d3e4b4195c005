//! Scenario files (TOML) shared by `wb sim` and `wb run`.
//!
//! A scenario names a cache configuration, devices and jobs; [`parse`]
//! validates all of it and reports the first problem at its line and
//! column, and [`apply_set`] applies `--set` knob overrides afterwards.
//! See [`example`] for the format.

mod device;
mod error;
mod fields;
mod job;
mod model;
mod overrides;
mod parse;
mod section;

pub use error::{ScenarioError, SetError};
pub use model::{DeviceSpec, JobKind, JobSpec, Scenario, WriteMode};
pub use overrides::apply_set;
pub use parse::{load, parse};
pub use section::ModelValidator;

/// A small valid scenario: two devices, a writer flooding the slow one,
/// an fsync loop and a rate-limited background reader.
pub fn example() -> &'static str {
    r#"name = "example"
description = "A bulk writer floods a disk while an fsync loop waits on it"
seed = 1
duration = "60s"

[cache]
memory = "256MiB"
dirty_ratio = 20
dirty_background_ratio = 10

[[device]]
name = "disk"
model = "hdd"
queue_depth = 32

[[device]]
name = "ssd"
model = "nvme"
wbt_lat_usec = 2000

[[job]]
name = "bulk"
kind = "writer"
device = "disk"
files = 4
file_size = "64MiB"

[[job]]
name = "committer"
kind = "fsync-loop"
device = "disk"
interval = "100ms"
count = 50

[[job]]
name = "scanner"
kind = "reader"
device = "ssd"
file_size = "32MiB"
pattern = "random"
rate_iops = 200
background = true
"#
}
