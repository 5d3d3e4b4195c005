//! Does this kernel serve FUSE over io_uring, and what does one request
//! cost on each transport? A measuring probe for the mount's transport
//! (docs/fuse-transport.md), not part of the mount.
//!
//! It mounts a tiny filesystem of its own (one file `f`, 1 GiB of zeros,
//! opened with direct I/O so every read is a request; attributes never
//! cached so every stat is one) on /dev/fuse, answers INIT itself, and
//! serves it either from /dev/fuse (`read(2)`, `write(2)`: the kernel
//! wakes a serving thread, the reply wakes the caller) or from one
//! io_uring per CPU (FUSE_IO_URING_CMD_REGISTER, then one
//! COMMIT_AND_FETCH per request: the request is served on the CPU that
//! issued it). A client thread then times QD1 4 KiB preads and stats.
//!
//! Usage (root): `cargo run --release -p wb-fuse --example uring_probe -- [devfuse|uring] [COUNT]`
//! With `uring`, /sys/module/fuse/parameters/enable_uring must be Y.

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

const FUSE_LOOKUP: u32 = 1;
const FUSE_FORGET: u32 = 2;
const FUSE_GETATTR: u32 = 3;
const FUSE_OPEN: u32 = 14;
const FUSE_READ: u32 = 15;
const FUSE_RELEASE: u32 = 18;
const FUSE_FLUSH: u32 = 25;
const FUSE_INIT: u32 = 26;
const FUSE_OPENDIR: u32 = 27;
const FUSE_RELEASEDIR: u32 = 29;
const FUSE_INTERRUPT: u32 = 36;
const FUSE_DESTROY: u32 = 38;
const FUSE_BATCH_FORGET: u32 = 42;

const FUSE_BIG_WRITES: u32 = 1 << 5;
const FUSE_MAX_PAGES: u32 = 1 << 22;
const FUSE_INIT_EXT: u32 = 1 << 30;
/// FUSE_OVER_IO_URING (1 << 41) in init_out.flags2.
const FUSE_OVER_IO_URING_FLAGS2: u32 = 1 << (41 - 32);
const FOPEN_DIRECT_IO: u32 = 1;

const FUSE_IO_URING_CMD_REGISTER: u32 = 1;
const FUSE_IO_URING_CMD_COMMIT_AND_FETCH: u32 = 2;

const IN_HEADER: usize = 40;
const OUT_HEADER: usize = 16;
const MAX_WRITE: u32 = 256 << 10;
const PAYLOAD: usize = MAX_WRITE as usize;
const FILE_SIZE: u64 = 1 << 30;
const FILE_INO: u64 = 2;
/// The uring header buffer: in_out (128), op_in (128), ring_ent_in_out (32).
const RING_HEADER: usize = 288;

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// A request's fixed header.
struct InHeader {
    opcode: u32,
    unique: u64,
    nodeid: u64,
}

fn in_header(b: &[u8]) -> InHeader {
    InHeader {
        opcode: u32_at(b, 4),
        unique: u64_at(b, 8),
        nodeid: u64_at(b, 16),
    }
}

/// fuse_attr (88 bytes).
fn attr(ino: u64) -> Vec<u8> {
    let mut a = Vec::with_capacity(88);
    let (size, mode, nlink) = if ino == 1 {
        (0u64, 0o040755u32, 2u32)
    } else {
        (FILE_SIZE, 0o100644, 1)
    };
    a.extend_from_slice(&ino.to_le_bytes());
    a.extend_from_slice(&size.to_le_bytes());
    a.extend_from_slice(&size.div_ceil(512).to_le_bytes());
    a.extend_from_slice(&[0u8; 24]); // atime, mtime, ctime
    a.extend_from_slice(&[0u8; 12]); // their nsecs
    a.extend_from_slice(&mode.to_le_bytes());
    a.extend_from_slice(&nlink.to_le_bytes());
    a.extend_from_slice(&[0u8; 12]); // uid, gid, rdev
    a.extend_from_slice(&4096u32.to_le_bytes()); // blksize
    a.extend_from_slice(&0u32.to_le_bytes()); // flags
    assert_eq!(a.len(), 88);
    a
}

/// What a request is answered with: an error, or a payload.
enum Answer {
    Error(i32),
    Data(usize),
    None,
}

