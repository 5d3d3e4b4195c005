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
    /// All frames, free or not.
    frames: u32,
    /// Frames freed since the start, counted: a runtime giving memory
    /// back sees whether any was freed since it last looked.
    freed_total: u64,
}

impl FrameSpace {
    pub fn new(frames: u64) -> FrameSpace {
        assert!(frames > 0 && frames <= u32::MAX as u64);
        FrameSpace {
            free: BTreeMap::from([(0, frames as u32)]),
            free_frames: frames,
            frames: frames as u32,
            freed_total: 0,
        }
    }

    pub fn free_frames(&self) -> u64 {
        self.free_frames
    }

    /// Frames freed since the start.
    pub fn freed_total(&self) -> u64 {
        self.freed_total
    }

    /// One past the highest frame in use: every frame from there to the
    /// end is free. First fit hands out the lowest free frames, so this
    /// is where a growing cache takes its next new frames.
    pub fn used_end(&self) -> u32 {
        match self.free.last_key_value() {
            Some((&first, &len)) if first as u64 + len as u64 == self.frames as u64 => first,
            _ => self.frames,
        }
    }

    /// Free ranges below frame `end`, highest first (a range crossing
    /// `end` cut there), `max` frames in all at most.
    pub fn free_below(&self, end: u32, max: u64) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        let mut left = max;
        for (&first, &len) in self.free.range(..end).rev() {
            if left == 0 {
                break;
            }
            let stop = (first as u64 + len as u64).min(end as u64);
            let n = (stop - first as u64).min(left);
            out.push(((stop - n) as u32, n));
            left -= n;
        }
        out
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
        self.freed_total += len;
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
    fn free_ranges_below_a_frame_come_highest_first_and_bounded() {
        let mut s = FrameSpace::new(100);
        let (a, _) = s.alloc(10).unwrap(); // 0..10
        let (b, _) = s.alloc(20).unwrap(); // 10..30
        let (_c, _) = s.alloc(30).unwrap(); // 30..60
        s.free(a, 10);
        s.free(b + 10, 10); // 20..30
                            // Free: 0..10, 20..30, 60..100.
        assert_eq!(s.free_below(100, 1000), [(60, 40), (20, 10), (0, 10)]);
        assert_eq!(s.free_below(70, 1000), [(60, 10), (20, 10), (0, 10)]);
        assert_eq!(s.free_below(100, 45), [(60, 40), (25, 5)]);
        assert_eq!(s.free_below(20, 1000), [(0, 10)]);
        assert_eq!(s.free_below(100, 0), []);
    }

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

    #[test]
    fn used_end_is_past_the_highest_frame_in_use() {
        let mut s = FrameSpace::new(10);
        assert_eq!(s.used_end(), 0, "nothing in use");
        assert_eq!(s.alloc(3), Some((0, 3)));
        assert_eq!(s.used_end(), 3);
        assert_eq!(s.alloc(2), Some((3, 2)));
        s.free(0, 3);
        assert_eq!(s.used_end(), 5, "a hole below does not lower it");
        assert_eq!(s.alloc(4), Some((0, 3)), "first fit: the hole first");
        s.free(3, 2);
        assert_eq!(s.used_end(), 3, "the free tail joined");
        assert_eq!(s.alloc(7), Some((3, 7)));
        assert_eq!(s.used_end(), 10, "all in use");
        s.free(9, 1);
        assert_eq!(s.used_end(), 9);
    }
}
