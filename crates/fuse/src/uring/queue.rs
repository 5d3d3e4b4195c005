//! One serving thread of a ring queue: its own io_uring (128-byte
//! entries, as FUSE's commands need), one ring entry registered on queue
//! `qid` of the connection, and the loop that serves what the kernel puts
//! in it and commits the answer, which fetches the next request.
//!
//! A request is served on this thread from start to end, blocking it (an
//! fsync, a throttled write); the queue's other threads take the CPU's
//! next requests meanwhile, as fuser's threads do over /dev/fuse.

use super::serve::{call, encode};
use super::wire::{out_header, Fields, InHeader, Out, ENT_AT, HEADER_BYTES, OP_IN_AT};
use crate::fs::WbFs;
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

const FUSE_IO_URING_CMD_REGISTER: u32 = 1;
const FUSE_IO_URING_CMD_COMMIT_AND_FETCH: u32 = 2;
/// How long registering may wait for the kernel to finish INIT (it
/// answers EAGAIN until then).
pub const REGISTER_TIMEOUT: Duration = Duration::from_secs(10);
const REGISTER_RETRY: Duration = Duration::from_millis(5);

/// The entry's buffers, given to the kernel by REGISTER and written by it
/// for each request: they must stay where they are while the ring lives.
struct Buffers {
    header: Box<[u8]>,
    payload: Box<[u8]>,
    iov: Box<[libc::iovec; 2]>,
}

/// The command area of a FUSE ring command (`struct fuse_uring_cmd_req`).
fn cmd(qid: u16, commit_id: u64) -> [u8; 80] {
    let mut c = [0u8; 80];
    c[8..16].copy_from_slice(&commit_id.to_le_bytes());
    c[16..18].copy_from_slice(&qid.to_le_bytes());
    c
}

/// Sets the SQE's `len` (a REGISTER's iovec count), which the io-uring
/// crate's UringCmd80 builder leaves at 0.
fn set_len(e: &mut squeue::Entry128, len: u32) {
    const _: () = assert!(std::mem::size_of::<squeue::Entry128>() == 128);
    // SAFETY: Entry128 is #[repr(C)] (an io_uring_sqe, then 64 bytes of
    // command) and 128 bytes long (asserted above); io_uring_sqe's `len`
    // is the u32 at byte 24 (include/uapi/linux/io_uring.h). Any four
    // bytes are a valid u32, and the reference lives only in this call.
    let bytes = unsafe { &mut *(e as *mut squeue::Entry128).cast::<[u8; 128]>() };
    bytes[24..28].copy_from_slice(&len.to_le_bytes());
}

/// Serves queue `qid` until the connection ends. Err: the ring could not
/// be set up or registered.
pub fn serve(
    fs: Arc<WbFs>,
    device: Arc<OwnedFd>,
    qid: u16,
    payload_bytes: usize,
) -> std::io::Result<()> {
    pin_to_cpu(qid as usize);
    let mut ring: IoUring<squeue::Entry128, cqueue::Entry> = IoUring::builder().build(4)?;
    // Dropped only when no command of ours is in flight (its completion
    // came): a thread that fails with one in flight leaves them, as the
    // kernel may still write a request into them.
    let mut bufs = std::mem::ManuallyDrop::new(Buffers {
        header: vec![0u8; HEADER_BYTES].into_boxed_slice(),
        payload: vec![0u8; payload_bytes].into_boxed_slice(),
        iov: Box::new(
            [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; 2],
        ),
    });
    bufs.iov[0] = libc::iovec {
        iov_base: bufs.header.as_mut_ptr().cast(),
        iov_len: bufs.header.len(),
    };
    bufs.iov[1] = libc::iovec {
        iov_base: bufs.payload.as_mut_ptr().cast(),
        iov_len: bufs.payload.len(),
    };
    let fd = types::Fd(device.as_raw_fd());
    push_register(&mut ring, fd, qid, &bufs)?;
    let deadline = Instant::now() + REGISTER_TIMEOUT;
    let mut registered = false;
    let mut read_buf = Vec::new();
    loop {
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) => return Err(e),
        }
        let Some(done) = ring.completion().next() else {
            continue;
        };
        match done.result() {
            e if e == -libc::EAGAIN && !registered && Instant::now() < deadline => {
                // INIT not answered yet.
                std::thread::sleep(REGISTER_RETRY);
                push_register(&mut ring, fd, qid, &bufs)?;
                continue;
            }
            e if e < 0 => {
                // Our one command completed: the kernel writes no more
                // into the buffers.
                drop(std::mem::ManuallyDrop::into_inner(bufs));
                return match -e {
                    // The connection ended (unmounted or aborted), and
                    // with it the entry: nothing is left to serve.
                    libc::ENOTCONN | libc::ECANCELED | libc::ENODEV => Ok(()),
                    e => Err(std::io::Error::from_raw_os_error(e)),
                };
            }
            _ => registered = true,
        }
        let commit_id = serve_one(&fs, &mut bufs, &mut read_buf);
        let sqe = opcode::UringCmd80::new(fd, FUSE_IO_URING_CMD_COMMIT_AND_FETCH)
            .cmd(cmd(qid, commit_id))
            .build();
        // SAFETY: the command names no buffer; the entry's buffers were
        // registered and stay until the kernel lets go of them.
        unsafe { ring.submission().push(&sqe) }
            .map_err(|_| std::io::Error::other("the submission queue is full"))?;
    }
}

