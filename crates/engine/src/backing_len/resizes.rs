//! Length changes of backing files handed to the runtime and not yet
//! taken (backing_len/).

use crate::action::IoErrorKind;
use crate::ids::FileId;
use std::collections::BTreeMap;

/// Length changes handed to the runtime (`Action::SetLength`).
#[derive(Debug, Default)]
pub(crate) struct Resizes {
    pub(super) next_id: u64,
    /// In flight: id -> (file, length).
    pub(super) pending: BTreeMap<u64, (FileId, u64)>,
    /// Reported and not yet taken by the truncation waiting for it.
    pub(super) done: BTreeMap<u64, Result<(), IoErrorKind>>,
}
