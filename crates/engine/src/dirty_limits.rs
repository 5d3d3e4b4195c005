//! Dirty thresholds, as Linux's domain_dirty_limits() and __wb_calc_thresh():
//! a global threshold and background threshold from the cache budget, and
//! each writeback context's share of them from its recent writeout share.

use crate::config::Config;
use crate::ids::PAGE_SIZE;
use crate::proportions::{FpropGlobal, FpropLocal};

/// The global thresholds, in pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GlobalThresh {
    pub thresh: u64,
    pub bg_thresh: u64,
}

/// Inputs of one throttling decision (Linux's struct dirty_throttle_control), in pages.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Dtc {
    /// Global dirty + writeback pages.
    pub dirty: u64,
    pub thresh: u64,
    pub bg_thresh: u64,
    /// The hard limit: max(thresh, decaying dirty_limit).
    pub limit: u64,
    /// This context's dirty + writeback pages.
    pub wb_dirty: u64,
    pub wb_thresh: u64,
    pub wb_bg_thresh: u64,
}

impl Dtc {
    pub fn freerun(&self) -> u64 {
        dirty_freerun_ceiling(self.thresh, self.bg_thresh)
    }

    pub fn setpoint(&self) -> u64 {
        (self.freerun() + self.limit) / 2
    }
}

/// The global writeback domain (Linux's global_wb_domain): the
/// thresholds, the hard limit that follows them, and the writeout
/// completions each context's share is measured against.
#[derive(Clone, Debug)]
pub struct WbDomain {
    pub thresh: GlobalThresh,
    /// Linux's dom->dirty_limit: follows thresh up at once, down slowly.
    pub dirty_limit: u64,
    pub completions: FpropGlobal,
}

impl WbDomain {
    /// Every 200 ms, with `dirty` pages dirty or under writeback: the
    /// hard limit follows the threshold up at once and down slowly
    /// (Linux's update_dirty_limit).
    pub fn update_dirty_limit(&mut self, dirty: u64) {
        let target = self.thresh.thresh.max(dirty);
        if self.dirty_limit < self.thresh.thresh {
            self.dirty_limit = self.thresh.thresh;
        } else if self.dirty_limit > target {
            self.dirty_limit -= (self.dirty_limit - target) >> 5;
        }
    }

    /// The hard limit writers are held under: the threshold, or the
    /// dirty limit while it comes down slowly after the threshold fell.
    pub fn hard_limit(&self) -> u64 {
        self.thresh.thresh.max(self.dirty_limit)
    }

    /// The throttle control of one writeback context (Linux's
    /// wb_dirty_limits over the global domain): `dirty` pages dirty or
    /// under writeback cache-wide and `wb_dirty` in the context, its
    /// writeout share `share`, its device's `(min_ratio, max_ratio)` and
    /// every device's min_ratio summed, `sum_min_ratio` (at most 100).
    pub fn dtc(
        &self,
        (dirty, wb_dirty): (u64, u64),
        share: &FpropLocal,
        (min_ratio, max_ratio): (u32, u32),
        sum_min_ratio: u32,
    ) -> Dtc {
        let (num, den) = share.fraction(&self.completions);
        let thresh = self.thresh.thresh;
        let wb_thresh = wb_calc_thresh(thresh, num, den, min_ratio, max_ratio, sum_min_ratio);
        Dtc {
            dirty,
            thresh,
            bg_thresh: self.thresh.bg_thresh,
            limit: self.hard_limit(),
            wb_dirty,
            wb_thresh,
            wb_bg_thresh: wb_thresh * self.thresh.bg_thresh / thresh.max(1),
        }
    }
}

/// Linux's domain_dirty_limits for the global domain; `avail` is the cache
/// budget in pages (all of it is "dirtyable": free or file pages).
pub fn domain_dirty_limits(config: &Config, avail: u64) -> GlobalThresh {
    let pages = |bytes: u64| bytes.div_ceil(PAGE_SIZE).min(avail);
    let mut thresh = if config.dirty_bytes > 0 {
        pages(config.dirty_bytes)
    } else {
        avail * config.dirty_ratio as u64 / 100
    };
    thresh = thresh.max(2);
    let mut bg_thresh = if config.dirty_background_bytes > 0 {
        pages(config.dirty_background_bytes)
    } else {
        avail * config.dirty_background_ratio as u64 / 100
    };
    // A background threshold at or above the hard one would never leave
    // room for background writeback to act first.
    if bg_thresh >= thresh {
        bg_thresh = thresh / 2;
    }
    GlobalThresh { thresh, bg_thresh }
}

