//! Shared by the library's integration tests.

use std::path::PathBuf;

/// A fresh directory for a test under the target's temporary directory, or
/// None (after skipping, with the reason) where O_DIRECT does not work.
pub fn direct_test_dir(name: &str) -> Option<PathBuf> {
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    if !writeback::io::supports_direct(&dir) {
        wb_testkit::skip(&format!("{} does not support O_DIRECT", dir.display()));
        return None;
    }
    Some(dir)
}
