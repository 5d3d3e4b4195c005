//! Copies a file through the cache, printing the engine's statistics:
//!
//!     cargo run --release -p writeback --example copy -- SOURCE DEST
//!
//! The source is read and the destination written through one `Cache`;
//! writeback of the destination is throttled by the engine so that the
//! copy does not flood the device, and `sync_data` makes it durable.

use std::process::ExitCode;
use writeback::{Cache, OpenOptions};

const CHUNK: usize = 1 << 20;

fn copy(source: &str, dest: &str) -> Result<(), writeback::Error> {
    let cache = Cache::builder().knob("memory", "256MiB")?.build()?;
    let src = cache.open(source, OpenOptions::default())?;
    let dst = cache.open(dest, OpenOptions { create: true })?;
    dst.set_len(0)?;
    let mut buf = vec![0u8; CHUNK];
    let mut offset = 0u64;
    loop {
        let n = src.read_at(&mut buf, offset)?;
        if n == 0 {
            break;
        }
        dst.write_at(&buf[..n], offset)?;
        offset += n as u64;
    }
    dst.sync_data()?;
    let stats = cache.stats();
    println!(
        "copied {offset} bytes with the {} backend; dirty peak {} pages, throttle pauses {}",
        cache.io_backend(),
        stats.dirty_peak_pages,
        stats.stall(writeback::StallReason::DirtyThrottle).count
    );
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: copy SOURCE DEST");
        return ExitCode::from(2);
    }
    match copy(&args[1], &args[2]) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("copy: {e}");
            ExitCode::FAILURE
        }
    }
}
