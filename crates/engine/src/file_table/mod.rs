//! Files and handles: a file is the cache's view of one backing file on
//! one device, in one writeback context; a handle is one opener, with its
//! own place in the file's write-back error sequence (errseq). Closed
//! handles' slots are used again.

pub(crate) mod handle;

use crate::engine::Engine;
use crate::error::EngineError;
use crate::file_table::handle::Handle;
use crate::ids::{FileId, HandleId, PageIndex, PAGE_SIZE};

impl Engine {
    /// Opens a handle on a file; it will see write-back errors from now on.
    /// An unknown or evicted file (its id is retired) is an error.
    pub fn open(&mut self, file: FileId) -> Result<HandleId, EngineError> {
        let f = self
            .cache
            .files
            .get_mut(file.index())
            .filter(|f| !f.evicted && !f.unlinked)
            .ok_or(EngineError::BadFile(file))?;
        f.open_handles += 1;
        let handle = Some(Handle {
            file,
            err_seen: f.err_seq,
        });
        self.touch_file(file);
        // Closed handles' slots are used again: a server opening files all
        // day keeps a table as large as its most handles open at once.
        if let Some(slot) = self.free_handles.pop() {
            assert!(self.handles[slot as usize].is_none());
            self.handles[slot as usize] = handle;
            return Ok(HandleId(slot));
        }
        self.handles.push(handle);
        Ok(HandleId((self.handles.len() - 1) as u32))
    }

    pub fn close(&mut self, handle: HandleId) -> Result<(), EngineError> {
        let file = self.handle(handle)?.file;
        self.handles[handle.index()] = None;
        self.free_handles.push(handle.0);
        let f = &mut self.cache.files[file.index()];
        assert!(f.open_handles > 0);
        f.open_handles -= 1;
        self.touch_file(file);
        Ok(())
    }

    pub(crate) fn handle(&self, handle: HandleId) -> Result<&Handle, EngineError> {
        self.handles
            .get(handle.index())
            .and_then(|h| h.as_ref())
            .ok_or(EngineError::BadHandle(handle))
    }

    /// The byte range as pages, or an error if it does not fit.
    /// The file behind `handle`, for an operation on bytes
    /// `offset..offset + len` (which must fit a file); the file counts as
    /// used now (evict/).
    pub(crate) fn file_in_use(
        &mut self,
        handle: HandleId,
        offset: u64,
        len: u64,
    ) -> Result<FileId, EngineError> {
        let file = self.handle(handle)?.file;
        Self::page_range(offset, len)?;
        self.touch_file(file);
        Ok(file)
    }

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
}