/// Queues the entry's REGISTER (its completion comes with the first
/// request, or at once with an error: EAGAIN before INIT is answered).
fn push_register(
    ring: &mut IoUring<squeue::Entry128, cqueue::Entry>,
    fd: types::Fd,
    qid: u16,
    bufs: &Buffers,
) -> std::io::Result<()> {
    let mut sqe = opcode::UringCmd80::new(fd, FUSE_IO_URING_CMD_REGISTER)
        .cmd(cmd(qid, 0))
        .addr(Some(bufs.iov.as_ptr() as u64))
        .build();
    set_len(&mut sqe, 2);
    // SAFETY: the iovecs and the buffers they point to are in `bufs`,
    // which `serve` frees only once the kernel has let go of them.
    unsafe { ring.submission().push(&sqe) }
        .map_err(|_| std::io::Error::other("the submission queue is full"))
}

/// Serves the request in the entry's buffers and writes its answer there;
/// returns the commit id to answer with.
fn serve_one(fs: &WbFs, bufs: &mut Buffers, read_buf: &mut Vec<u8>) -> u64 {
    let ent = Fields(&bufs.header[ENT_AT..]);
    let commit_id = ent.u64(8).unwrap_or(0);
    let payload_sz = (ent.u32(16).unwrap_or(0) as usize).min(bufs.payload.len());
    let Some(h) = InHeader::parse(&bufs.header[..OP_IN_AT]) else {
        return commit_id;
    };
    fs.requests.count_over_uring();
    let reply = call(
        fs,
        &h,
        &bufs.header[OP_IN_AT..ENT_AT],
        &bufs.payload[..payload_sz],
        read_buf,
    );
    let keep = 2 * bufs.payload.len();
    let mut out = Out::new(&mut bufs.payload);
    let result = reply.and_then(|r| encode(fs, &r, read_buf, &mut out));
    let (error, len) = match result {
        Ok(()) => (0, out.len()),
        Err(e) => (e, 0),
    };
    if read_buf.capacity() > keep {
        *read_buf = Vec::new();
    }
    bufs.header[..16].copy_from_slice(&out_header(h.unique, error, len));
    let len = u32::try_from(len).unwrap_or(u32::MAX);
    bufs.header[ENT_AT + 16..ENT_AT + 20].copy_from_slice(&len.to_le_bytes());
    commit_id
}

/// Runs this thread on `cpu` where it can (the queue's requests come
/// from it); elsewhere it runs anywhere.
fn pin_to_cpu(cpu: usize) {
    let mut set = nix::sched::CpuSet::new();
    if set.set(cpu).is_ok() {
        let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
    }
}