/// Serves one request whose fixed header is `h`, its op header `op`,
/// its payload `payload`; writes the reply's payload into `out`.
fn serve(h: &InHeader, op: &[u8], payload: &[u8], out: &mut [u8]) -> Answer {
    let put = |out: &mut [u8], parts: &[&[u8]]| {
        let mut n = 0;
        for p in parts {
            out[n..n + p.len()].copy_from_slice(p);
            n += p.len();
        }
        Answer::Data(n)
    };
    match h.opcode {
        FUSE_LOOKUP => {
            if h.nodeid == 1 && payload.starts_with(b"f\0") {
                // fuse_entry_out: nodeid, generation, entry_valid,
                // attr_valid, their nsecs, attr. Attributes never cached.
                let head = [FILE_INO, 0, 3600, 0].map(u64::to_le_bytes).concat();
                put(out, &[&head, &[0u8; 8], &attr(FILE_INO)])
            } else {
                Answer::Error(libc::ENOENT)
            }
        }
        FUSE_GETATTR => {
            // fuse_attr_out: attr_valid 0, nsec, dummy, attr.
            put(out, &[&[0u8; 16], &attr(h.nodeid)])
        }
        FUSE_OPEN | FUSE_OPENDIR => {
            let flags = if h.opcode == FUSE_OPEN {
                FOPEN_DIRECT_IO
            } else {
                0
            };
            let body = [
                1u64.to_le_bytes().as_slice(),
                &flags.to_le_bytes(),
                &[0u8; 4],
            ]
            .concat();
            put(out, &[&body])
        }
        FUSE_READ => {
            let size = (u32_at(op, 16) as usize).min(out.len());
            let offset = u64_at(op, 8);
            let n = (FILE_SIZE.saturating_sub(offset) as usize).min(size);
            out[..n].fill(0);
            Answer::Data(n)
        }
        FUSE_RELEASE | FUSE_RELEASEDIR => Answer::Data(0),
        FUSE_FLUSH => Answer::Error(libc::ENOSYS),
        FUSE_FORGET | FUSE_BATCH_FORGET | FUSE_INTERRUPT => Answer::None,
        FUSE_DESTROY => Answer::Data(0),
        _ => Answer::Error(libc::ENOSYS),
    }
}

fn out_header(unique: u64, error: i32, len: usize) -> [u8; OUT_HEADER] {
    let mut h = [0u8; OUT_HEADER];
    h[0..4].copy_from_slice(&((OUT_HEADER + len) as u32).to_le_bytes());
    h[4..8].copy_from_slice(&(-error).to_le_bytes());
    h[8..16].copy_from_slice(&unique.to_le_bytes());
    h
}

/// Answers INIT on /dev/fuse, asking for io_uring when `uring`.
fn init(dev: &mut File, uring: bool) {
    let mut buf = vec![0u8; PAYLOAD + 4096];
    let n = dev.read(&mut buf).expect("read INIT");
    let h = in_header(&buf[..n]);
    assert_eq!(h.opcode, FUSE_INIT, "the first request is INIT");
    let body = &buf[IN_HEADER..n];
    let (major, minor, max_readahead, flags) = (
        u32_at(body, 0),
        u32_at(body, 4),
        u32_at(body, 8),
        u32_at(body, 12),
    );
    let flags2 = u32_at(body, 16);
    eprintln!("kernel FUSE {major}.{minor}, flags {flags:#x} flags2 {flags2:#x}");
    if uring && flags2 & FUSE_OVER_IO_URING_FLAGS2 == 0 {
        eprintln!("the kernel does not offer FUSE over io_uring (enable_uring=N?)");
        std::process::exit(2);
    }
    let mut out = Vec::new();
    out.extend_from_slice(&7u32.to_le_bytes());
    out.extend_from_slice(&minor.min(44).to_le_bytes());
    out.extend_from_slice(&max_readahead.to_le_bytes());
    let want = (FUSE_BIG_WRITES | FUSE_MAX_PAGES | FUSE_INIT_EXT) & flags;
    out.extend_from_slice(&want.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes()); // max_background
    out.extend_from_slice(&12u16.to_le_bytes()); // congestion_threshold
    out.extend_from_slice(&MAX_WRITE.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes()); // time_gran
    out.extend_from_slice(&((MAX_WRITE / 4096) as u16).to_le_bytes()); // max_pages
    out.extend_from_slice(&0u16.to_le_bytes());
    let f2 = if uring { FUSE_OVER_IO_URING_FLAGS2 } else { 0 };
    out.extend_from_slice(&f2.to_le_bytes());
    out.resize(64, 0);
    let reply = [out_header(h.unique, 0, out.len()).as_slice(), &out].concat();
    dev.write_all(&reply).expect("reply INIT");
}

