//! The balanced dirty rate limit (Linux's wb_update_dirty_ratelimit).
//!
//! Each context keeps `dirty_ratelimit`, the rate (pages/s) at which each of
//! its writers may dirty pages at the setpoint. Every 200 ms we measure how
//! fast pages were actually dirtied and compute the rate that would have
//! matched the device's write bandwidth (`balanced`); `dirty_ratelimit`
//! steps toward it, damped so it does not oscillate.

use crate::bandwidth::estimate::INIT_BW_PAGES_S;
use crate::time::NS_PER_SEC;

#[derive(Clone, Debug)]
pub struct DirtyRatelimit {
    /// Pages per second each writer may dirty at pos_ratio 1.
    pub dirty_ratelimit: u64,
    pub balanced_dirty_ratelimit: u64,
}

impl Default for DirtyRatelimit {
    fn default() -> Self {
        DirtyRatelimit {
            dirty_ratelimit: INIT_BW_PAGES_S,
            balanced_dirty_ratelimit: INIT_BW_PAGES_S,
        }
    }
}

/// What one update looks at.
#[derive(Clone, Copy, Debug)]
pub struct RatelimitInput {
    /// Pages dirtied in the interval.
    pub dirtied: u64,
    pub elapsed_ns: u64,
    pub pos_ratio: f64,
    /// Write bandwidth, pages per second.
    pub write_bw: u64,
    /// The dirty count and setpoint the control acts on (global, or the
    /// context's own under strict_limit).
    pub dirty: u64,
    pub setpoint: u64,
}

impl DirtyRatelimit {
    pub fn update(&mut self, input: RatelimitInput) {
        if input.elapsed_ns == 0 {
            return;
        }
        let dirty_rate =
            (input.dirtied as u128 * NS_PER_SEC as u128 / input.elapsed_ns as u128) as u64;
        let rl = self.dirty_ratelimit;
        let task_ratelimit = (rl as f64 * input.pos_ratio) as u64 + 1;
        // If writers dirtied at dirty_rate while each was allowed
        // task_ratelimit, the rate that matches the device is this:
        let balanced = ((task_ratelimit as u128 * input.write_bw as u128)
            / (dirty_rate as u128).max(1)) as u64;
        let balanced = balanced.min(input.write_bw).max(1);

        // Only step when both the balanced rate and the position agree on
        // the direction; otherwise we are likely to overshoot.
        let mut step = 0u64;
        if input.dirty < input.setpoint {
            let x = self
                .balanced_dirty_ratelimit
                .min(balanced)
                .min(task_ratelimit);
            if rl < x {
                step = x - rl;
            }
        } else {
            let x = self
                .balanced_dirty_ratelimit
                .max(balanced)
                .max(task_ratelimit);
            if rl > x {
                step = rl - x;
            }
        }
        // Damp: small steps when far from the target relative to the rate.
        let shift = rl / (2 * step + 1);
        step = if shift < 64 {
            (step >> shift).div_ceil(8)
        } else {
            0
        };

        let next = if rl < balanced {
            (rl + step).min(balanced)
        } else {
            rl.saturating_sub(step).max(balanced)
        };
        self.dirty_ratelimit = next.max(1);
        self.balanced_dirty_ratelimit = balanced;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(rl: &DirtyRatelimit, pos_ratio: f64, dirty: u64) -> RatelimitInput {
        // One writer dirtying exactly as fast as it is allowed, on a device
        // that writes 2560 pages/s.
        let allowed = (rl.dirty_ratelimit as f64 * pos_ratio) as u64;
        RatelimitInput {
            dirtied: allowed / 5,
            elapsed_ns: NS_PER_SEC / 5,
            pos_ratio,
            write_bw: 2560,
            dirty,
            setpoint: 1000,
        }
    }

    #[test]
    fn steps_down_toward_balanced_when_over_setpoint() {
        let mut rl = DirtyRatelimit::default();
        let mut last = rl.dirty_ratelimit;
        for _ in 0..50 {
            rl.update(input(&rl, 0.1, 1500));
            assert!(rl.dirty_ratelimit <= last);
            assert!(rl.dirty_ratelimit >= rl.balanced_dirty_ratelimit.min(last));
            last = rl.dirty_ratelimit;
        }
        assert_eq!(rl.balanced_dirty_ratelimit, 2560);
        // Damped: close, approaching from above, never below the balanced rate.
        assert!(
            rl.dirty_ratelimit >= 2560 && rl.dirty_ratelimit < 2560 * 6 / 5,
            "{}",
            rl.dirty_ratelimit
        );
    }

    #[test]
    fn no_step_without_agreeing_evidence() {
        // Below the setpoint but the balanced rate says "lower": hold.
        let mut rl = DirtyRatelimit::default();
        rl.update(input(&rl, 1.0, 500));
        assert_eq!(rl.dirty_ratelimit, INIT_BW_PAGES_S);
    }

    #[test]
    fn never_above_bandwidth_never_zero() {
        let mut rl = DirtyRatelimit::default();
        rl.update(RatelimitInput {
            dirtied: 0,
            elapsed_ns: NS_PER_SEC / 5,
            pos_ratio: 2.0,
            write_bw: 100,
            dirty: 0,
            setpoint: 1000,
        });
        assert!(rl.balanced_dirty_ratelimit <= 100);
        assert!(rl.dirty_ratelimit >= 1);
    }
}
