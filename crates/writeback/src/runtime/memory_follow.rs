//! Following memory pressure (`CacheBuilder::follow_memory_pressure`): a
//! thread of its own samples the memory where the process runs
//! (memory_sample.rs) as often as the engine asks (every 100 ms, 10 ms
//! near the limit: `Engine::memory_sample_interval_ns`), hands each sample to the
//! engine, which decides the budget (the engine's memory_pressure/) and
//! trims the cache to it, and then gives the freed frames' memory back to
//! the system at once, a batch per hold of the cache's lock
//! (`Core::give_back_memory`). No policy here: it samples and applies.
//!
//! Promptness: besides the interval, a PSI trigger on the PSI file the
//! sample reads (`PSI_TRIGGER`: some task stalled 50 ms within 500 ms)
//! wakes the thread for a sample at once where the kernel lets us set one
//! (root, or CAP_SYS_RESOURCE; an unprivileged trigger needs a window of
//! whole 2 s). Memory is given back before each sample as well as after
//! the decision, so a sample sees what the cache freed since (dirty pages
//! written back meanwhile) as free, not as taken by someone else.

use super::memory_sample::Sampler;
use super::shared::Shared;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The PSI trigger: a wake-up when some task stalled on memory 50 ms
/// within 500 ms (the shortest window the kernel takes), a tenth of the
/// time.
const PSI_TRIGGER: &[u8] = b"some 50000 500000\0";

/// The thread's loop; ends when the cache closes.
pub(crate) fn follow_loop(shared: &Shared) {
    let sampler = Sampler::new();
    let mut trigger: Option<(PathBuf, Option<File>)> = None;
    let mut failed = false;
    while !shared.closed.load(Ordering::Acquire) {
        give_back(shared);
        match sampler.sample() {
            Ok((sample, psi_file)) => {
                failed = false;
                shared.report(|core, now| {
                    core.engine.note_memory_sample(now, &sample);
                });
                if trigger.as_ref().is_none_or(|(path, _)| *path != psi_file) {
                    let fd = psi_trigger(&psi_file);
                    trigger = Some((psi_file, fd));
                }
            }
            Err(e) if !failed => {
                // Said once: the budget stays where it is until sampling works.
                eprintln!("writeback: sampling memory for the cache's budget failed: {e}");
                failed = true;
            }
            Err(_) => {}
        }
        give_back(shared);
        let interval = Duration::from_nanos(shared.lock().engine.memory_sample_interval_ns());
        wait(trigger.as_ref().and_then(|(_, fd)| fd.as_ref()), interval);
    }
}

/// Gives free frames' memory back until the sweep is done, releasing the
/// cache's lock between batches.
fn give_back(shared: &Shared) {
    while shared.lock().give_back_memory() {
        if shared.closed.load(Ordering::Acquire) {
            return;
        }
    }
}

/// A PSI trigger on `path`, if the kernel takes one.
fn psi_trigger(path: &Path) -> Option<File> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    file.write_all(PSI_TRIGGER).ok()?;
    Some(file)
}

/// Waits `interval`, or less if the PSI trigger fires.
fn wait(trigger: Option<&File>, interval: Duration) {
    let Some(file) = trigger else {
        std::thread::sleep(interval);
        return;
    };
    let mut fds = libc::pollfd {
        fd: file.as_raw_fd(),
        events: libc::POLLPRI,
        revents: 0,
    };
    let timeout_ms = libc::c_int::try_from(interval.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one pollfd, valid for the call (a local), for a descriptor
    // `file` keeps open throughout.
    let rc = unsafe { libc::poll(&mut fds, 1, timeout_ms) };
    if rc < 0 || fds.revents & (libc::POLLERR | libc::POLLNVAL) != 0 {
        // The trigger is gone (its cgroup removed): wait plainly.
        std::thread::sleep(interval);
    }
}
