//! Queue-depth arithmetic shared by the writeback throttle, as Linux's
//! `block/blk-rq-qos.c`: a default depth that a scale step shrinks (halving
//! per step) or grows (doubling per step, capped at 3/4 of the device queue).

/// Linux's RWB_DEF_DEPTH: the depth at scale step 0.
pub const RWB_DEF_DEPTH: u32 = 16;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RqDepth {
    /// The device's own queue depth.
    pub queue_depth: u32,
    pub default_depth: u32,
    /// 0 is the default; > 0 throttled harder; < 0 allowed deeper.
    pub scale_step: i32,
    /// Set when growing hit the 3/4-of-queue cap: no further scale-up.
    pub scaled_max: bool,
    pub max_depth: u32,
}

impl RqDepth {
    pub fn new(queue_depth: u32) -> RqDepth {
        assert!(queue_depth >= 1);
        let mut depth = RqDepth {
            queue_depth,
            default_depth: RWB_DEF_DEPTH,
            scale_step: 0,
            scaled_max: false,
            max_depth: 0,
        };
        depth.calc_max_depth();
        depth
    }

    /// Recomputes `max_depth` from the scale step. Returns true when the
    /// depth hit its cap (so scaling up further is pointless).
    pub fn calc_max_depth(&mut self) -> bool {
        let mut capped = false;
        if self.queue_depth == 1 {
            // A QD=1 device should have one request ready when one
            // completes, so allow 2 unless we are throttling.
            if self.scale_step > 0 {
                self.max_depth = 1;
            } else {
                self.max_depth = 2;
                capped = true;
            }
        } else {
            let mut depth = self.default_depth.min(self.queue_depth);
            if self.scale_step > 0 {
                depth = 1 + ((depth - 1) >> self.scale_step.min(31));
            } else if self.scale_step < 0 {
                let max = (3 * self.queue_depth / 4).max(1);
                let shift = (-self.scale_step).min(31) as u32;
                let grown = 1u64 + (((depth - 1) as u64) << shift);
                if grown > max as u64 {
                    depth = max;
                    capped = true;
                } else {
                    depth = grown as u32;
                }
            }
            self.max_depth = depth;
        }
        assert!(self.max_depth >= 1);
        capped
    }

    /// Allows more depth. Returns false if already at the cap.
    pub fn scale_up(&mut self) -> bool {
        // Hit the max in a previous round: stop here.
        if self.scaled_max {
            return false;
        }
        self.scale_step -= 1;
        self.scaled_max = self.calc_max_depth();
        true
    }

    /// Allows less depth. A hard throttle from a negative step goes straight
    /// back to the default instead of one step. Returns false at depth 1.
    pub fn scale_down(&mut self, hard_throttle: bool) -> bool {
        if self.max_depth == 1 {
            return false;
        }
        if self.scale_step < 0 && hard_throttle {
            self.scale_step = 0;
        } else {
            self.scale_step += 1;
        }
        self.scaled_max = false;
        self.calc_max_depth();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_and_steps() {
        let mut d = RqDepth::new(32);
        assert_eq!(d.max_depth, 16);
        assert!(d.scale_down(true));
        assert_eq!((d.scale_step, d.max_depth), (1, 8));
        assert!(d.scale_down(true));
        assert_eq!(d.max_depth, 4);
        d.scale_down(true);
        d.scale_down(true);
        assert_eq!(d.max_depth, 1);
        assert!(!d.scale_down(true), "depth 1 cannot go lower");
        for _ in 0..4 {
            assert!(d.scale_up());
        }
        assert_eq!((d.scale_step, d.max_depth), (0, 16));
        assert!(d.scale_up());
        assert_eq!(d.max_depth, 24, "3/4 of 32 caps 31");
        assert!(d.scaled_max);
        assert!(!d.scale_up());
        // A hard throttle from a negative step returns to the default.
        assert!(d.scale_down(true));
        assert_eq!((d.scale_step, d.max_depth), (0, 16));
    }

    #[test]
    fn deep_queue_grows_by_doubling() {
        let mut d = RqDepth::new(1024);
        assert_eq!(d.max_depth, 16);
        d.scale_up();
        assert_eq!(d.max_depth, 31);
        d.scale_up();
        assert_eq!(d.max_depth, 61);
    }

    #[test]
    fn qd1() {
        let mut d = RqDepth::new(1);
        assert_eq!(d.max_depth, 2);
        assert!(d.scale_down(true));
        assert_eq!(d.max_depth, 1);
    }
}
