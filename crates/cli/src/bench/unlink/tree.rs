//! The tree to remove: written, and made durable on the kernel's side.

use super::{UnlinkArgs, DIR_FILES};
use crate::bench::{progress, BenchError, SplitMix64};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use std::io::Write;
use std::os::fd::AsFd;
use std::path::Path;

/// Chunk of a large file's writes.
const CHUNK_BYTES: usize = 4 << 20;

/// Writes the tree under `root`: directories `d-NNN` of [`DIR_FILES`]
/// small files `fNNNNN` each, the large files `big-NN` spread among them
/// (so a walker meets them among the small ones, as in a real tree).
pub fn build_tree(root: &Path, args: &UnlinkArgs) -> Result<(), BenchError> {
    let mkdir =
        |p: &Path| std::fs::create_dir_all(p).map_err(|e| BenchError::failed(p.display(), e));
    let dirs = args.files.div_ceil(DIR_FILES).max(1);
    let sub = |d: u64| root.join(format!("d-{d:03}"));
    for d in 0..dirs {
        mkdir(&sub(d))?;
    }
    let mut rng = SplitMix64::seed_from_u64(0x5eed);
    let mut small = vec![0u8; args.file_size as usize];
    rng.fill_bytes(&mut small);
    for i in 0..args.files {
        let path = sub(i / DIR_FILES).join(format!("f{:05}", i % DIR_FILES));
        std::fs::write(&path, &small).map_err(|e| BenchError::failed(path.display(), e))?;
        if (i + 1) % 20_000 == 0 {
            progress!("  {} small files written", i + 1);
        }
    }
    let mut chunk = vec![0u8; CHUNK_BYTES];
    rng.fill_bytes(&mut chunk);
    for i in 0..args.big_files {
        let path = sub(i * dirs / args.big_files).join(format!("big-{i:02}"));
        let mut f =
            std::fs::File::create(&path).map_err(|e| BenchError::failed(path.display(), e))?;
        let mut left = args.big_file_size;
        while left > 0 {
            let n = left.min(CHUNK_BYTES as u64) as usize;
            f.write_all(&chunk[..n])
                .map_err(|e| BenchError::failed(path.display(), e))?;
            left -= n as u64;
        }
        progress!("  large file {}/{} written", i + 1, args.big_files);
    }
    Ok(())
}

/// syncfs(2) on the filesystem of `dir`: the kernel's frees done (XFS
/// flushes its inodegc queue there).
pub fn syncfs(dir: &Path) -> Result<(), BenchError> {
    let f = std::fs::File::open(dir).map_err(|e| BenchError::failed(dir.display(), e))?;
    nix::unistd::syncfs(f.as_fd())
        .map_err(|e| BenchError::failed(format!("syncfs {}", dir.display()), e))
}
