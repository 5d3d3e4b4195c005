//! `wb fsx`: a random-operation exerciser with an in-memory oracle, after
//! the classic fsx. One seed drives a run of reads, writes, truncations,
//! every fallocate mode, reads and stores through shared mappings, msync,
//! fsync and close/reopen over a few files in a directory (a `wb mount`,
//! or the backing filesystem itself as the control); a model of every
//! file's bytes says what each read must return and what length each file
//! must have. The first difference stops the run with the seed, the last
//! operations and the command that replays it.
//!
//! Modes the filesystem refuses (EOPNOTSUPP: FUSE passes on only
//! KEEP_SIZE, PUNCH_HOLE and ZERO_RANGE) are counted and left out of the
//! model; any other error is a failure. With `--direct` files are opened
//! O_DIRECT and every offset and length is a multiple of 4 KiB (what
//! O_DIRECT asks of most filesystems), from buffers aligned alike.

use crate::bench::{parse_size, SplitMix64};
use crate::{EXIT_BAD_INPUT, EXIT_FAILURE};
use clap::Args;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use std::collections::{BTreeMap, VecDeque};
use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// O_DIRECT's alignment, and the block size for collapse and insert.
const BLOCK: u64 = 4096;
/// Longest read or write.
const MAX_IO_BYTES: u64 = 64 << 10;
/// Most files and largest file size accepted (a limit on everything).
const MAX_FILES: usize = 64;
const MAX_FILE_BYTES: u64 = 256 << 20;
/// Every this many operations, each file is read whole and compared.
const FULL_CHECK_EVERY: u64 = 10_000;

#[derive(Args)]
#[command(after_help = "\
Operations, drawn from --seed: write, read, truncate, fallocate (punch, zero, zero keeping the
size, keep-size allocation, allocation extending, collapse, insert), read and store through a
shared mapping (stores msync'ed half the time, else left for the next read to find), fsync,
close and reopen. Each result is checked against an in-memory model of the files; every 10,000
operations, and at the end, every file is read whole and compared.

Examples:
  wb fsx /mnt/wb/fsx --ops 1000000 --seed 1            # through a mount
  wb fsx /srv/data/fsx --ops 1000000 --seed 1          # the control: the backing filesystem
  wb fsx /mnt/wb/fsx --direct                          # O_DIRECT opens, 4 KiB aligned

Exit status: 0 when every result matched, 1 at the first mismatch (the seed, the last
operations and the replay command are printed), 2 for bad arguments.")]
pub struct FsxArgs {
    /// Directory for the files (created if missing; the files are removed
    /// at the end of a run that passes).
    pub dir: PathBuf,
    /// Operations to run.
    #[arg(long, default_value = "100000")]
    pub ops: u64,
    /// Seed of the run (the same seed, the same operations).
    #[arg(long, default_value = "1")]
    pub seed: u64,
    /// Files exercised at once (1 to 64).
    #[arg(long, default_value = "4")]
    pub files: usize,
    /// Largest size a file reaches (at most 256 MiB).
    #[arg(long, default_value = "4MiB", value_parser = parse_size, value_name = "SIZE")]
    pub max_size: u64,
    /// Open the files O_DIRECT (offsets and lengths 4 KiB aligned).
    #[arg(long)]
    pub direct: bool,
    /// Operations kept for the failure report.
    #[arg(long, default_value = "200")]
    pub log: usize,
    /// For tests of the exerciser itself: from operation N on, flip a byte
    /// of the first file behind the model's back (once the file has one).
    #[arg(long, hide = true, value_name = "N")]
    pub corrupt_at: Option<u64>,
}

/// What one operation was, for the log.
#[derive(Clone, Debug)]
enum Op {
    Write {
        file: usize,
        offset: u64,
        len: u64,
    },
    Read {
        file: usize,
        offset: u64,
        len: u64,
    },
    Truncate {
        file: usize,
        len: u64,
    },
    Fallocate {
        file: usize,
        mode: i32,
        offset: u64,
        len: u64,
    },
    MapRead {
        file: usize,
        offset: u64,
        len: u64,
    },
    MapWrite {
        file: usize,
        offset: u64,
        len: u64,
        msync: bool,
    },
    Fsync {
        file: usize,
    },
    Reopen {
        file: usize,
    },
}

impl Op {
    fn kind(&self) -> &'static str {
        match self {
            Op::Write { .. } => "write",
            Op::Read { .. } => "read",
            Op::Truncate { .. } => "truncate",
            Op::Fallocate { .. } => "fallocate",
            Op::MapRead { .. } => "map_read",
            Op::MapWrite { .. } => "map_write",
            Op::Fsync { .. } => "fsync",
            Op::Reopen { .. } => "reopen",
        }
    }
}

