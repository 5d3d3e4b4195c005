//! Thread-pool backend: `workers` threads doing blocking `pread`/`pwrite`
//! (`pwritev` for lent pages) from one bounded queue of [`QUEUE_DEPTH`] ops.

use std::collections::{HashMap, VecDeque};
use std::os::unix::fs::MetadataExt;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::backend::{enqueue, send_done, IoBackend, IoDone, IoOp, QUEUE_DEPTH};
use super::on_caller::read_now;
use super::tail;

/// Blocking-syscall backend, named `"threads"`.
pub struct ThreadBackend {
    queue: Option<SyncSender<IoOp>>,
    workers: Vec<JoinHandle<()>>,
    completions: Sender<IoDone>,
}

impl ThreadBackend {
    /// Starts `workers` threads (at least one).
    ///
    /// # Panics
    /// Panics if the OS refuses to spawn a thread.
    pub fn new(completions: Sender<IoDone>, workers: usize) -> Self {
        let (tx, rx) = mpsc::sync_channel::<IoOp>(QUEUE_DEPTH);
        let rx = Arc::new(Mutex::new(rx));
        let growing = Arc::new(Growing::default());
        let workers = (0..workers.max(1))
            .map(|i| {
                let rx = Arc::clone(&rx);
                let growing = Arc::clone(&growing);
                let done = completions.clone();
                std::thread::Builder::new()
                    .name(format!("wb-io-{i}"))
                    .spawn(move || worker(&rx, &growing, &done))
                    .expect("spawn I/O worker thread")
            })
            .collect();
        Self {
            queue: Some(tx),
            workers,
            completions,
        }
    }
}

fn worker(rx: &Mutex<Receiver<IoOp>>, growing: &Growing, done: &Sender<IoDone>) {
    loop {
        // Hold the lock only while taking the next op (and queueing it
        // behind a write that makes its file longer: in the order taken),
        // not during I/O.
        let taken = {
            let rx = rx.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            match rx.recv() {
                Ok(op) if !op.write => Taken::Read(op),
                Ok(op) => growing.admit(op),
                Err(_) => return, // sender dropped and queue drained: shutdown
            }
        };
        let mut next = match taken {
            // Reads as a caller would do them (`read_now`).
            Taken::Read(op) => {
                if let Ok(completion) = read_now(op) {
                    send_done(done, completion);
                }
                continue;
            }
            Taken::Held => continue,
            Taken::Write(op, key) => Some((op, key)),
        };
        // Then the writes that waited behind it, if it made its file longer.
        while let Some((op, key)) = next.take() {
            let result = tail::write_blocking(&op);
            send_done(
                done,
                IoDone {
                    id: op.id,
                    buf: op.buf,
                    result,
                },
            );
            next = key.and_then(|key| growing.done(key).map(|op| (op, Some(key))));
        }
    }
}

/// What a worker took off the queue.
enum Taken {
    Read(IoOp),
    /// A write to perform now, with its file if it makes it longer.
    Write(IoOp, Option<FileKey>),
    /// A write queued behind one making its file longer.
    Held,
}

/// A file's (st_dev, st_ino).
type FileKey = (u64, u64);

/// Writes that make a file longer go one at a time per file, in the order
/// taken off the queue (why: the io_uring backend's `Serial`).
#[derive(Default)]
struct Growing(Mutex<HashMap<FileKey, VecDeque<IoOp>>>);

impl Growing {
    /// Takes write `op`: to perform now, or held behind the write making
    /// its file longer in flight.
    fn admit(&self, op: IoOp) -> Taken {
        let Some(key) = grows(&op) else {
            return Taken::Write(op, None);
        };
        let mut busy = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match busy.get_mut(&key) {
            Some(waiting) => {
                waiting.push_back(op);
                Taken::Held
            }
            None => {
                busy.insert(key, VecDeque::new());
                Taken::Write(op, Some(key))
            }
        }
    }

    /// The write making `key` longer is done: the next one waiting (the
    /// file stays busy for it), or None (the file is free).
    fn done(&self, key: FileKey) -> Option<IoOp> {
        let mut busy = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let next = busy.get_mut(&key).and_then(VecDeque::pop_front);
        if next.is_none() {
            busy.remove(&key);
        }
        next
    }
}

/// The file of write `op` if it ends past the file's size (None if that
/// cannot be told: the op just goes, and the kernel reports any error).
fn grows(op: &IoOp) -> Option<FileKey> {
    let meta = op.file.metadata().ok()?;
    let end = op.offset.saturating_add(op.len as u64);
    (end > meta.size()).then_some((meta.dev(), meta.ino()))
}

impl IoBackend for ThreadBackend {
    fn submit(&self, op: IoOp) {
        // `queue` is only taken in Drop, and workers only exit once it is
        // gone, so queueing fails only if every worker panicked.
        enqueue(
            self.queue.as_ref(),
            &self.completions,
            op,
            "I/O worker threads have exited",
        );
    }

    fn name(&self) -> &'static str {
        "threads"
    }

    fn read_on_caller(&self, op: IoOp) -> Result<IoDone, IoOp> {
        read_now(op)
    }

    fn writes_on_caller(&self, ops: Vec<IoOp>) -> (Vec<IoDone>, Vec<IoOp>) {
        // One after the other: this backend is chosen where io_uring is
        // not (or not wanted).
        super::on_caller::writes_now(ops, false)
    }
}

impl Drop for ThreadBackend {
    fn drop(&mut self) {
        // Closing the queue lets workers finish what is queued, then exit.
        self.queue = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}
