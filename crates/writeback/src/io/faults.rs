//! The fault seam (redb style): a backend wrapper that fails chosen
//! writes, so that tests can show what a write-back error does to the
//! cache, the library's callers and the mount's.
//!
//! [`Faults`] is a set of rules, shared with the test that arms them: the
//! next `count` writes to the file with backing (st_dev, st_ino) fail with
//! `errno`, completed at once without reaching the file. Writes to a file
//! can also be held (`hold_writes`): they wait in the seam, their pages
//! under writeback, until the test releases them (`release_held`), so a
//! test can act while write-back is in flight without racing it. A cache
//! built with [`crate::CacheBuilder::faults`] sends every op through
//! [`FaultyBackend`]; one built without it has no seam at all.

use super::backend::{IoBackend, IoDone, IoOp};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, Weak};

/// Most rules armed at once (a limit on everything).
const MAX_RULES: usize = 1024;
/// Most writes held at once: a test that holds more is broken.
const MAX_HELD: usize = 4096;

#[derive(Clone, Copy, Debug)]
struct Rule {
    key: (u64, u64),
    errno: i32,
    left: u32,
}

#[derive(Default)]
struct State {
    rules: Vec<Rule>,
    /// Files whose writes are held.
    holds: Vec<(u64, u64)>,
    held: Vec<IoOp>,
    /// Where released writes go (set when a cache is built with these
    /// faults). Weak: a test's `Faults` must not keep the backend, and
    /// with it the cache's completion channel, alive after the cache.
    backend: Option<Weak<dyn IoBackend>>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("rules", &self.rules)
            .field("holds", &self.holds)
            .field("held", &self.held.len())
            .finish()
    }
}

/// What becomes of a write through the seam.
enum Fate {
    /// Submitted to the real backend.
    Pass(IoOp),
    /// Completed at once with this errno, never reaching the file.
    Fail(IoOp, i32),
    /// Kept until `Faults::release_held`.
    Held,
}

/// Write errors and holds to inject; clones share them.
#[derive(Clone, Debug, Default)]
pub struct Faults(Arc<Mutex<State>>);

impl Faults {
    pub fn new() -> Faults {
        Faults::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes to the file at `path` wait in the seam, not submitted,
    /// until [`Faults::release_held`]: their pages stay under writeback.
    /// Release them before the cache is dropped (it waits for every write).
    pub fn hold_writes(&self, path: &Path) -> io::Result<()> {
        let meta = std::fs::metadata(path)?;
        let key = (meta.dev(), meta.ino());
        let mut state = self.state();
        if !state.holds.contains(&key) {
            state.holds.push(key);
        }
        Ok(())
    }

    /// How many writes are held now.
    pub fn held(&self) -> usize {
        self.state().held.len()
    }

    /// Stops holding writes and submits those held, in the order they came.
    pub fn release_held(&self) {
        let (ops, backend) = {
            let mut state = self.state();
            state.holds.clear();
            let backend = state.backend.as_ref().and_then(Weak::upgrade);
            (std::mem::take(&mut state.held), backend)
        };
        if let Some(backend) = backend {
            for op in ops {
                backend.submit(op);
            }
        }
    }

    /// The next `count` writes to the file at `path` fail with `errno`.
    pub fn fail_writes(&self, path: &Path, errno: i32, count: u32) -> io::Result<()> {
        let meta = std::fs::metadata(path)?;
        self.fail_writes_to((meta.dev(), meta.ino()), errno, count)
    }

    /// The next `count` writes to the file with backing (st_dev, st_ino)
    /// `key` fail with `errno` (replacing a rule for the same file).
    pub fn fail_writes_to(&self, key: (u64, u64), errno: i32, count: u32) -> io::Result<()> {
        let mut state = self.state();
        let rules = &mut state.rules;
        rules.retain(|r| r.key != key);
        if rules.len() >= MAX_RULES {
            return Err(io::Error::other(format!(
                "at most {MAX_RULES} fault rules at once"
            )));
        }
        if count > 0 {
            rules.push(Rule {
                key,
                errno,
                left: count,
            });
        }
        Ok(())
    }

    /// Disarms every failure rule (held writes stay held).
    pub fn clear(&self) {
        self.state().rules.clear();
    }

    /// Failures injected so far are counted down; how many are left.
    pub fn armed(&self) -> u64 {
        self.state().rules.iter().map(|r| u64::from(r.left)).sum()
    }

    /// What becomes of write `op` (a failure is counted; a held write is
    /// kept here).
    fn take_write(&self, op: IoOp) -> Fate {
        let mut state = self.state();
        if state.rules.is_empty() && state.holds.is_empty() {
            return Fate::Pass(op);
        }
        let Ok(meta) = op.file.metadata() else {
            return Fate::Pass(op);
        };
        let key = (meta.dev(), meta.ino());
        if let Some(at) = state.rules.iter().position(|r| r.key == key) {
            let errno = state.rules[at].errno;
            state.rules[at].left -= 1;
            if state.rules[at].left == 0 {
                state.rules.swap_remove(at);
            }
            return Fate::Fail(op, errno);
        }
        if state.holds.contains(&key) && state.held.len() < MAX_HELD {
            state.held.push(op);
            return Fate::Held;
        }
        Fate::Pass(op)
    }
}

/// A backend that fails the writes [`Faults`] asks for and passes the
/// rest to the real one.
pub(crate) struct FaultyBackend {
    inner: Arc<dyn IoBackend>,
    faults: Faults,
    completions: Sender<IoDone>,
}

impl FaultyBackend {
    pub fn new(inner: Box<dyn IoBackend>, faults: Faults, completions: Sender<IoDone>) -> Self {
        let inner: Arc<dyn IoBackend> = Arc::from(inner);
        faults.state().backend = Some(Arc::downgrade(&inner));
        FaultyBackend {
            inner,
            faults,
            completions,
        }
    }
}

impl IoBackend for FaultyBackend {
    fn submit(&self, op: IoOp) {
        if !op.write {
            return self.inner.submit(op);
        }
        match self.faults.take_write(op) {
            Fate::Pass(op) => self.inner.submit(op),
            Fate::Fail(op, errno) => {
                // Exactly one completion per op, as the real backends; the
                // receiver gone means the cache is closing.
                let _ = self.completions.send(IoDone {
                    id: op.id,
                    buf: op.buf,
                    result: Err(io::Error::from_raw_os_error(errno)),
                });
            }
            // `release_held` submits it.
            Fate::Held => {}
        }
    }

    fn name(&self) -> &'static str {
        self.inner.name()
    }

    /// Reads are not faulted. (Writes are never carried out on the
    /// caller here, `writes_on_caller`'s default: they go through the
    /// faults.)
    fn read_on_caller(&self, op: IoOp) -> Result<IoDone, IoOp> {
        self.inner.read_on_caller(op)
    }
}
