//! Unlink latency of a large file: the kernel's unlink against
//! `Cache::unlink`, whose release of the file's blocks is deferred work on
//! the cache's backlog (issue 10). Each round writes a 1 GiB file twice,
//! once with std (then fsync) and once through a cache (then sync_data),
//! and times removing each; the cache's `sync` after its unlink waits for
//! the release to finish, the work the kernel's unlink did inline.
//!
//! ```sh
//! cargo run --release -p writeback --example unlink -- DIR [ROUNDS]
//! ```
//! DIR must be on a filesystem with O_DIRECT and 2 GiB free.

use std::io::Write;
use std::time::Instant;
use writeback::{Cache, OpenOptions};

const FILE_BYTES: usize = 1 << 30;
const CHUNK: usize = 1 << 20;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().ok_or("usage: unlink DIR [ROUNDS]")?);
    let rounds: usize = match args.next() {
        Some(n) => n
            .parse()
            .map_err(|_| format!("'{n}' is not a number of rounds"))?,
        None => 3,
    };
    std::fs::create_dir_all(&dir)?;
    let chunk = vec![0x5a_u8; CHUNK];
    let cache = Cache::builder()
        .knob("memory", "256MiB")?
        .calibrate(false)
        .build()?;
    for round in 1..=rounds {
        let path = dir.join(format!("wb-unlink-kernel-{round}"));
        let mut file = std::fs::File::create(&path)?;
        for _ in 0..FILE_BYTES / CHUNK {
            file.write_all(&chunk)?;
        }
        file.sync_all()?;
        drop(file);
        let start = Instant::now();
        std::fs::remove_file(&path)?;
        let kernel = start.elapsed();

        let path = dir.join(format!("wb-unlink-cache-{round}"));
        let file = cache.open(&path, OpenOptions { create: true })?;
        for i in 0..FILE_BYTES / CHUNK {
            file.write_at(&chunk, (i * CHUNK) as u64)?;
        }
        file.sync_data()?;
        drop(file);
        let start = Instant::now();
        cache.unlink(&path)?;
        let unlink = start.elapsed();
        let start = Instant::now();
        cache.sync()?;
        let release = start.elapsed();
        println!(
            "round {round}: kernel unlink {:.3} ms; Cache::unlink {:.3} ms, its release behind it {:.1} ms",
            kernel.as_secs_f64() * 1e3,
            unlink.as_secs_f64() * 1e3,
            release.as_secs_f64() * 1e3
        );
    }
    Ok(())
}
