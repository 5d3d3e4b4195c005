//! Frame numbers: slots of the cache's memory, which the runtime owns and
//! the engine assigns to pages. Handed out in ranges, first fit over the
//! free ranges, which are joined again when freed: sequential writes and
//! reads get contiguous frames, so their runs stay whole and a page's
//! frame is arithmetic. Never more than the budget.

use std::collections::BTreeMap;

/// Frame numbers below the cache budget, handed out in ranges: first fit
/// over the free ranges, which are joined again when freed. Sequential
/// writes and reads get contiguous frames, so their runs stay whole.
#[derive(Clone, Debug)]
pub struct FrameSpace {
    /// Free ranges: first frame -> length.
    free: BTreeMap<u32, u32>,
    free_frames: u64,
}

impl FrameSpace {
    pub fn new(frames: u64) -> FrameSpace {
        assert!(frames > 0 && frames <= u32::MAX as u64);
        FrameSpace {
            free: BTreeMap::from([(0, frames as u32)]),
            free_frames: frames,
        }
    }

    pub fn free_frames(&self) -> u64 {
        self.free_frames
    }

    /// Takes up to `want` contiguous frames (at least one). Returns the
    /// first frame and how many.
    pub fn alloc(&mut self, want: u64) -> Option<(u32, u64)> {
        assert!(want > 0);
        let (&first, &len) = self.free.iter().next()?;
        let n = (len as u64).min(want) as u32;
        self.free.remove(&first);
        if n < len {
            self.free.insert(first + n, len - n);
        }
        self.free_frames -= n as u64;
        Some((first, n as u64))
    }

    /// Gives frames `first..first + len` back.
    pub fn free(&mut self, first: u32, len: u64) {
        assert!(len > 0);
        self.free_frames += len;
        let mut first = first;
        let mut len = len as u32;
        if let Some((&p, &plen)) = self.free.range(..first).next_back() {
            assert!(p + plen <= first, "frame {first} freed twice");
            if p + plen == first {
                self.free.remove(&p);
                first = p;
                len += plen;
            }
        }
        if let Some(&nlen) = self.free.get(&(first + len)) {
            self.free.remove(&(first + len));
            len += nlen;
        }
        assert!(
            self.free.range(first..first + len).next().is_none(),
            "frames freed twice"
        );
        self.free.insert(first, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_handed_out_in_ranges_and_join_when_freed() {
        let mut s = FrameSpace::new(10);
        assert_eq!(s.alloc(4), Some((0, 4)));
        assert_eq!(s.alloc(4), Some((4, 4)));
        assert_eq!(s.alloc(4), Some((8, 2)), "what is left");
        assert_eq!(s.alloc(1), None);
        s.free(4, 4);
        s.free(0, 4);
        assert_eq!(s.free_frames(), 8);
        assert_eq!(s.alloc(10), Some((0, 8)), "freed ranges joined");
    }
}
