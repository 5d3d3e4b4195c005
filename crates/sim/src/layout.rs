//! Where files live on a simulated device: each file gets a contiguous
//! extent, allocated in creation order, aligned to 1 MiB (as a fresh
//! filesystem would place sequentially written files).

/// Extent alignment.
pub const EXTENT_ALIGN: u64 = 1 << 20;

#[derive(Clone, Debug, Default)]
pub struct Layout {
    next: u64,
}

impl Layout {
    /// Allocates `bytes` (at least one page) and returns the extent's start,
    /// or None if the device is full.
    pub fn allocate(&mut self, bytes: u64, capacity: u64) -> Option<u64> {
        let start = self.next;
        let len = bytes
            .max(4096)
            .div_ceil(EXTENT_ALIGN)
            .checked_mul(EXTENT_ALIGN)?;
        let end = start.checked_add(len)?;
        if end > capacity {
            return None;
        }
        self.next = end;
        Some(start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extents_are_aligned_and_bounded() {
        let mut l = Layout::default();
        assert_eq!(l.allocate(10, 4 << 20), Some(0));
        assert_eq!(l.allocate(1 << 20, 4 << 20), Some(1 << 20));
        assert_eq!(l.allocate(3 << 20, 4 << 20), None);
        assert_eq!(l.allocate(2 << 20, 4 << 20), Some(2 << 20));
        assert_eq!(l.allocate(u64::MAX, u64::MAX), None, "no wrap to nothing");
    }
}
