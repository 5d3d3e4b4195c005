//! Real-I/O tests of the writeback I/O layer. They run in a directory under
//! `CARGO_TARGET_TMPDIR` (on the real disk) and skip, with a note, if that
//! filesystem does not support O_DIRECT.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

use writeback::io::calibrate::{calibrate, device_id, CALIBRATION_FILE};
use writeback::io::pages::MAX_SEGMENTS;
use writeback::io::{
    backend_by_name, open_backend, open_direct, supports_direct, AlignedBuf, IoBackend, IoBuf,
    IoDone, IoOp, IoPages, PAGE_SIZE,
};

const BACKENDS: [&str; 2] = ["threads", "io_uring"];
const WAIT: Duration = Duration::from_secs(60);

/// A fresh directory for one test, or `None` (with a note) if O_DIRECT is
/// unsupported there.
fn test_dir(name: &str) -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("writeback-io")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    if supports_direct(&dir) {
        Some(dir)
    } else {
        wb_testkit::skip(&format!(
            "{name}: {} does not support O_DIRECT",
            dir.display()
        ));
        None
    }
}

/// The backend `name`, or `None` (with a note) if it cannot run here.
fn backend(name: &str, workers: usize) -> Option<(Box<dyn IoBackend>, Receiver<IoDone>)> {
    let (tx, rx) = mpsc::channel();
    match backend_by_name(name, tx, workers) {
        Ok(b) => {
            assert_eq!(b.name(), name);
            Some((b, rx))
        }
        Err(e) => {
            wb_testkit::skip(&format!("backend {name}: {e}"));
            None
        }
    }
}

fn collect(rx: &Receiver<IoDone>, n: usize) -> HashMap<u64, IoDone> {
    let mut out = HashMap::new();
    for _ in 0..n {
        let d = rx.recv_timeout(WAIT).expect("completion did not arrive");
        assert!(out.insert(d.id, d).is_none(), "duplicate completion");
    }
    assert!(
        rx.try_recv().is_err(),
        "more completions than submitted ops"
    );
    out
}

fn pattern(offset: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| {
            let x = offset + i;
            (x ^ (x >> 8) ^ (x >> 16) ^ 0x5A) as u8
        })
        .collect()
}

/// The bytes of an op's own buffer, handed back in its completion.
fn bytes(buf: &IoBuf) -> &[u8] {
    buf.owned().expect("an owned buffer comes back").as_slice()
}

fn op(id: u64, file: &Arc<File>, write: bool, offset: u64, buf: AlignedBuf) -> IoOp {
    IoOp {
        id,
        file: Arc::clone(file),
        write,
        offset,
        len: buf.len(),
        buf: buf.into(),
        blocks: false,
    }
}

