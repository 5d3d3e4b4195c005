//! A direct write's progress (direct/), kept in its task's operation.

use crate::action::IoErrorKind;

/// A direct write's progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DirectPhase {
    /// Writing back and dropping the cached pages of the range.
    Invalidate,
    /// Requests issued; this many not yet complete.
    InFlight {
        left: u32,
        failed: Option<IoErrorKind>,
    },
}
