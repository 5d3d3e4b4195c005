//! A handle: one opener of a file, with its own place in the file's
//! write-back error sequence (file_table/).

use crate::ids::FileId;

#[derive(Debug)]
pub(crate) struct Handle {
    pub file: FileId,
    pub err_seen: u64,
}