/// A shared mapping of a file's first `len` bytes.
struct Mapping {
    addr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(file: &fs::File, len: usize, writable: bool) -> std::io::Result<Mapping> {
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: a new mapping placed by the kernel (addr NULL) of a
        // descriptor open for the call; the result is checked.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapping {
            addr: addr.cast(),
            len,
        })
    }

    /// Copies bytes `offset..offset + out.len()` of the mapping out.
    fn read(&self, offset: usize, out: &mut [u8]) {
        assert!(offset + out.len() <= self.len);
        // SAFETY: the range lies inside the mapping, which is live and
        // backed (the file is at least `len` long: nothing truncates it
        // while the mapping exists, this program being the only user).
        unsafe { std::ptr::copy_nonoverlapping(self.addr.add(offset), out.as_mut_ptr(), out.len()) }
    }

    /// Stores `data` at `offset` (a writable mapping).
    fn write(&self, offset: usize, data: &[u8]) {
        assert!(offset + data.len() <= self.len);
        // SAFETY: as in `read`; the mapping is writable and shared.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.addr.add(offset), data.len()) }
    }

    fn msync(&self) -> std::io::Result<()> {
        // SAFETY: the whole live mapping.
        let rc = unsafe { libc::msync(self.addr.cast(), self.len, libc::MS_SYNC) };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped, once.
        unsafe { libc::munmap(self.addr.cast(), self.len) };
    }
}