/// Serves requests read from /dev/fuse until it closes.
fn serve_devfuse(fd: RawFd) {
    // SAFETY: a duplicate of the session's descriptor, owned here.
    let mut dev = unsafe { File::from_raw_fd(libc::dup(fd)) };
    let mut buf = vec![0u8; PAYLOAD + 4096];
    let mut out = vec![0u8; PAYLOAD];
    loop {
        let n = match dev.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
            Err(_) => return,
        };
        let h = in_header(&buf[..n]);
        // The op header and the payload are contiguous after the header.
        let body = &buf[IN_HEADER..n];
        let (op, payload) = match h.opcode {
            FUSE_LOOKUP => (&body[..0], body),
            _ => (body, &body[..0]),
        };
        let reply = match serve(&h, op, payload, &mut out) {
            Answer::None => continue,
            Answer::Error(e) => out_header(h.unique, e, 0).to_vec(),
            Answer::Data(len) => [out_header(h.unique, 0, len).as_slice(), &out[..len]].concat(),
        };
        let _ = dev.write_all(&reply);
    }
}

/// One ring entry's buffers: the header and the payload.
struct Entry {
    header: Vec<u8>,
    payload: Vec<u8>,
    iov: [libc::iovec; 2],
}

fn cmd(qid: u16, commit_id: u64) -> [u8; 80] {
    let mut c = [0u8; 80];
    c[8..16].copy_from_slice(&commit_id.to_le_bytes());
    c[16..18].copy_from_slice(&qid.to_le_bytes());
    c
}

/// Sets the SQE's `len` (the iovec count of a REGISTER), which the io-uring
/// crate's UringCmd80 builder leaves at 0.
fn set_len(e: &mut squeue::Entry128, len: u32) {
    const _: () = assert!(std::mem::size_of::<squeue::Entry128>() == 128);
    // SAFETY: Entry128 is #[repr(C)] (an io_uring_sqe, then 64 bytes) and
    // 128 bytes long (asserted above); io_uring_sqe's `len` is the u32 at
    // byte 24 (include/uapi/linux/io_uring.h). Any bytes are a valid u32.
    let bytes = unsafe { &mut *(e as *mut squeue::Entry128 as *mut [u8; 128]) };
    bytes[24..28].copy_from_slice(&len.to_le_bytes());
}

