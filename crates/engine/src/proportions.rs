//! Floating proportions (Linux's lib/flex_proportions.c): each writeback
//! context's share of recent writeback completions, where "recent" decays
//! by half every period (3 s). A device that stopped writing a while ago
//! loses its share; one that writes fast gains it.

/// Linux's VM_COMPLETIONS_PERIOD_LEN.
pub const PERIOD_NS: u64 = 3 * crate::time::NS_PER_SEC;

#[derive(Clone, Debug, Default)]
pub struct FpropGlobal {
    pub events: u64,
    pub period: u64,
}

#[derive(Clone, Debug, Default)]
pub struct FpropLocal {
    pub events: u64,
    pub period: u64,
}

fn decay(events: u64, periods: u64) -> u64 {
    if periods >= 64 {
        0
    } else {
        events >> periods
    }
}

impl FpropGlobal {
    /// Starts `periods` new periods. Returns false (and changes nothing) if
    /// there were no events, so an idle system stops ageing.
    pub fn new_period(&mut self, periods: u64) -> bool {
        if self.events <= 1 {
            return false;
        }
        self.events = decay(self.events, periods);
        self.period += periods;
        true
    }
}

impl FpropLocal {
    fn reflect_period(&mut self, global: &FpropGlobal) {
        if self.period < global.period {
            self.events = decay(self.events, global.period - self.period);
            self.period = global.period;
        }
    }

    /// Counts `n` events, unless this context already holds at least
    /// `max_percent` of the total (Linux's max_prop_frac).
    pub fn add(&mut self, global: &mut FpropGlobal, n: u64, max_percent: u32) {
        self.reflect_period(global);
        if max_percent < 100 {
            let (num, den) = self.fraction(global);
            if num * 100 >= den * max_percent as u64 && global.events > 0 {
                return;
            }
        }
        self.events += n;
        global.events += n;
    }

    /// This context's share as numerator / denominator (denominator ≥ 1).
    pub fn fraction(&self, global: &FpropGlobal) -> (u64, u64) {
        let num = if self.period < global.period {
            decay(self.events, global.period - self.period)
        } else {
            self.events
        };
        let mut den = global.events;
        if den <= num {
            den = num.max(1);
        }
        (num, den)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_follow_completions_and_decay() {
        let mut g = FpropGlobal::default();
        let mut a = FpropLocal::default();
        let mut b = FpropLocal::default();
        a.add(&mut g, 300, 100);
        b.add(&mut g, 100, 100);
        assert_eq!(a.fraction(&g), (300, 400));
        assert_eq!(b.fraction(&g), (100, 400));
        // B stops; A continues. After two periods A dominates.
        assert!(g.new_period(1));
        a.add(&mut g, 400, 100);
        assert!(g.new_period(1));
        let (an, ad) = a.fraction(&g);
        let (bn, bd) = b.fraction(&g);
        assert_eq!((bn, bd), (25, 300));
        assert_eq!((an, ad), (275, 300));
    }

    #[test]
    fn idle_does_not_age() {
        let mut g = FpropGlobal::default();
        assert!(!g.new_period(1));
        assert_eq!(g.period, 0);
    }

    #[test]
    fn max_ratio_caps_counting() {
        let mut g = FpropGlobal::default();
        let mut a = FpropLocal::default();
        let mut b = FpropLocal::default();
        b.add(&mut g, 100, 100);
        a.add(&mut g, 100, 50);
        a.add(&mut g, 100, 50);
        assert_eq!(a.fraction(&g), (100, 200), "a holds 50%: no more counted");
    }
}
