//! Thread-pool backend: `workers` threads doing blocking `pread`/`pwrite`
//! (`pwritev` for lent pages) from one bounded queue of [`QUEUE_DEPTH`] ops,
//! each as it comes (the order of a file's writes that make it longer is
//! the engine's: `extending_writes`).

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
        let workers = (0..workers.max(1))
            .map(|i| {
                let rx = Arc::clone(&rx);
                let done = completions.clone();
                std::thread::Builder::new()
                    .name(format!("wb-io-{i}"))
                    .spawn(move || worker(&rx, &done))
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

fn worker(rx: &Mutex<Receiver<IoOp>>, done: &Sender<IoDone>) {
    loop {
        // Hold the lock only while taking the next op, not during I/O.
        let taken = rx
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .recv();
        let Ok(op) = taken else {
            return; // sender dropped and queue drained: shutdown
        };
        if !op.write {
            // Reads as a caller would do them (`read_now`).
            if let Ok(completion) = read_now(op) {
                send_done(done, completion);
            }
            continue;
        }
        let result = tail::write_blocking(&op);
        send_done(
            done,
            IoDone {
                id: op.id,
                buf: op.buf,
                result,
            },
        );
    }
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
