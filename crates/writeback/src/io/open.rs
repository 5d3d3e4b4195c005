//! Which backend serves: io_uring when the kernel allows it, else a
//! pool of threads.

use super::backend::{IoBackend, IoDone};
use super::{threads, uring};
use std::io;
use std::sync::mpsc::Sender;

/// Opens the best backend available: io_uring if a ring can be created and
/// supports the needed opcodes, else a pool of `workers` threads (at least
/// one). Prints the reason to stderr only when it falls back.
///
/// `workers` is used only by the thread-pool backend.
pub fn open_backend(completions: Sender<IoDone>, workers: usize) -> Box<dyn IoBackend> {
    match uring::UringBackend::new(completions.clone()) {
        Ok(b) => Box::new(b),
        Err(e) => {
            eprintln!(
                "writeback: io_uring unavailable ({e}); falling back to {workers} I/O threads"
            );
            Box::new(threads::ThreadBackend::new(completions, workers))
        }
    }
}

/// Opens the backend called `name`: `"io_uring"` (alias `"uring"`),
/// `"threads"`, or `"auto"` (same as [`open_backend`]). Unlike
/// [`open_backend`], a failure to set up io_uring is returned as an error.
pub fn backend_by_name(
    name: &str,
    completions: Sender<IoDone>,
    workers: usize,
) -> io::Result<Box<dyn IoBackend>> {
    match name {
        "io_uring" | "uring" => Ok(Box::new(uring::UringBackend::new(completions)?)),
        "threads" => Ok(Box::new(threads::ThreadBackend::new(completions, workers))),
        "auto" => Ok(open_backend(completions, workers)),
        other => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("unknown I/O backend {other:?} (expected io_uring, threads or auto)"),
        )),
    }
}

/// The name of the backend [`open_backend`] would pick on this machine,
/// without starting it (and without printing anything).
pub fn default_backend_name() -> &'static str {
    if uring::probe().is_ok() {
        "io_uring"
    } else {
        "threads"
    }
}
