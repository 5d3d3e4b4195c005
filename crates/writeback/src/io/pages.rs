//! What an op transfers: a buffer of its own ([`AlignedBuf`]), or pages
//! lent by their owner for a write ([`IoPages`]: the cache's frames, so
//! that writeback copies nothing).
//!
//! A lent page is read by the kernel while the op is in flight, with no
//! lock held: the owner decides whether anyone may write to it meanwhile.
//! The cache lets a writer do so only where the device does not need
//! stable pages (`stable_writes = none`): the write then carries a mix of
//! old and new bytes, and the page, dirtied again, is written once more.

use std::sync::Arc;

use super::aligned::{AlignedBuf, PAGE_SIZE};

/// Largest number of segments handed to the kernel in one vectored call
/// (Linux's UIO_MAXIOV); longer lists are transferred in several calls.
pub const MAX_SEGMENTS: usize = 1024;

/// Page-aligned runs of memory lent to a write op, with the owner that
/// keeps them allocated until the op has completed.
#[derive(Clone)]
pub struct IoPages {
    /// (address, length): address page-aligned, length a multiple of
    /// PAGE_SIZE, never 0.
    segments: Vec<(usize, usize)>,
    len: usize,
    _owner: Arc<dyn Send + Sync>,
}

impl std::fmt::Debug for IoPages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IoPages")
            .field("segments", &self.segments.len())
            .field("len", &self.len)
            .finish()
    }
}

impl IoPages {
    /// Lends `segments` (address, length) of memory kept allocated by
    /// `owner`; adjacent segments are joined. None if there is no segment,
    /// or one is empty, not page-aligned or not a whole number of pages.
    ///
    /// # Safety
    /// Each segment must be memory that stays allocated and readable for
    /// as long as `owner` (or a clone of this value) lives. The kernel
    /// reads it while the op is in flight without any lock: bytes written
    /// meanwhile may or may not be in the write.
    pub unsafe fn new(
        owner: Arc<dyn Send + Sync>,
        segments: impl IntoIterator<Item = (*const u8, usize)>,
    ) -> Option<IoPages> {
        let mut joined: Vec<(usize, usize)> = Vec::new();
        let mut len = 0usize;
        for (ptr, n) in segments {
            let at = ptr as usize;
            if n == 0 || at % PAGE_SIZE != 0 || n % PAGE_SIZE != 0 {
                return None;
            }
            len = len.checked_add(n)?;
            match joined.last_mut() {
                Some((start, run)) if *start + *run == at => *run += n,
                _ => joined.push((at, n)),
            }
        }
        (len > 0).then_some(IoPages {
            segments: joined,
            len,
            _owner: owner,
        })
    }

    /// Bytes lent: a multiple of PAGE_SIZE.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: at least one page is lent.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Runs of memory after joining adjacent ones.
    pub fn segments(&self) -> usize {
        self.segments.len()
    }

    /// The iovecs of the bytes from `done` on: at most [`MAX_SEGMENTS`] of
    /// them and at most `max_bytes` (at least one byte is asked for).
    /// The pointers are valid while `self` lives (see [`IoPages::new`]).
    pub(crate) fn iovecs_from(&self, done: usize, max_bytes: usize) -> Vec<libc::iovec> {
        let mut out = Vec::new();
        let mut skip = done;
        let mut room = max_bytes;
        for &(at, n) in &self.segments {
            if skip >= n {
                skip -= n;
                continue;
            }
            let take = (n - skip).min(room);
            out.push(libc::iovec {
                iov_base: (at + skip) as *mut libc::c_void,
                iov_len: take,
            });
            skip = 0;
            room -= take;
            if room == 0 || out.len() == MAX_SEGMENTS {
                break;
            }
        }
        out
    }
}

/// The memory of an op.
#[derive(Debug)]
pub enum IoBuf {
    /// A buffer the op owns: written from, or read into.
    Owned(AlignedBuf),
    /// Pages lent for a write (only writes may lend pages).
    Lent(IoPages),
}

