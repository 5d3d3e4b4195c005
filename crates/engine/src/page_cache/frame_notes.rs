//! Notes on frames a runtime read through its page map (page_map/:
//! cached reads that did not call the engine): two bits per frame, read once and
//! read twice since the hand last passed, which the reclaim hand takes as
//! accesses (lru.rs), so a note costs no page-table search. A note that arrives after its frame went to another page only
//! gives that page a second chance. Bounded by the cache budget.

#[derive(Clone, Debug, Default)]
pub struct FrameNotes {
    /// A bit per frame: read at least once since the hand last passed.
    words: Vec<u64>,
    /// A bit per frame: read at least twice (lru.rs: a second access).
    twice: Vec<u64>,
    frames: u64,
}

impl FrameNotes {
    pub fn new(frames: u64) -> FrameNotes {
        FrameNotes {
            words: Vec::new(),
            twice: Vec::new(),
            frames,
        }
    }

    /// Notes `frames`; frames beyond the budget are ignored.
    pub fn note(&mut self, frames: &[u32]) {
        if self.words.is_empty() {
            self.words = vec![0; (self.frames as usize).div_ceil(64)];
            self.twice = vec![0; (self.frames as usize).div_ceil(64)];
        }
        for &frame in frames {
            if (frame as u64) < self.frames {
                let (word, bit) = (frame as usize / 64, 1 << (frame % 64));
                if self.words[word] & bit != 0 {
                    self.twice[word] |= bit;
                }
                self.words[word] |= bit;
            }
        }
    }

    fn is_noted(&self, frame: u64) -> bool {
        bit(&self.words, frame)
    }

    /// The offset of the first noted frame in `first..first + len`.
    pub fn first_noted(&self, first: u32, len: u64) -> Option<u64> {
        if self.words.is_empty() {
            return None;
        }
        let (mut frame, end) = (first as u64, first as u64 + len);
        while frame < end {
            let word = *self.words.get(frame as usize / 64)?;
            let lo = frame % 64;
            let bits = word >> lo;
            let span = (64 - lo).min(end - frame);
            if bits != 0 && (bits.trailing_zeros() as u64) < span {
                return Some(frame + bits.trailing_zeros() as u64 - first as u64);
            }
            frame += span;
        }
        None
    }

    /// Takes the notes of the noted frames at the start of
    /// `first..first + len` that were noted as often as the first one
    /// (once, or twice and more); returns how many there were in a row and
    /// whether they were noted twice.
    pub fn take_prefix(&mut self, first: u32, len: u64) -> (u64, bool) {
        let twice = bit(&self.twice, first as u64);
        let mut n = 0;
        while n < len
            && self.is_noted(first as u64 + n)
            && bit(&self.twice, first as u64 + n) == twice
        {
            let frame = first as u64 + n;
            let mask = !(1 << (frame % 64));
            self.words[frame as usize / 64] &= mask;
            self.twice[frame as usize / 64] &= mask;
            n += 1;
        }
        (n, twice)
    }

    /// Drops the notes of frames `first..first + len` (they now hold other pages).
    pub fn clear(&mut self, first: u32, len: u64) {
        if self.words.is_empty() {
            return;
        }
        for frame in first as u64..first as u64 + len {
            let mask = !(1 << (frame % 64));
            if let Some(word) = self.words.get_mut(frame as usize / 64) {
                *word &= mask;
            }
            if let Some(word) = self.twice.get_mut(frame as usize / 64) {
                *word &= mask;
            }
        }
    }
}

fn bit(words: &[u64], frame: u64) -> bool {
    words
        .get(frame as usize / 64)
        .is_some_and(|w| w & (1 << (frame % 64)) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_found_taken_and_cleared() {
        let mut n = FrameNotes::new(200);
        assert_eq!(n.first_noted(0, 200), None);
        n.note(&[70, 71, 72, 130, 500]);
        assert_eq!(n.first_noted(0, 200), Some(70));
        assert_eq!(n.first_noted(60, 10), None);
        assert_eq!(n.first_noted(71, 100), Some(0));
        assert_eq!(n.take_prefix(70, 10), (3, false));
        assert_eq!(n.first_noted(0, 200), Some(130));
        n.clear(100, 50);
        assert_eq!(n.first_noted(0, 200), None);
    }

    #[test]
    fn a_frame_noted_twice_is_told_from_one_noted_once() {
        let mut n = FrameNotes::new(200);
        n.note(&[10, 11, 12]);
        n.note(&[11, 12]);
        assert_eq!(n.take_prefix(10, 10), (1, false));
        assert_eq!(n.take_prefix(11, 10), (2, true));
        assert_eq!(n.first_noted(0, 200), None);
        n.note(&[5]);
        n.clear(5, 1);
        n.note(&[5]);
        assert_eq!(
            n.take_prefix(5, 1),
            (1, false),
            "a clear forgets both notes"
        );
    }
}