/// Below this many dirty pages nobody is throttled at all.
pub fn dirty_freerun_ceiling(thresh: u64, bg_thresh: u64) -> u64 {
    (thresh + bg_thresh) / 2
}

/// Pages a task may dirty before looking again while in freerun: about the
/// square root of the distance to the threshold, so checks get denser as
/// the threshold nears.
pub fn dirty_poll_interval(dirty: u64, thresh: u64) -> u64 {
    if thresh > dirty {
        1u64 << ((thresh - dirty).ilog2() / 2)
    } else {
        1
    }
}

/// A writeback context's share of `thresh` (Linux's __wb_calc_thresh):
/// its writeout fraction of what is left after every context's guaranteed
/// minimum, plus its own minimum, capped by its maximum.
pub fn wb_calc_thresh(
    thresh: u64,
    numerator: u64,
    denominator: u64,
    min_ratio: u32,
    max_ratio: u32,
    sum_min_ratio: u32,
) -> u64 {
    assert!(denominator > 0);
    assert!(min_ratio <= max_ratio && max_ratio <= 100 && sum_min_ratio <= 100);
    let shared = thresh as u128 * (100 - sum_min_ratio) as u128 / 100;
    let mut wb_thresh = (shared * numerator as u128 / denominator as u128) as u64;
    wb_thresh += thresh * min_ratio as u64 / 100;
    wb_thresh.min(thresh * max_ratio as u64 / 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_and_bytes() {
        let config = Config::default();
        let g = domain_dirty_limits(&config, 100_000);
        assert_eq!(
            g,
            GlobalThresh {
                thresh: 20_000,
                bg_thresh: 10_000
            }
        );
        let mut config = Config::default();
        config.set("dirty_bytes", "40MiB").unwrap();
        config.set("dirty_background_bytes", "80MiB").unwrap();
        let g = domain_dirty_limits(&config, 100_000);
        assert_eq!(
            g,
            GlobalThresh {
                thresh: 10_240,
                bg_thresh: 5_120
            },
            "bg >= thresh halves"
        );
        assert_eq!(dirty_freerun_ceiling(g.thresh, g.bg_thresh), 7_680);
    }

    #[test]
    fn poll_interval_is_sqrt_of_room() {
        assert_eq!(dirty_poll_interval(0, 1 << 20), 1 << 10);
        assert_eq!(dirty_poll_interval(100, 100), 1);
        assert_eq!(dirty_poll_interval(0, 10_000), 64);
    }

    #[test]
    fn shares() {
        // Half the writeout: half the threshold.
        assert_eq!(wb_calc_thresh(1000, 1, 2, 0, 100, 0), 500);
        // A device with min_ratio 10 and no writeout still gets 10 %.
        assert_eq!(wb_calc_thresh(1000, 0, 1, 10, 100, 10), 100);
        // max_ratio caps a device that does all the writeout.
        assert_eq!(wb_calc_thresh(1000, 1, 1, 0, 30, 0), 300);
    }

    #[test]
    fn a_contexts_dtc_is_its_share_of_the_domain() {
        let mut completions = FpropGlobal::default();
        let (mut a, mut b) = (FpropLocal::default(), FpropLocal::default());
        a.add(&mut completions, 100, 100);
        b.add(&mut completions, 300, 100);
        let dom = WbDomain {
            thresh: GlobalThresh {
                thresh: 1000,
                bg_thresh: 500,
            },
            dirty_limit: 1200,
            completions,
        };
        // A quarter of the writeout: 1000 / 4 = 250, its background
        // share 250 * 500 / 1000 = 125; the hard limit is the dirty limit
        // above the threshold.
        let want = Dtc {
            dirty: 700,
            thresh: 1000,
            bg_thresh: 500,
            limit: 1200,
            wb_dirty: 60,
            wb_thresh: 250,
            wb_bg_thresh: 125,
        };
        assert_eq!(dom.dtc((700, 60), &a, (0, 100), 0), want);
        // min_ratio 10: a quarter of the 900 left after the minimums
        // (225) plus its own 100 = 325; background 325 / 2 = 162.
        let got = dom.dtc((700, 60), &a, (10, 100), 10);
        assert_eq!((got.wb_thresh, got.wb_bg_thresh), (325, 162));
    }
}
