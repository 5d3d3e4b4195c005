//! A bounded pool of finished I/O buffers, reused for later ops of any
//! length up to their capacity.
//!
//! A fresh [`AlignedBuf`] costs an allocation and a zeroing pass, and when
//! the allocator hands back memory it had returned to the kernel, a page
//! fault and the kernel's zeroing of every page as well. Ops come in
//! several lengths (the engine's requests vary with the writeback chunk and
//! the device's `max_sectors_kb`), so a pool matching lengths exactly
//! misses whenever the mix shifts; this one serves a request from the
//! smallest spare buffer that is large enough, setting its length
//! ([`AlignedBuf::set_len`]) within its allocation.
//!
//! The pool only holds buffers it was given back, by value: a buffer owned
//! by an op in flight is in that op (or in the backend), never here, so it
//! cannot be handed out twice. Reused buffers hold old bytes: a write
//! overwrites its whole length before it is submitted, and a read is filled
//! by the device, the backends zeroing the tail after a short read (see
//! [`crate::io::backend`]), so no stale byte reaches the cache.

use super::aligned::AlignedBuf;

/// Spare buffers, by capacity ascending, within a byte and a count bound.
#[derive(Debug)]
pub struct BufPool {
    /// Sorted by capacity, ascending.
    spare: Vec<AlignedBuf>,
    /// Sum of the capacities in `spare`.
    bytes: usize,
    max_bytes: usize,
    max_count: usize,
}

impl BufPool {
    /// An empty pool keeping at most `max_bytes` of capacity in at most
    /// `max_count` buffers.
    pub fn new(max_bytes: usize, max_count: usize) -> BufPool {
        BufPool {
            spare: Vec::new(),
            bytes: 0,
            max_bytes,
            max_count,
        }
    }

    /// A buffer of length `len` (rounded up to whole pages): the smallest
    /// spare one large enough, its length set to `len`, else a new zeroed one.
    pub fn take(&mut self, len: usize) -> AlignedBuf {
        let at = self.spare.partition_point(|b| b.capacity() < len);
        if at == self.spare.len() {
            return AlignedBuf::new(len);
        }
        let mut buf = self.spare.remove(at);
        self.bytes -= buf.capacity();
        buf.set_len(len);
        buf
    }

    /// Gives back a buffer no op uses any more. If the pool is then over a
    /// bound, its smallest buffers are freed until it is within it (the
    /// larger ones serve more requests).
    pub fn give(&mut self, buf: AlignedBuf) {
        let cap = buf.capacity();
        if cap > self.max_bytes || self.max_count == 0 {
            return;
        }
        let at = self.spare.partition_point(|b| b.capacity() < cap);
        self.spare.insert(at, buf);
        self.bytes += cap;
        let mut excess = 0;
        let mut bytes = self.bytes;
        while bytes > self.max_bytes || self.spare.len() - excess > self.max_count {
            bytes -= self.spare[excess].capacity();
            excess += 1;
        }
        self.spare.drain(..excess);
        self.bytes = bytes;
    }

    /// Bytes of capacity held.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Buffers held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.spare.len()
    }

    /// Whether no buffer is held.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.spare.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::PAGE_SIZE;

    const P: usize = PAGE_SIZE;

    #[test]
    fn reuses_the_smallest_buffer_large_enough() {
        let mut pool = BufPool::new(1 << 20, 8);
        let big = AlignedBuf::new(128 * P);
        let small = AlignedBuf::new(16 * P);
        let (big_at, small_at) = (big.as_ptr(), small.as_ptr());
        pool.give(big);
        pool.give(small);
        assert_eq!((pool.len(), pool.bytes()), (2, 144 * P));

        // 10 pages fit both: the smaller is taken, its length set.
        let a = pool.take(10 * P - 1);
        assert_eq!(a.as_ptr(), small_at);
        assert_eq!((a.len(), a.capacity()), (10 * P, 16 * P));
        // 64 pages fit only the big one.
        let b = pool.take(64 * P);
        assert_eq!(b.as_ptr(), big_at);
        assert_eq!((b.len(), b.capacity()), (64 * P, 128 * P));
        assert!(pool.is_empty());
        assert_eq!(pool.bytes(), 0);
        // Nothing left: a new buffer of exactly the length.
        let c = pool.take(3 * P);
        assert_eq!((c.len(), c.capacity()), (3 * P, 3 * P));
        assert!(c.as_slice().iter().all(|&x| x == 0));

        // Given back at its reduced length, the whole capacity serves again.
        pool.give(b);
        let d = pool.take(128 * P);
        assert_eq!(d.as_ptr(), big_at);
        assert_eq!(d.len(), 128 * P);
    }

    #[test]
    fn a_request_larger_than_every_spare_allocates() {
        let mut pool = BufPool::new(1 << 20, 8);
        pool.give(AlignedBuf::new(4 * P));
        let b = pool.take(5 * P);
        assert_eq!(b.capacity(), 5 * P);
        assert_eq!(pool.len(), 1, "the small spare stays");
    }

    #[test]
    fn stays_within_its_byte_bound_keeping_the_largest() {
        let mut pool = BufPool::new(40 * P, 100);
        for pages in [8, 16, 8, 4] {
            pool.give(AlignedBuf::new(pages * P));
        }
        assert_eq!((pool.len(), pool.bytes()), (4, 36 * P));
        // 36 + 16 > 40: the smallest go first (4, then 8) until it fits.
        pool.give(AlignedBuf::new(16 * P));
        assert_eq!((pool.len(), pool.bytes()), (3, 40 * P));
        let caps: Vec<usize> = (0..3).map(|_| pool.take(P).capacity() / P).collect();
        assert_eq!(caps, [8, 16, 16]);
        // A buffer larger than the whole bound is not kept.
        pool.give(AlignedBuf::new(41 * P));
        assert!(pool.is_empty());
        assert_eq!(pool.bytes(), 0);
    }

    #[test]
    fn stays_within_its_count_bound() {
        let mut pool = BufPool::new(1 << 30, 3);
        for pages in [1, 2, 3, 4, 5] {
            pool.give(AlignedBuf::new(pages * P));
        }
        assert_eq!((pool.len(), pool.bytes()), (3, 12 * P));
        assert_eq!(pool.take(P).capacity(), 3 * P);
        let mut none = BufPool::new(1 << 30, 0);
        none.give(AlignedBuf::new(P));
        assert!(none.is_empty());
    }
}