/// Registers `entries` entries on queue `qid` and serves them.
fn serve_ring(fd: RawFd, qid: u16, entries: usize) {
    let mut cpus = nix::sched::CpuSet::new();
    let _ = cpus.set(qid as usize);
    let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &cpus);
    let mut ring: IoUring<squeue::Entry128, cqueue::Entry> =
        IoUring::builder().build(8).expect("io_uring with SQE128");
    let mut ents: Vec<Entry> = (0..entries)
        .map(|_| Entry {
            header: vec![0u8; RING_HEADER],
            payload: vec![0u8; PAYLOAD],
            iov: [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; 2],
        })
        .collect();
    for (i, e) in ents.iter_mut().enumerate() {
        e.iov = [
            libc::iovec {
                iov_base: e.header.as_mut_ptr().cast(),
                iov_len: RING_HEADER,
            },
            libc::iovec {
                iov_base: e.payload.as_mut_ptr().cast(),
                iov_len: PAYLOAD,
            },
        ];
        let mut sqe = opcode::UringCmd80::new(types::Fd(fd), FUSE_IO_URING_CMD_REGISTER)
            .cmd(cmd(qid, 0))
            .addr(Some(e.iov.as_ptr() as u64))
            .build()
            .user_data(i as u64);
        set_len(&mut sqe, 2);
        // SAFETY: the iovecs and the buffers they point to live in `ents`,
        // which outlives the ring (dropped at the end of this function,
        // after the ring stops).
        unsafe { ring.submission().push(&sqe).expect("queue REGISTER") };
    }
    ring.submit().expect("submit REGISTER");
    let mut out = vec![0u8; PAYLOAD];
    loop {
        if let Err(e) = ring.submit_and_wait(1) {
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return;
        }
        let done: Vec<(u64, i32)> = ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (i, result) in done {
            if result < 0 {
                // ENOTCONN and the like: the connection ended.
                eprintln!(
                    "queue {qid}: entry {i}: {}",
                    std::io::Error::from_raw_os_error(-result)
                );
                return;
            }
            let e = &mut ents[i as usize];
            let h = in_header(&e.header[..IN_HEADER]);
            let payload_sz = u32_at(&e.header, 256 + 16) as usize;
            let commit_id = u64_at(&e.header, 256 + 8);
            let answer = serve(&h, &e.header[128..256], &e.payload[..payload_sz], &mut out);
            let (error, len) = match answer {
                Answer::Error(err) => (err, 0),
                Answer::Data(len) => (0, len),
                Answer::None => (0, 0),
            };
            e.payload[..len].copy_from_slice(&out[..len]);
            e.header[..OUT_HEADER].copy_from_slice(&out_header(h.unique, error, len));
            e.header[256 + 16..256 + 20].copy_from_slice(&(len as u32).to_le_bytes());
            let sqe = opcode::UringCmd80::new(types::Fd(fd), FUSE_IO_URING_CMD_COMMIT_AND_FETCH)
                .cmd(cmd(qid, commit_id))
                .build()
                .user_data(i);
            // SAFETY: as for REGISTER: the entry's buffers outlive the ring.
            unsafe {
                ring.submission()
                    .push(&sqe)
                    .expect("queue COMMIT_AND_FETCH")
            };
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let uring = args.get(1).map(String::as_str) == Some("uring");
    let count: u32 = args.get(2).and_then(|c| c.parse().ok()).unwrap_or(100_000);
    let mnt = std::env::temp_dir().join(format!("uring-probe-{}", std::process::id()));
    std::fs::create_dir_all(&mnt).expect("mountpoint");
    let mut dev = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .expect("/dev/fuse");
    let fd = dev.as_raw_fd();
    let data =
        CString::new(format!("fd={fd},rootmode=40000,user_id=0,group_id=0")).expect("no NUL");
    let target = CString::new(mnt.as_os_str().as_encoded_bytes()).expect("no NUL");
    // SAFETY: mount(2) with NUL-terminated strings that live across the call.
    let r = unsafe {
        libc::mount(
            c"probe".as_ptr(),
            target.as_ptr(),
            c"fuse.probe".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            data.as_ptr().cast(),
        )
    };
    assert_eq!(r, 0, "mount: {}", std::io::Error::last_os_error());
    init(&mut dev, uring);
    let nr_cpus = 2u16;
    // /dev/fuse serves FORGET and INTERRUPT in both modes.
    let mut servers = vec![std::thread::spawn(move || serve_devfuse(fd))];
    if uring {
        for qid in 0..nr_cpus {
            servers.push(std::thread::spawn(move || serve_ring(fd, qid, 2)));
        }
    } else {
        servers.push(std::thread::spawn(move || serve_devfuse(fd)));
    }
    std::thread::sleep(Duration::from_millis(200));
    let path = mnt.join("f");
    let file = File::open(&path).expect("open f");
    let mut buf = vec![0u8; 4096];
    for (what, pinned) in [("free", None), ("pinned", Some(0usize))] {
        if let Some(cpu) = pinned {
            let mut cpus = nix::sched::CpuSet::new();
            let _ = cpus.set(cpu);
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &cpus);
        }
        let started = Instant::now();
        for i in 0..count {
            file.read_exact_at(&mut buf, (i as u64 * 4096) % FILE_SIZE)
                .expect("pread");
        }
        let read_us = started.elapsed().as_secs_f64() * 1e6 / count as f64;
        let started = Instant::now();
        for _ in 0..count / 4 {
            std::fs::metadata(&path).expect("stat");
        }
        let stat_us = started.elapsed().as_secs_f64() * 1e6 / (count / 4) as f64;
        println!(
            "{} {what}: 4 KiB pread {read_us:.1} us, stat {stat_us:.1} us",
            if uring { "uring" } else { "devfuse" }
        );
    }
    drop(file);
    // SAFETY: umount2(2) with a NUL-terminated path.
    unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    drop(dev);
    let _ = std::fs::remove_dir(&mnt);
    // The serving threads end when the connection does; do not wait.
    std::process::exit(0);
}
