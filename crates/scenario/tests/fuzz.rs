//! Mangled files must give Ok or a located Err, never a panic.

mod common;

use proptest::prelude::*;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;
use wb_scenario::{apply_set, example, ScenarioError};

/// A valid file touching every construct, so mangling reaches every path.
const RICH: &str = r#"name = "rich"
description = "fuzz seed"
seed = 7
duration = "90s"

[cache]
memory = "64MiB"
dirty_ratio = 20
dirty_throttle = "io-less"

[[device]]
name = "disk"
model = "hdd"
min_ratio = 40
strict_limit = true
[device.params]
readahead_kib = 128

[[device]]
name = "ssd"
model = "nvme"
params = { readahead_kib = "8" }

[[job]]
name = "w"
kind = "writer"
device = "disk"
files = 2
file_size = "8MiB"
block_size = 65536
fsync_each = true

[[job]]
name = "r"
kind = "reader"
device = "ssd"
file_size = "1GiB"
pattern = "random"
runtime = "5s"

[[job]]
name = "o"
kind = "occasional-writer"
device = "disk"
interval = "1s"
count = 3

[[job]]
name = "f"
kind = "fsync-loop"
device = "ssd"
count = 4
background = true
"#;

/// Parses without panicking; an error must lie within the text.
fn check(text: &str) {
    match common::parse_text(text) {
        Ok(mut scenario) => {
            // Overrides on whatever parsed must not panic either.
            for spec in [
                "min_ratio=100",
                "disk.max_ratio=1",
                "memory=1",
                "x.y.z=",
                "=",
                "",
            ] {
                let _ = apply_set(&mut scenario, spec).map_err(|e| e.to_string());
            }
        }
        Err(e) => check_located(text, &e),
    }
}

fn check_located(text: &str, e: &ScenarioError) {
    let lines = text.split('\n').count();
    assert!(
        e.line >= 1 && e.line <= lines,
        "line {} of {lines}: {e}",
        e.line
    );
    assert!(e.column >= 1, "{e}");
    assert!(!e.message.is_empty());
    let _ = e.to_string();
}

/// Deterministic random numbers, so failures reproduce.
struct Rng(SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[test]
fn the_rich_file_is_valid() {
    common::parse_text(RICH).expect("RICH parses");
}

#[test]
fn every_truncation() {
    for text in [RICH, example()] {
        for end in (0..=text.len()).filter(|&i| text.is_char_boundary(i)) {
            check(&text[..end]);
        }
    }
}

#[test]
fn random_byte_flips() {
    let mut rng = Rng(SplitMix64::seed_from_u64(0x9e37_79b9_7f4a_7c15));
    // Bytes that matter to TOML and to our value parsers.
    let interesting = b"=[]{}\"'.,#\n -0123456789eE+_:xs\xff";
    for _ in 0..20_000 {
        let mut bytes = RICH.as_bytes().to_vec();
        for _ in 0..=rng.below(4) {
            let at = rng.below(bytes.len());
            bytes[at] = match rng.below(3) {
                0 => interesting[rng.below(interesting.len())],
                1 => rng.next() as u8,
                _ => bytes[at].wrapping_add(1),
            };
        }
        check(&String::from_utf8_lossy(&bytes));
    }
}

#[test]
fn line_deletions_and_duplications() {
    let lines: Vec<&str> = RICH.lines().collect();
    for i in 0..lines.len() {
        let mut without = lines.clone();
        without.remove(i);
        check(&without.join("\n"));
        let mut doubled = lines.clone();
        doubled.insert(i, lines[i]);
        check(&doubled.join("\n"));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn splices_never_panic(at in 0usize..2000, len in 0usize..40, insert in "[ -~\n]{0,12}") {
        let mut text = RICH.to_string();
        let start = at.min(text.len());
        let end = (start + len).min(text.len());
        if text.is_char_boundary(start) && text.is_char_boundary(end) {
            text.replace_range(start..end, &insert);
        }
        check(&text);
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        check(&text);
    }
}
