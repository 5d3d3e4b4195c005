//! One entry of a directory listing, as the server hands it to the kernel.

use fuser::FileType;
use std::ffi::OsString;

#[derive(Clone, Debug)]
pub(crate) struct DirEntry {
    pub ino: u64,
    pub kind: FileType,
    pub name: OsString,
}
