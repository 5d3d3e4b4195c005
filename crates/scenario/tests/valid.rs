//! What valid files turn into: values, defaults, and alternative TOML spellings.

mod common;

use common::{base_with, parse_text, BASE};
use wb_engine::{Config, DeviceConfig, DirtyThrottle};
use wb_scenario::{example, JobKind};

#[test]
fn example_parses() {
    let s = parse_text(example()).expect("example parses");
    assert_eq!(s.name, "example");
    assert_eq!(s.seed, 1);
    assert_eq!(s.duration_ns, 60_000_000_000);
    assert_eq!(s.cache.memory_bytes, 256 << 20);
    assert_eq!(s.devices.len(), 2);
    assert_eq!(s.devices[1].config.wbt_lat_usec, 2000);
    let kinds: Vec<&str> = s.jobs.iter().map(|j| j.kind.name()).collect();
    assert_eq!(kinds, ["writer", "fsync-loop", "reader"]);
    assert_eq!(s.jobs[2].device, 1);
    assert!(s.jobs[2].background);
}

#[test]
fn defaults() {
    let s = parse_text(BASE).expect("BASE parses");
    assert_eq!(s.description, "");
    assert_eq!(s.seed, 1);
    assert_eq!(s.duration_ns, 3600 * 1_000_000_000);
    assert_eq!(s.cache, Config::default());
    assert_eq!(s.devices[0].config, DeviceConfig::default());
    assert!(s.devices[0].params.is_empty());
    let job = &s.jobs[0];
    assert_eq!(
        (
            job.domain.as_str(),
            job.start_ns,
            job.runtime_ns,
            job.background
        ),
        ("root", 0, None, false)
    );
    let expected = JobKind::Writer {
        files: 1,
        file_size: 1 << 20,
        block_size: 1 << 20,
        random: false,
        sync: false,
        fsync_each: false,
    };
    assert_eq!(job.kind, expected);
}

#[test]
fn every_key() {
    let text = r#"
name = "all"
description = "every key"
seed = 0
duration = "2min"

[cache]
memory = "4GiB"
dirty_ratio = 30
dirty_bytes = 0
dirty_throttle = "global-2007"

[[device]]
name = "disk"
model = "hdd"
wbt_lat_usec = -1
strict_limit = true
stable_writes = "wait"
min_ratio = 10
[device.params]
readahead_kib = 1024

[[device]]
name = "ssd"
model = "nvme"
params.readahead_kib = "64"

[[job]]
name = "w"
kind = "writer"
device = "disk"
domain = "batch"
start = "1s"
runtime = "10s"
files = 3
file_size = 4096
block_size = "64KiB"
sync = true
fsync_each = true

[[job]]
name = "r"
kind = "reader"
device = "ssd"
file_size = "1GiB"
pattern = "random"
rate_iops = 100
background = true

[[job]]
name = "o"
kind = "occasional-writer"
device = "disk"
interval = "5s"
count = 3

[[job]]
name = "f"
kind = "fsync-loop"
device = "ssd"
block_size = "8KiB"
count = 10
"#;
    let s = parse_text(text).expect("parses");
    assert_eq!((s.seed, s.duration_ns), (0, 120_000_000_000));
    assert_eq!(s.cache.dirty_throttle, DirtyThrottle::Global2007);
    assert!(s.devices[0].config.strict_limit);
    assert_eq!(
        s.devices[0].params.get("readahead_kib").map(String::as_str),
        Some("1024")
    );
    assert_eq!(
        s.devices[1].params.get("readahead_kib").map(String::as_str),
        Some("64")
    );
    let w = &s.jobs[0];
    assert_eq!(
        (w.domain.as_str(), w.start_ns, w.runtime_ns),
        ("batch", 1_000_000_000, Some(10_000_000_000))
    );
    assert_eq!(
        w.kind,
        JobKind::Writer {
            files: 3,
            file_size: 4096,
            block_size: 65536,
            random: false,
            sync: true,
            fsync_each: true
        }
    );
    assert_eq!(
        s.jobs[1].kind,
        JobKind::Reader {
            file_size: 1 << 30,
            block_size: 4096,
            random: true,
            rate_iops: Some(100)
        }
    );
    assert_eq!(
        s.jobs[2].kind,
        JobKind::OccasionalWriter {
            block_size: 4096,
            interval_ns: 5_000_000_000,
            count: 3
        }
    );
    assert_eq!(
        s.jobs[3].kind,
        JobKind::FsyncLoop {
            block_size: 8192,
            interval_ns: 0,
            count: 10
        }
    );
    assert_eq!(s.jobs[3].kind.name(), "fsync-loop");
}

#[test]
fn inline_table_arrays_work_too() {
    let text = r#"name = "inline"
device = [{ name = "disk", model = "hdd" }]
job = [
  { name = "w", kind = "writer", device = "disk", file_size = "1MiB" },
  { name = "w2", kind = "writer", device = "disk", file_size = "1MiB", files = 0 },
]
"#;
    let e = parse_text(text).expect_err("files = 0");
    assert_eq!(e.line, 5);
    assert!(
        e.message
            .contains("job 'w2': files: must be between 1 and 100000"),
        "{}",
        e.message
    );
    assert!(parse_text(&text.replace("files = 0", "files = 2")).is_ok());
}

#[test]
fn a_foreground_reader_with_runtime_is_fine() {
    let text = base_with("kind = \"writer\"", "kind = \"reader\"\nruntime = \"30s\"");
    let s = parse_text(&text).expect("parses");
    assert_eq!(s.jobs[0].runtime_ns, Some(30_000_000_000));
}