/// A buffer whose bytes start on a 4 KiB boundary (O_DIRECT).
struct Aligned {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let raw = vec![0u8; len + BLOCK as usize];
        let start = raw.as_ptr().align_offset(BLOCK as usize);
        Aligned { raw, start, len }
    }

    fn bytes(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

struct Fsx {
    args: FsxArgs,
    rng: SplitMix64,
    paths: Vec<PathBuf>,
    files: Vec<fs::File>,
    model: Vec<Vec<u8>>,
    log: VecDeque<(u64, Op)>,
    done_by_kind: BTreeMap<&'static str, u64>,
    unsupported: BTreeMap<i32, u64>,
}

pub fn run(args: FsxArgs) -> ExitCode {
    if !(1..=MAX_FILES).contains(&args.files) {
        eprintln!("wb fsx: --files must be from 1 to {MAX_FILES}");
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    if args.max_size > MAX_FILE_BYTES || args.max_size < 2 * MAX_IO_BYTES {
        eprintln!("wb fsx: --max-size must be from 128 KiB to 256 MiB");
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    if let Err(e) = fs::create_dir_all(&args.dir) {
        eprintln!("wb fsx: {}: {e}", args.dir.display());
        return ExitCode::from(EXIT_FAILURE);
    }
    let mut fsx = match Fsx::new(args) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("wb fsx: {e}");
            return ExitCode::from(EXIT_FAILURE);
        }
    };
    match fsx.run() {
        Ok(()) => {
            fsx.report();
            for path in &fsx.paths {
                let _ = fs::remove_file(path);
            }
            ExitCode::SUCCESS
        }
        Err(what) => {
            fsx.fail(&what);
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

impl Fsx {
    fn new(args: FsxArgs) -> std::io::Result<Fsx> {
        let paths: Vec<PathBuf> = (0..args.files)
            .map(|i| args.dir.join(format!("fsx-{}-{i}", args.seed)))
            .collect();
        let mut files = Vec::new();
        for path in &paths {
            let _ = fs::remove_file(path);
            files.push(open(path, args.direct, true)?);
        }
        Ok(Fsx {
            rng: SplitMix64::seed_from_u64(args.seed),
            model: vec![Vec::new(); args.files],
            paths,
            files,
            log: VecDeque::new(),
            done_by_kind: BTreeMap::new(),
            unsupported: BTreeMap::new(),
            args,
        })
    }

    fn below(&mut self, n: u64) -> u64 {
        self.rng.next_u64() % n.max(1)
    }

    /// An offset and length for an I/O within `limit` bytes (aligned with
    /// --direct).
    fn range(&mut self, limit: u64) -> (u64, u64) {
        let len = 1 + self.below(MAX_IO_BYTES);
        let offset = self.below(limit.saturating_sub(len) + 1);
        if self.args.direct {
            let len = len.div_ceil(BLOCK) * BLOCK;
            let offset = (offset / BLOCK * BLOCK).min(limit.saturating_sub(len) / BLOCK * BLOCK);
            (offset, len)
        } else {
            (offset, len)
        }
    }

    fn run(&mut self) -> Result<(), String> {
        let tenth = (self.args.ops / 10).max(1);
        for n in 0..self.args.ops {
            let op = self.draw();
            self.log.push_back((n, op.clone()));
            if self.log.len() > self.args.log {
                self.log.pop_front();
            }
            self.apply(&op)
                .map_err(|e| format!("operation #{n} ({op:?}): {e}"))?;
            if self.args.corrupt_at.is_some_and(|at| n >= at) && !self.model[0].is_empty() {
                self.args.corrupt_at = None;
                let byte = [!self.model[0][0]];
                // Unaligned: through a descriptor of its own, not O_DIRECT.
                open(&self.paths[0], false, false)
                    .and_then(|f| f.write_all_at(&byte, 0))
                    .map_err(|e| format!("corrupting: {e}"))?;
            }
            *self.done_by_kind.entry(op.kind()).or_insert(0) += 1;
            if (n + 1) % FULL_CHECK_EVERY == 0 {
                self.check_all()
                    .map_err(|e| format!("after operation #{n}: {e}"))?;
            }
            if (n + 1) % tenth == 0 {
                eprintln!("wb fsx: {} of {} operations", n + 1, self.args.ops);
            }
        }
        self.check_all().map_err(|e| format!("at the end: {e}"))
    }

    fn draw(&mut self) -> Op {
        let file = self.below(self.args.files as u64) as usize;
        let size = self.model[file].len() as u64;
        let max = self.args.max_size;
        match self.below(100) {
            0..=24 => {
                let (offset, len) = self.range(max);
                Op::Write { file, offset, len }
            }
            25..=49 => {
                let (offset, len) = self.range(size + 2 * BLOCK);
                Op::Read { file, offset, len }
            }
            50..=54 => {
                let mut len = self.below(max + 1);
                if self.args.direct {
                    len = len / BLOCK * BLOCK;
                }
                Op::Truncate { file, len }
            }
            55..=69 => self.draw_fallocate(file, size),
            70..=77 if size > 0 => {
                let (offset, len) = self.range(size);
                Op::MapRead {
                    file,
                    offset,
                    len: len.min(size - offset),
                }
            }
            78..=85 if size > 0 => {
                let (offset, len) = self.range(size);
                let msync = self.below(2) == 0;
                Op::MapWrite {
                    file,
                    offset,
                    len: len.min(size - offset),
                    msync,
                }
            }
            86..=92 => Op::Fsync { file },
            _ => Op::Reopen { file },
        }
    }

    fn draw_fallocate(&mut self, file: usize, size: u64) -> Op {
        let max = self.args.max_size;
        let modes = [
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            libc::FALLOC_FL_ZERO_RANGE,
            libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE,
            libc::FALLOC_FL_KEEP_SIZE,
            0,
            libc::FALLOC_FL_COLLAPSE_RANGE,
            libc::FALLOC_FL_INSERT_RANGE,
        ];
        let mode = modes[self.below(modes.len() as u64) as usize];
        let blocks = size / BLOCK;
        match mode {
            // Valid collapses only: whole blocks ending before the end.
            libc::FALLOC_FL_COLLAPSE_RANGE if blocks >= 2 => {
                let first = self.below(blocks - 1);
                let n = 1 + self.below((blocks - 1 - first).min(16));
                Op::Fallocate {
                    file,
                    mode,
                    offset: first * BLOCK,
                    len: n * BLOCK,
                }
            }
            // Inserts at a block before the end, within the size limit.
            libc::FALLOC_FL_INSERT_RANGE if blocks >= 1 && size + BLOCK <= max => {
                let first = self.below(blocks);
                let n = 1 + self.below(((max - size) / BLOCK).min(16));
                Op::Fallocate {
                    file,
                    mode,
                    offset: first * BLOCK,
                    len: n * BLOCK,
                }
            }
            libc::FALLOC_FL_COLLAPSE_RANGE | libc::FALLOC_FL_INSERT_RANGE => Op::Fsync { file },
            _ => {
                let (offset, len) = self.range(max);
                Op::Fallocate {
                    file,
                    mode,
                    offset,
                    len,
                }
            }
        }
    }

    fn apply(&mut self, op: &Op) -> Result<(), String> {
        match *op {
            Op::Write { file, offset, len } => self.write(file, offset, len),
            Op::Read { file, offset, len } => self.read(file, offset, len),
            Op::Truncate { file, len } => {
                self.files[file].set_len(len).map_err(|e| e.to_string())?;
                self.model[file].resize(len as usize, 0);
                self.check_len(file)
            }
            Op::Fallocate {
                file,
                mode,
                offset,
                len,
            } => self.fallocate(file, mode, offset, len),
            Op::MapRead { file, offset, len } => self.map_read(file, offset, len),
            Op::MapWrite {
                file,
                offset,
                len,
                msync,
            } => self.map_write(file, offset, len, msync),
            Op::Fsync { file } => self.files[file]
                .sync_all()
                .map_err(|e| format!("fsync: {e}")),
            Op::Reopen { file } => {
                self.files[file] = open(&self.paths[file], self.args.direct, false)
                    .map_err(|e| format!("reopen: {e}"))?;
                self.check_len(file)
            }
        }
    }

    fn write(&mut self, file: usize, offset: u64, len: u64) -> Result<(), String> {
        let mut buf = Aligned::new(len as usize);
        self.rng.fill_bytes(buf.bytes());
        self.files[file]
            .write_all_at(buf.bytes(), offset)
            .map_err(|e| format!("write: {e}"))?;
        let model = &mut self.model[file];
        let end = (offset + len) as usize;
        if model.len() < end {
            model.resize(end, 0);
        }
        model[offset as usize..end].copy_from_slice(buf.bytes());
        self.check_len(file)
    }

    fn read(&mut self, file: usize, offset: u64, len: u64) -> Result<(), String> {
        let mut buf = Aligned::new(len as usize);
        let got =
            read_fully(&self.files[file], buf.bytes(), offset).map_err(|e| format!("read: {e}"))?;
        let model = &self.model[file];
        let start = (offset as usize).min(model.len());
        let want = &model[start..(offset + len).min(model.len() as u64) as usize];
        compare(want, &buf.bytes()[..got], offset)
    }

    fn fallocate(&mut self, file: usize, mode: i32, offset: u64, len: u64) -> Result<(), String> {
        // SAFETY: fallocate(2) on a descriptor open for the call, with
        // plain integers (below 256 MiB + 64 KiB).
        let rc = unsafe {
            libc::fallocate(
                self.files[file].as_raw_fd(),
                mode,
                offset as i64,
                len as i64,
            )
        };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
                *self.unsupported.entry(mode).or_insert(0) += 1;
                return Ok(());
            }
            return Err(format!("fallocate mode {mode:#x}: {e}"));
        }
        let model = &mut self.model[file];
        let (start, end) = (offset as usize, (offset + len) as usize);
        let size = model.len();
        match mode {
            libc::FALLOC_FL_COLLAPSE_RANGE => {
                model.drain(start..end);
            }
            libc::FALLOC_FL_INSERT_RANGE => {
                model.splice(start..start, std::iter::repeat_n(0, len as usize));
            }
            _ => {
                if mode & (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE) != 0 {
                    model[start.min(size)..end.min(size)].fill(0);
                }
                if mode & libc::FALLOC_FL_KEEP_SIZE == 0 && end > size {
                    model.resize(end, 0);
                }
            }
        }
        self.check_len(file)
    }

    fn map_read(&mut self, file: usize, offset: u64, len: u64) -> Result<(), String> {
        let size = self.model[file].len();
        let map = Mapping::new(&self.files[file], size, false).map_err(|e| format!("mmap: {e}"))?;
        let mut got = vec![0u8; len as usize];
        map.read(offset as usize, &mut got);
        let want = &self.model[file][offset as usize..(offset + len) as usize];
        compare(want, &got, offset).map_err(|e| format!("through the mapping: {e}"))
    }

    fn map_write(&mut self, file: usize, offset: u64, len: u64, msync: bool) -> Result<(), String> {
        let size = self.model[file].len();
        let map = Mapping::new(&self.files[file], size, true).map_err(|e| format!("mmap: {e}"))?;
        let mut data = vec![0u8; len as usize];
        self.rng.fill_bytes(&mut data);
        map.write(offset as usize, &data);
        if msync {
            map.msync().map_err(|e| format!("msync: {e}"))?;
        }
        self.model[file][offset as usize..(offset + len) as usize].copy_from_slice(&data);
        Ok(())
    }

    fn check_len(&self, file: usize) -> Result<(), String> {
        let len = self.files[file]
            .metadata()
            .map_err(|e| format!("fstat: {e}"))?
            .len();
        let want = self.model[file].len() as u64;
        if len != want {
            return Err(format!("length {len}, the model says {want}"));
        }
        Ok(())
    }

    fn check_all(&mut self) -> Result<(), String> {
        for file in 0..self.files.len() {
            self.check_len(file)?;
            let size = self.model[file].len();
            let mut buf = Aligned::new(size.div_ceil(BLOCK as usize) * BLOCK as usize);
            let got = read_fully(&self.files[file], buf.bytes(), 0)
                .map_err(|e| format!("reading file {file} whole: {e}"))?;
            compare(&self.model[file], &buf.bytes()[..got], 0)
                .map_err(|e| format!("file {file} read whole: {e}"))?;
        }
        Ok(())
    }

    fn report(&self) {
        let kinds: Vec<String> = self
            .done_by_kind
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        println!(
            "fsx: {} operations on {} files in {} (seed {}{}): 0 mismatches",
            self.args.ops,
            self.args.files,
            self.args.dir.display(),
            self.args.seed,
            if self.args.direct { ", O_DIRECT" } else { "" }
        );
        println!("  by kind: {}", kinds.join(", "));
        if !self.unsupported.is_empty() {
            let modes: Vec<String> = self
                .unsupported
                .iter()
                .map(|(m, n)| format!("{m:#x} x{n}"))
                .collect();
            println!(
                "  fallocate modes refused (EOPNOTSUPP): {}",
                modes.join(", ")
            );
        }
    }

    fn fail(&self, what: &str) {
        eprintln!("wb fsx: MISMATCH with seed {}: {what}", self.args.seed);
        eprintln!("the last {} operations:", self.log.len());
        for (n, op) in &self.log {
            eprintln!("  #{n} {op:?}");
        }
        eprintln!(
            "replay: wb fsx {} --seed {} --ops {} --files {} --max-size {}{}",
            self.args.dir.display(),
            self.args.seed,
            self.args.ops,
            self.args.files,
            self.args.max_size,
            if self.args.direct { " --direct" } else { "" }
        );
    }
}

fn open(path: &Path, direct: bool, create: bool) -> std::io::Result<fs::File> {
    let mut options = fs::OpenOptions::new();
    options.read(true).write(true).create(create);
    if direct {
        options.custom_flags(libc::O_DIRECT);
    }
    options.open(path)
}

/// Reads until `buf` is full or the end of the file; returns the bytes read.
fn read_fully(file: &fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Where `got` first differs from `want` (bytes from file offset `offset`).
fn compare(want: &[u8], got: &[u8], offset: u64) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!(
            "{} bytes from {offset}, the model has {}",
            got.len(),
            want.len()
        ));
    }
    match want.iter().zip(got).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(i) => Err(format!(
            "byte {} is {:#04x}, the model says {:#04x}",
            offset + i as u64,
            got[i],
            want[i]
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_names_the_first_difference() {
        assert_eq!(compare(b"abc", b"abc", 0), Ok(()));
        assert_eq!(
            compare(b"abc", b"abd", 100),
            Err("byte 102 is 0x64, the model says 0x63".into())
        );
        assert_eq!(
            compare(b"abc", b"ab", 0),
            Err("2 bytes from 0, the model has 3".into())
        );
    }

    #[test]
    fn aligned_buffers_start_on_a_block() {
        for len in [1, 4096, 65536] {
            let mut b = Aligned::new(len);
            assert_eq!(b.bytes().as_ptr() as usize % BLOCK as usize, 0);
            assert_eq!(b.bytes().len(), len);
        }
    }
}
