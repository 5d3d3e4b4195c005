//! Times 4 KiB cached reads through the cache on one thread (a profiling aid):
//!
//!     cargo run --release -p writeback --example cached_reads -- DIR

use std::time::Instant;
use writeback::{Cache, OpenOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "wb-data/bench".to_string());
    std::fs::create_dir_all(&dir)?;
    let cache = Cache::builder()
        .knob("memory", "256MiB")?
        .calibrate(false)
        .build()?;
    let path = std::path::Path::new(&dir).join("cached-reads");
    let f = cache.open(&path, OpenOptions { create: true })?;
    let size = 64u64 << 20;
    f.write_at(&vec![7u8; size as usize], 0)?;
    if let Ok(s) = std::fs::read_to_string("/proc/self/smaps_rollup") {
        for l in s.lines().filter(|l| l.starts_with("AnonHugePages")) {
            eprintln!("{l}");
        }
    }
    let mut buf = vec![0u8; 4096];
    let ops = 2_000_000u64;
    let mut x = 12345u64;
    let t = Instant::now();
    for _ in 0..ops {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        f.read_at(&mut buf, (x % (size / 4096)) * 4096)?;
    }
    let per_op = t.elapsed().as_nanos() as f64 / ops as f64;
    println!(
        "{per_op:.0} ns per 4 KiB cached read ({:.0} ops/s)",
        1e9 / per_op
    );
    drop(f);
    drop(cache);
    std::fs::remove_file(&path)?;
    Ok(())
}
