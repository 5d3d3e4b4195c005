//! Test support shared by the workspace's integration tests.
//!
//! Some tests need root, /dev/fuse, O_DIRECT, io_uring or a tool such as
//! fio. Where the machine lacks one, a developer's run skips them with a
//! reason; CI sets [`REQUIRE_ALL_ENV`] so that a skip fails instead of
//! passing green without checking anything.

pub mod mount_env;

/// Set (to anything but "0") by `.ci/run`: every test must really run.
pub const REQUIRE_ALL_ENV: &str = "WB_REQUIRE_ALL_TESTS";

/// Whether skipping is forbidden in this run.
pub fn skips_forbidden() -> bool {
    std::env::var(REQUIRE_ALL_ENV).is_ok_and(|v| v != "0")
}

/// Reports that the calling test cannot run here, and why. Returns when
/// skipping is allowed (the caller then returns); panics when
/// [`REQUIRE_ALL_ENV`] is set, so CI cannot pass a test that never ran.
#[track_caller]
pub fn skip(reason: &str) {
    if skips_forbidden() {
        panic!("this test cannot run here ({reason}), and {REQUIRE_ALL_ENV} forbids skipping it");
    }
    eprintln!("skipping: {reason}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_panics_only_when_forbidden() {
        // The variable belongs to the whole process: read, do not set it.
        let result = std::panic::catch_unwind(|| skip("a reason"));
        assert_eq!(result.is_err(), skips_forbidden());
    }
}