impl IoBuf {
    /// Bytes transferred by the op.
    pub fn len(&self) -> usize {
        match self {
            IoBuf::Owned(b) => b.len(),
            IoBuf::Lent(p) => p.len(),
        }
    }

    /// Always false: an op transfers at least one page.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The owned buffer, if the op had one.
    pub fn owned(&self) -> Option<&AlignedBuf> {
        match self {
            IoBuf::Owned(b) => Some(b),
            IoBuf::Lent(_) => None,
        }
    }

    /// The owned buffer, if the op had one, by value.
    pub fn into_owned(self) -> Option<AlignedBuf> {
        match self {
            IoBuf::Owned(b) => Some(b),
            IoBuf::Lent(_) => None,
        }
    }
}

impl From<AlignedBuf> for IoBuf {
    fn from(buf: AlignedBuf) -> IoBuf {
        IoBuf::Owned(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lend(buf: &Arc<AlignedBuf>, pages: &[usize]) -> Option<IoPages> {
        let base = buf.as_ptr();
        let owner: Arc<dyn Send + Sync> = buf.clone();
        // SAFETY: every segment lies inside `buf`, which `owner` keeps alive.
        unsafe {
            IoPages::new(
                owner,
                pages
                    .iter()
                    .map(|&p| (base.wrapping_add(p * PAGE_SIZE), PAGE_SIZE)),
            )
        }
    }

    #[test]
    fn adjacent_pages_join_and_iovecs_resume_anywhere() {
        let buf = Arc::new(AlignedBuf::new(8 * PAGE_SIZE));
        let base = buf.as_ptr() as usize;
        let pages = lend(&buf, &[2, 3, 4, 0, 6]).unwrap();
        assert_eq!((pages.len(), pages.segments()), (5 * PAGE_SIZE, 3));
        let all = pages.iovecs_from(0, usize::MAX);
        let got: Vec<(usize, usize)> = all
            .iter()
            .map(|v| (v.iov_base as usize - base, v.iov_len))
            .collect();
        let p = PAGE_SIZE;
        assert_eq!(got, [(2 * p, 3 * p), (0, p), (6 * p, p)]);
        // From inside the first run, at most 2 pages.
        let got: Vec<(usize, usize)> = pages
            .iovecs_from(p + 512, 2 * p)
            .iter()
            .map(|v| (v.iov_base as usize - base, v.iov_len))
            .collect();
        assert_eq!(got, [(3 * p + 512, 2 * p - 512), (0, 512)]);
        assert!(pages.iovecs_from(5 * p, usize::MAX).is_empty());
    }

    #[test]
    fn misaligned_or_empty_segments_are_refused() {
        let buf = Arc::new(AlignedBuf::new(2 * PAGE_SIZE));
        let owner: Arc<dyn Send + Sync> = buf.clone();
        let base = buf.as_ptr();
        // SAFETY: inside `buf` (none is used: each is refused).
        unsafe {
            assert!(IoPages::new(owner.clone(), [(base.wrapping_add(1), PAGE_SIZE)]).is_none());
            assert!(IoPages::new(owner.clone(), [(base, 100)]).is_none());
            assert!(IoPages::new(owner.clone(), [(base, 0)]).is_none());
            assert!(IoPages::new(owner, std::iter::empty()).is_none());
        }
    }

    #[test]
    fn at_most_max_segments_per_call() {
        let buf = Arc::new(AlignedBuf::new((2 * MAX_SEGMENTS + 2) * PAGE_SIZE));
        // Every other page: nothing joins.
        let idx: Vec<usize> = (0..MAX_SEGMENTS + 1).map(|i| 2 * i).collect();
        let pages = lend(&buf, &idx).unwrap();
        assert_eq!(pages.iovecs_from(0, usize::MAX).len(), MAX_SEGMENTS);
        let rest = pages.iovecs_from(MAX_SEGMENTS * PAGE_SIZE, usize::MAX);
        assert_eq!(rest.len(), 1);
    }
}
