//! The position ratio (Linux's wb_position_ratio): how fast a writer may
//! dirty pages relative to the writeback context's balanced rate. 1.0 at the
//! setpoint, rising to 2.0 when far below it, falling to 0 at the hard limit;
//! then scaled by how the context's own dirty pages sit against its share.

use crate::dirty_limits::Dtc;

/// The cubic control line: 1 + ((setpoint - dirty) / (limit - setpoint))^3, clamped to [0, 2].
pub fn pos_ratio_polynom(setpoint: u64, dirty: u64, limit: u64) -> f64 {
    let x = (setpoint as f64 - dirty as f64) / ((limit as f64 - setpoint as f64) + 1.0);
    (1.0 + x * x * x).clamp(0.0, 2.0)
}

/// The position ratio for a writer of the context described by `dtc`.
/// `write_bw` is the context's smoothed write bandwidth in pages per second.
pub fn wb_position_ratio(dtc: &Dtc, write_bw: u64, strict_limit: bool) -> f64 {
    if dtc.dirty >= dtc.limit {
        return 0.0;
    }
    let setpoint = dtc.setpoint();
    let mut pos_ratio = pos_ratio_polynom(setpoint, dtc.dirty, dtc.limit);

    if strict_limit {
        // Throttle on the context's own share even when the global pool is
        // fine: the context's own control line, and the stricter one wins.
        if dtc.wb_dirty < 8 {
            return (pos_ratio * 2.0).min(2.0);
        }
        if dtc.wb_dirty >= dtc.wb_thresh {
            return 0.0;
        }
        let wb_setpoint =
            crate::dirty_limits::dirty_freerun_ceiling(dtc.wb_thresh, dtc.wb_bg_thresh);
        if wb_setpoint == 0 || wb_setpoint == dtc.wb_thresh {
            return 0.0;
        }
        let wb_pos_ratio = pos_ratio_polynom(wb_setpoint, dtc.wb_dirty, dtc.wb_thresh);
        return pos_ratio.min(wb_pos_ratio);
    }

    // A context idle for long has a share near 0 not because it is slow but
    // because it did not write: give it a reasonable share so occasional
    // writers are not blocked and active ones ramp up quickly.
    let wb_thresh = dtc
        .wb_thresh
        .min(dtc.thresh)
        .max((dtc.limit - dtc.dirty) / 8);
    // Scale the global setpoint to the context's share.
    let x = wb_thresh as f64 / (dtc.thresh.max(1)) as f64;
    let wb_setpoint = setpoint as f64 * x;
    // Span 8 * write_bw for a single context, moving toward wb_thresh for many (JBOD).
    // Saturating: right after the threshold is lowered (the memory or a
    // dirty ratio knob), the hard limit is still far above it and
    // (limit - dirty) / 8 can exceed the threshold.
    let span = (dtc.thresh.saturating_sub(wb_thresh) as f64 + 8.0 * write_bw as f64) * x;
    let x_intercept = wb_setpoint + span;
    let wb_dirty = dtc.wb_dirty as f64;
    if wb_dirty < x_intercept - span / 4.0 {
        pos_ratio *= (x_intercept - wb_dirty) / (x_intercept - wb_setpoint).max(1.0);
    } else {
        pos_ratio /= 4.0;
    }
    // Reserve area: keep a context's pool from running dry and its device idle.
    let reserve = wb_thresh as f64 / 2.0;
    if wb_dirty < reserve {
        if wb_dirty > reserve / 8.0 {
            pos_ratio *= reserve / wb_dirty;
        } else {
            pos_ratio *= 8.0;
        }
    }
    pos_ratio
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(dirty: u64) -> Dtc {
        Dtc {
            dirty,
            thresh: 20_000,
            bg_thresh: 10_000,
            limit: 20_000,
            wb_dirty: dirty,
            wb_thresh: 20_000,
            wb_bg_thresh: 10_000,
        }
    }

    #[test]
    fn polynom_shape() {
        assert_eq!(pos_ratio_polynom(100, 100, 200), 1.0);
        assert!(pos_ratio_polynom(100, 0, 200) > 1.9);
        assert!(pos_ratio_polynom(100, 199, 200) < 0.1);
        assert_eq!(pos_ratio_polynom(100, 0, 101), 2.0, "clamped");
    }

    #[test]
    fn a_threshold_lowered_far_under_the_hard_limit() {
        // memory 64 -> 16 MiB and dirty_ratio 40 -> 5 at run time: the
        // threshold falls 32-fold, the hard limit follows slowly, and
        // (limit - dirty) / 8 exceeds the threshold (a u64 underflow once).
        let d = Dtc {
            dirty: 100,
            thresh: 200,
            bg_thresh: 100,
            limit: 6_400,
            wb_dirty: 100,
            wb_thresh: 200,
            wb_bg_thresh: 100,
        };
        let ratio = wb_position_ratio(&d, 2560, false);
        assert!(ratio.is_finite() && ratio > 0.0, "{ratio}");
    }

    #[test]
    fn global_curve() {
        let d = single(0);
        assert_eq!(d.freerun(), 15_000);
        assert_eq!(d.setpoint(), 17_500);
        assert_eq!(
            wb_position_ratio(&single(20_000), 2560, false),
            0.0,
            "at the limit"
        );
        let at_setpoint = wb_position_ratio(&single(17_500), 2560, false);
        let above = wb_position_ratio(&single(19_000), 2560, false);
        let below = wb_position_ratio(&single(16_000), 2560, false);
        assert!(below > at_setpoint && at_setpoint > above && above > 0.0);
    }

    #[test]
    fn idle_context_gets_boost() {
        // Another context holds the pool near the setpoint; ours has 1 page.
        let mut d = single(17_500);
        d.wb_dirty = 1;
        d.wb_thresh = 10;
        let r = wb_position_ratio(&d, 25_600, false);
        assert!(r >= 2.0, "reserve area boosts an almost idle context: {r}");
        let mut busy = single(17_500);
        busy.wb_thresh = 10;
        busy.wb_dirty = 17_000;
        assert!(wb_position_ratio(&busy, 25_600, false) < 0.3);
    }

    #[test]
    fn strict_limit_uses_own_line() {
        let mut d = single(1000);
        d.wb_thresh = 100;
        d.wb_bg_thresh = 50;
        d.wb_dirty = 100;
        assert_eq!(wb_position_ratio(&d, 2560, true), 0.0);
        d.wb_dirty = 75;
        let r = wb_position_ratio(&d, 2560, true);
        assert!((r - 1.0).abs() < 0.01, "at the context's own setpoint: {r}");
    }
}
