//! Handles: one opener of a file each, with its own place in the file's
//! write-back error sequence (errseq). Closed handles' slots are used
//! again: a server opening files all day keeps a table as large as its
//! most handles open at once.

use crate::error::EngineError;
use crate::ids::{FileId, HandleId, PageIndex, PAGE_SIZE};

#[derive(Debug)]
pub(crate) struct Handle {
    pub file: FileId,
    pub err_seen: u64,
}

/// The open handles, by id.
#[derive(Debug, Default)]
pub(crate) struct Handles {
    slots: Vec<Option<Handle>>,
    /// Slots of closed handles, for the next opens.
    free: Vec<u32>,
}

impl Handles {
    /// A new handle on `file`, seeing write-back errors after `err_seq`.
    pub fn open(&mut self, file: FileId, err_seq: u64) -> HandleId {
        let handle = Some(Handle {
            file,
            err_seen: err_seq,
        });
        if let Some(slot) = self.free.pop() {
            assert!(self.slots[slot as usize].is_none());
            self.slots[slot as usize] = handle;
            return HandleId(slot);
        }
        self.slots.push(handle);
        HandleId((self.slots.len() - 1) as u32)
    }

    /// Closes `handle`; returns its file.
    pub fn close(&mut self, handle: HandleId) -> Result<FileId, EngineError> {
        let file = self.get(handle)?.file;
        self.slots[handle.index()] = None;
        self.free.push(handle.0);
        Ok(file)
    }

    pub fn get(&self, handle: HandleId) -> Result<&Handle, EngineError> {
        self.slots
            .get(handle.index())
            .and_then(|h| h.as_ref())
            .ok_or(EngineError::BadHandle(handle))
    }

    pub fn get_mut(&mut self, handle: HandleId) -> Result<&mut Handle, EngineError> {
        self.slots
            .get_mut(handle.index())
            .and_then(|h| h.as_mut())
            .ok_or(EngineError::BadHandle(handle))
    }

    /// Every open handle.
    pub fn iter(&self) -> impl Iterator<Item = &Handle> {
        self.slots.iter().flatten()
    }
}

/// Bytes `offset..offset + len` as pages, or an error if they do not fit
/// a file.
pub(crate) fn page_range(offset: u64, len: u64) -> Result<(PageIndex, PageIndex), EngineError> {
    let end = offset
        .checked_add(len)
        .ok_or(EngineError::OutOfRange { offset, len })?;
    let last = end.div_ceil(PAGE_SIZE);
    if last > crate::page_cache::MAX_FILE_PAGES {
        return Err(EngineError::OutOfRange { offset, len });
    }
    Ok((offset / PAGE_SIZE, last))
}
