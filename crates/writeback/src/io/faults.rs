//! The fault seam (redb style): a backend wrapper that fails chosen
//! writes, so that tests can show what a write-back error does to the
//! cache, the library's callers and the mount's.
//!
//! [`Faults`] is a set of rules, shared with the test that arms them: the
//! next `count` writes to the file with backing (st_dev, st_ino) fail with
//! `errno`, completed at once without reaching the file. A cache built
//! with [`crate::CacheBuilder::faults`] sends every op through
//! [`FaultyBackend`]; one built without it has no seam at all.

use super::backend::{IoBackend, IoDone, IoOp};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

/// Most rules armed at once (a limit on everything).
const MAX_RULES: usize = 1024;

#[derive(Clone, Copy, Debug)]
struct Rule {
    key: (u64, u64),
    errno: i32,
    left: u32,
}

/// Write errors to inject; clones share the rules.
#[derive(Clone, Debug, Default)]
pub struct Faults(Arc<Mutex<Vec<Rule>>>);

impl Faults {
    pub fn new() -> Faults {
        Faults::default()
    }

    fn rules(&self) -> std::sync::MutexGuard<'_, Vec<Rule>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next `count` writes to the file at `path` fail with `errno`.
    pub fn fail_writes(&self, path: &Path, errno: i32, count: u32) -> io::Result<()> {
        let meta = std::fs::metadata(path)?;
        self.fail_writes_to((meta.dev(), meta.ino()), errno, count)
    }

    /// The next `count` writes to the file with backing (st_dev, st_ino)
    /// `key` fail with `errno` (replacing a rule for the same file).
    pub fn fail_writes_to(&self, key: (u64, u64), errno: i32, count: u32) -> io::Result<()> {
        let mut rules = self.rules();
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

    /// Disarms every rule.
    pub fn clear(&self) {
        self.rules().clear();
    }

    /// Failures injected so far are counted down; how many are left.
    pub fn armed(&self) -> u64 {
        self.rules().iter().map(|r| u64::from(r.left)).sum()
    }

    /// The error for a write to `file`, if a rule wants one (counted).
    fn take_write(&self, file: &std::fs::File) -> Option<i32> {
        let mut rules = self.rules();
        if rules.is_empty() {
            return None;
        }
        let meta = file.metadata().ok()?;
        let key = (meta.dev(), meta.ino());
        let at = rules.iter().position(|r| r.key == key)?;
        let errno = rules[at].errno;
        rules[at].left -= 1;
        if rules[at].left == 0 {
            rules.swap_remove(at);
        }
        Some(errno)
    }
}

/// A backend that fails the writes [`Faults`] asks for and passes the
/// rest to the real one.
pub(crate) struct FaultyBackend {
    inner: Box<dyn IoBackend>,
    faults: Faults,
    completions: Sender<IoDone>,
}

impl FaultyBackend {
    pub fn new(inner: Box<dyn IoBackend>, faults: Faults, completions: Sender<IoDone>) -> Self {
        FaultyBackend {
            inner,
            faults,
            completions,
        }
    }
}

impl IoBackend for FaultyBackend {
    fn submit(&self, op: IoOp) {
        if op.write {
            if let Some(errno) = self.faults.take_write(&op.file) {
                // Exactly one completion per op, as the real backends; the
                // receiver gone means the cache is closing.
                let _ = self.completions.send(IoDone {
                    id: op.id,
                    buf: op.buf,
                    result: Err(io::Error::from_raw_os_error(errno)),
                });
                return;
            }
        }
        self.inner.submit(op);
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