#[test]
fn roundtrip_4mib_each_backend() {
    const TOTAL: usize = 4 << 20;
    let Some(dir) = test_dir("roundtrip") else {
        return;
    };
    for name in BACKENDS {
        let Some((b, rx)) = backend(name, 4) else {
            continue;
        };
        let path = dir.join(format!("data-{name}"));
        let file = Arc::new(open_direct(&path, true).unwrap());

        // Write as 64 concurrent 64 KiB ops.
        let wchunk = 64 << 10;
        for i in 0..(TOTAL / wchunk) as u64 {
            let off = i * wchunk as u64;
            let mut buf = AlignedBuf::new(wchunk);
            buf.as_mut_slice().copy_from_slice(&pattern(off, wchunk));
            b.submit(op(i, &file, true, off, buf));
        }
        for (id, d) in collect(&rx, TOTAL / wchunk) {
            assert_eq!(d.result.unwrap(), wchunk, "{name} write {id}");
        }
        assert_eq!(std::fs::metadata(&path).unwrap().len(), TOTAL as u64);

        // Read back as 16 concurrent 256 KiB ops, buffers pre-dirtied.
        let rchunk = 256 << 10;
        for i in 0..(TOTAL / rchunk) as u64 {
            let mut buf = AlignedBuf::new(rchunk);
            buf.as_mut_slice().fill(0xEE);
            b.submit(op(1000 + i, &file, false, i * rchunk as u64, buf));
        }
        for (id, d) in collect(&rx, TOTAL / rchunk) {
            let off = (id - 1000) * rchunk as u64;
            assert_eq!(d.result.unwrap(), rchunk, "{name} read {id}");
            assert!(
                bytes(&d.buf) == pattern(off, rchunk).as_slice(),
                "{name}: data mismatch at offset {off}"
            );
        }
        // And through plain std I/O, to be sure it reached the file.
        assert!(std::fs::read(&path).unwrap() == pattern(0, TOTAL), "{name}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Pages lent by their owner are written in the order given, joined where
/// adjacent, across more segments than one vectored call takes; a read
/// into lent pages is refused.
#[test]
fn lent_pages_are_written_in_order_each_backend() {
    let Some(dir) = test_dir("lent") else {
        return;
    };
    // 1100 single pages from every other page of the memory, then 3
    // adjacent ones: more runs than MAX_SEGMENTS (1024).
    let runs = MAX_SEGMENTS + 76;
    let mut memory = AlignedBuf::new((2 * runs + 3) * PAGE_SIZE);
    for (i, page) in memory.as_mut_slice().chunks_mut(PAGE_SIZE).enumerate() {
        page.fill(i as u8 ^ 0xA5);
        page[..8].copy_from_slice(&(i as u64).to_le_bytes());
    }
    let memory = Arc::new(memory);
    let mut order: Vec<usize> = (0..runs).map(|i| 2 * (runs - 1 - i)).collect();
    order.extend([2 * runs, 2 * runs + 1, 2 * runs + 2]);
    let base = memory.as_ptr();
    let lend = || {
        let owner: Arc<dyn Send + Sync> = memory.clone();
        let pages = order
            .iter()
            .map(|&p| (base.wrapping_add(p * PAGE_SIZE), PAGE_SIZE));
        // SAFETY: every page lies inside `memory`, which `owner` keeps alive
        // and nothing writes to any more.
        unsafe { IoPages::new(owner, pages) }.expect("whole aligned pages")
    };
    assert_eq!(lend().segments(), runs + 1, "the adjacent three join");
    for name in BACKENDS {
        let Some((b, rx)) = backend(name, 2) else {
            continue;
        };
        let path = dir.join(format!("lent-{name}"));
        let file = Arc::new(open_direct(&path, true).unwrap());
        let at = 3 * PAGE_SIZE as u64;
        b.submit(IoOp {
            id: 1,
            file: Arc::clone(&file),
            write: true,
            offset: at,
            buf: IoBuf::Lent(lend()),
            len: order.len() * PAGE_SIZE,
            blocks: false,
        });
        let d = rx.recv_timeout(WAIT).expect("completion");
        assert_eq!(d.result.unwrap(), order.len() * PAGE_SIZE, "{name}");
        assert!(
            matches!(d.buf, IoBuf::Lent(_)),
            "{name}: the pages come back"
        );
        let back = std::fs::read(&path).unwrap();
        assert_eq!(back.len(), at as usize + order.len() * PAGE_SIZE);
        for (k, &p) in order.iter().enumerate() {
            let got = &back[at as usize + k * PAGE_SIZE..][..PAGE_SIZE];
            assert!(
                got == &memory.as_slice()[p * PAGE_SIZE..][..PAGE_SIZE],
                "{name}: page {k} of the write holds memory page {p}"
            );
        }
        b.submit(IoOp {
            id: 2,
            file: Arc::clone(&file),
            write: false,
            offset: 0,
            buf: IoBuf::Lent(lend()),
            len: order.len() * PAGE_SIZE,
            blocks: false,
        });
        let d = rx.recv_timeout(WAIT).expect("completion");
        let e = d.result.expect_err("a read into lent pages is refused");
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{name}: {e}");
        assert!(e.to_string().contains("only writes may lend pages"), "{e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn short_read_at_eof_zero_fills() {
    let Some(dir) = test_dir("eof") else {
        return;
    };
    for name in BACKENDS {
        let Some((b, rx)) = backend(name, 2) else {
            continue;
        };
        let path = dir.join(format!("short-{name}"));
        let size = PAGE_SIZE + 100;
        let data = pattern(7, size);
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&data)
            .unwrap();
        let file = Arc::new(open_direct(&path, false).unwrap());

        let dirty = |len| {
            let mut buf = AlignedBuf::new(len);
            buf.as_mut_slice().fill(0xFF);
            buf
        };
        b.submit(op(1, &file, false, 0, dirty(4 * PAGE_SIZE)));
        b.submit(op(2, &file, false, PAGE_SIZE as u64, dirty(2 * PAGE_SIZE)));
        b.submit(op(3, &file, false, 8 * PAGE_SIZE as u64, dirty(PAGE_SIZE)));
        let done = collect(&rx, 3);

        let d = &done[&1];
        assert_eq!(*d.result.as_ref().unwrap(), size, "{name}");
        assert_eq!(&bytes(&d.buf)[..size], &data[..], "{name}");
        assert!(bytes(&d.buf)[size..].iter().all(|&x| x == 0), "{name}");

        let d = &done[&2];
        assert_eq!(*d.result.as_ref().unwrap(), 100, "{name}");
        assert_eq!(&bytes(&d.buf)[..100], &data[PAGE_SIZE..], "{name}");
        assert!(bytes(&d.buf)[100..].iter().all(|&x| x == 0), "{name}");

        let d = &done[&3];
        assert_eq!(*d.result.as_ref().unwrap(), 0, "{name}");
        assert!(bytes(&d.buf).iter().all(|&x| x == 0), "{name}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn write_to_read_only_file_fails_on_completion() {
    let Some(dir) = test_dir("rdonly") else {
        return;
    };
    let path = dir.join("ro");
    std::fs::write(&path, vec![1u8; PAGE_SIZE]).unwrap();
    for name in BACKENDS {
        let Some((b, rx)) = backend(name, 1) else {
            continue;
        };
        let file = Arc::new(
            OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECT)
                .open(&path)
                .unwrap(),
        );
        b.submit(op(9, &file, true, 0, AlignedBuf::new(PAGE_SIZE)));
        let d = rx.recv_timeout(WAIT).unwrap();
        assert_eq!(d.id, 9);
        let e = d.result.expect_err("write to read-only fd must fail");
        assert_eq!(e.raw_os_error(), Some(libc::EBADF), "{name}: {e}");
        // The backend is still usable afterwards.
        b.submit(op(10, &file, false, 0, AlignedBuf::new(PAGE_SIZE)));
        let d = rx.recv_timeout(WAIT).unwrap();
        assert_eq!(d.result.unwrap(), PAGE_SIZE, "{name}");
        assert!(bytes(&d.buf).iter().all(|&x| x == 1));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// More ops than the queue bound plus the ring size, submitted without
/// consuming completions: submit may block, but must not deadlock.
#[test]
fn many_small_ops_beyond_queue_bound() {
    const OPS: u64 = 3000;
    let Some(dir) = test_dir("many") else {
        return;
    };
    for name in BACKENDS {
        let Some((b, rx)) = backend(name, 4) else {
            continue;
        };
        let file = Arc::new(open_direct(&dir.join(format!("many-{name}")), true).unwrap());
        for i in 0..OPS {
            let mut buf = AlignedBuf::new(PAGE_SIZE);
            buf.as_mut_slice()[..8].copy_from_slice(&i.to_le_bytes());
            b.submit(op(i, &file, true, i * PAGE_SIZE as u64, buf));
        }
        for (_, d) in collect(&rx, OPS as usize) {
            assert_eq!(d.result.unwrap(), PAGE_SIZE, "{name}");
        }
        let on_disk = std::fs::read(dir.join(format!("many-{name}"))).unwrap();
        for i in 0..OPS as usize {
            let at = i * PAGE_SIZE;
            assert_eq!(on_disk[at..at + 8], (i as u64).to_le_bytes(), "{name}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Dropping the backend right after submitting still completes every op.
#[test]
fn drop_completes_submitted_ops() {
    const OPS: u64 = 200;
    let Some(dir) = test_dir("drop") else {
        return;
    };
    for name in BACKENDS {
        let Some((b, rx)) = backend(name, 2) else {
            continue;
        };
        let file = Arc::new(open_direct(&dir.join(format!("drop-{name}")), true).unwrap());
        for i in 0..OPS {
            b.submit(op(i, &file, true, i * 65536, AlignedBuf::new(65536)));
        }
        drop(b);
        let done = collect(&rx, OPS as usize);
        assert!(done.values().all(|d| d.result.is_ok()), "{name}");
        // All senders are gone once the backend's threads have exited.
        assert!(matches!(
            rx.recv_timeout(Duration::from_secs(5)),
            Err(mpsc::RecvTimeoutError::Disconnected)
        ));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn uring_rejects_reserved_id() {
    let Some(dir) = test_dir("reserved") else {
        return;
    };
    let Some((b, rx)) = backend("io_uring", 1) else {
        return;
    };
    let file = Arc::new(open_direct(&dir.join("f"), true).unwrap());
    b.submit(op(u64::MAX, &file, true, 0, AlignedBuf::new(PAGE_SIZE)));
    let d = rx.recv_timeout(WAIT).unwrap();
    assert_eq!(d.id, u64::MAX);
    assert_eq!(
        d.result.unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn backend_selection() {
    let (tx, _rx) = mpsc::channel();
    let b = open_backend(tx.clone(), 2);
    eprintln!("open_backend picked {}", b.name());
    assert!(BACKENDS.contains(&b.name()));
    assert_eq!(
        b.name(),
        writeback::io::default_backend_name(),
        "open_backend and default_backend_name disagree"
    );
    let e = backend_by_name("nope", tx.clone(), 1).err().unwrap();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert_eq!(backend_by_name("threads", tx, 1).unwrap().name(), "threads");
}

#[test]
fn calibration_measures_then_remembers() {
    let Some(dir) = test_dir("calibrate") else {
        return;
    };
    let data_dir = dir.join("data"); // does not exist yet: calibrate creates it
    let t = Instant::now();
    let p = calibrate(&dir, &data_dir, Duration::from_secs(2)).unwrap();
    let took = t.elapsed();
    eprintln!(
        "calibration in {took:?}: read latency {} ns, write bw {} bytes/s ({:.1} MB/s), backend {}",
        p.idle_read_latency_ns,
        p.write_bw_bytes_s,
        p.write_bw_bytes_s as f64 / 1e6,
        p.backend
    );
    assert_eq!(p.st_dev, device_id(&dir).unwrap());
    assert!(p.idle_read_latency_ns > 0 && p.idle_read_latency_ns < 1_000_000_000);
    assert!(p.write_bw_bytes_s > 1_000_000);
    assert!(BACKENDS.contains(&p.backend.as_str()));
    assert!(data_dir.join(CALIBRATION_FILE).is_file());
    // The measurement file was removed.
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with(".wb-calibrate"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    let t = Instant::now();
    let again = calibrate(&dir, &data_dir, Duration::from_secs(2)).unwrap();
    let took = t.elapsed();
    assert_eq!(again, p);
    assert!(
        took < Duration::from_millis(100),
        "remembered lookup took {took:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
