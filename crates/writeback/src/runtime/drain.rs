//! `Core::drain`: the engine's actions, taken in the order it emitted
//! them, done under the lock when they need no I/O, else made the
//! executor's steps (executor.rs).

use super::core::{CopyIn, Core, WriteData, PAGE};
use super::executor::{Deferred, Flush, LengthSet, Out, Release};
use crate::io::{IoBuf, IoOp};
use crate::Writeout;
use std::sync::Arc;
use wb_engine::{Action, FileId, IoDir, IoRequest, PAGE_SIZE};

impl Core {
    /// Takes the engine's actions in the order it emitted them. The page
    /// map's keeper sees each first (`wb_engine::page_map`): pages that
    /// left the cache leave the map before any frame is written, and a
    /// write request's frames stop being overwritable before they are
    /// locked to be copied or lent. What needs no I/O is done here, under
    /// the lock: frames are copied
    /// or zeroed, and the caller's bytes (`write`) copied in, before any
    /// request is built from them; woken tasks are marked; evicted files
    /// are let go. The rest becomes steps of the returned `Out`, in the
    /// same order, carried out once the lock is released (executor.rs).
    /// A write that defers its copies gets them in `Out::copies`.
    ///
    /// Two steps are not the engine's actions and go first. The timer
    /// thread's kick: it should not wait behind a slow step. Then the
    /// mtimes to set back after write-backs: those writes completed
    /// before the engine calls whose actions follow (and a flush among
    /// these then makes the right mtime durable).
    pub fn drain(&mut self, write: Option<WriteData<'_>>) -> Out {
        let mut out = Out::default();
        self.take_stamps(&mut out);
        let mut copied: Option<FileId> = None;
        while let Some(action) = self.engine.poll_action() {
            self.page_map.on_action(&self.engine, &action);
            if let Some(file) = self.apply_action(action, write, &mut out) {
                copied = Some(file);
            }
        }
        if let Some(file) = copied {
            // After the data it covers is in the frames.
            self.publish_size(file);
        }
        if self.timer_kick_needed() {
            out.steps.insert(0, Deferred::KickTimer);
        }
        out
    }

    /// Carries out one engine action (`drain`), or leaves it in `out` for
    /// after the lock; the file whose bytes it copied in under the lock,
    /// if it did.
    fn apply_action(
        &mut self,
        action: Action,
        write: Option<WriteData<'_>>,
        out: &mut Out,
    ) -> Option<FileId> {
        match action {
            // The page map's keeper has taken the pages out.
            Action::Unmapped { .. } => {}
            Action::CopyFrames {
                from, to, count, ..
            } => self.copy_frames(from, to, count),
            Action::ZeroFrames { first, count } => self.zero_frames(first, count),
            Action::CopyIn {
                file,
                pos,
                len,
                frame,
                ..
            } => {
                let c = CopyIn {
                    file,
                    pos,
                    len,
                    frame,
                };
                return self.copy_in_or_defer(c, write, out);
            }
            Action::Submit(req) if req.direct => out.push(Deferred::Refuse(req.id)),
            Action::Submit(req) => {
                let commit = req.commit;
                let op = self.build_op(req);
                out.push(Deferred::Submit { op, commit });
            }
            Action::Wake(task) => {
                self.woken[task.index()] = true;
                if let Some(thread) = self.sleepers[task.index()].clone() {
                    out.push(Deferred::Wake(task, thread));
                }
            }
            Action::Release { id, file, step } => {
                let release = self.release_step(id, file, step);
                out.push(Deferred::Release(release));
            }
            Action::StatFs { device } => match self.device_dirs.get(device.index()) {
                Some(dir) => out.push(Deferred::StatFs(device, dir.clone())),
                // No directory to ask: unlimited, rather than writers
                // waiting for a report that never comes.
                None => {
                    let _ = self.engine.space_unknown(device);
                }
            },
            Action::Evict { file } => {
                // Its pages are gone; the engine will not use the id again.
                self.backing[file.index()] = None;
                self.forget_inode(file);
            }
            Action::MakeDurable {
                id,
                file,
                metadata,
                len,
            } => out.push(Deferred::Flush(Flush {
                id,
                backing: self.backing(file),
                len,
                metadata,
                modified: Arc::clone(&self.modified[file.index()]),
            })),
            Action::SetLength { id, file, len } => out.push(Deferred::SetLength(LengthSet {
                id,
                backing: self.backing(file),
                len,
                modified: Arc::clone(&self.modified[file.index()]),
            })),
        }
        None
    }

    /// Copies `count` frames from `from` on to `to` on.
    fn copy_frames(&self, from: u32, to: u32, count: u32) {
        // A page under writeback goes on in a copy (stable.rs);
        // through a buffer, as both frames may share a lock.
        let mut page = [0u8; wb_engine::PAGE_SIZE as usize];
        for i in 0..count {
            page.copy_from_slice(self.frames.read_one(from + i).bytes());
            self.frames.write(to + i).bytes().copy_from_slice(&page);
        }
    }

    /// Zeroes the fresh frames `first..first + count`.
    fn zero_frames(&self, first: u32, count: u32) {
        for frame in first..first + count {
            self.frames.write(frame).bytes().fill(0);
        }
    }

    /// Copies the caller's bytes of `c` into their frames now, or leaves
    /// the copy in `out` for after the lock when the write defers it; the
    /// file, if copied now.
    fn copy_in_or_defer(
        &mut self,
        c: CopyIn,
        write: Option<WriteData<'_>>,
        out: &mut Out,
    ) -> Option<FileId> {
        // Only the writer's own engine calls copy in; they pass
        // their data.
        let Some(w) = write else {
            debug_assert!(false, "CopyIn without the writer's data");
            return None;
        };
        if w.deferred {
            out.copies.push(c);
            None
        } else {
            w.copy_in(&self.frames, &self.page_map, c);
            Some(c.file)
        }
    }

    /// A release step of `file` to carry out without the lock: a removal
    /// takes the backing file out of the table (its last close frees the
    /// blocks there) with the name to remove.
    fn release_step(&mut self, id: u64, file: FileId, step: wb_engine::ReleaseStep) -> Release {
        let slot = &mut self.backing[file.index()];
        let (backing, name) = match step {
            wb_engine::ReleaseStep::Remove => (slot.take(), self.remove_at_release.remove(&file)),
            wb_engine::ReleaseStep::Truncate { .. } => (slot.clone(), None),
            wb_engine::ReleaseStep::Start => (None, None),
        };
        Release {
            id,
            backing,
            modified: Arc::clone(&self.modified[file.index()]),
            name,
            step,
        }
    }

    /// Leaves in `out` the mtimes to set back on the files write-backs
    /// moved since the last drain, once each (`Deferred::Stamp`).
    fn take_stamps(&mut self, out: &mut Out) {
        self.stamps.sort_unstable();
        self.stamps.dedup();
        for file in self.stamps.drain(..) {
            // A file evicted meanwhile was stamped before it went.
            if let Some(backing) = &self.backing[file.index()] {
                out.push(Deferred::Stamp(super::times::Stamp {
                    backing: Arc::clone(backing),
                    modified: Arc::clone(&self.modified[file.index()]),
                }));
            }
        }
    }

    /// Whether the timer thread is to be woken (`Deferred::KickTimer`):
    /// the engine's next timeout comes before the thread means to look.
    fn timer_kick_needed(&mut self) -> bool {
        if let (Some(next), Some(wake)) = (self.engine.poll_timeout(), self.timer_wake_at) {
            if next < wake {
                self.timer_wake_at = Some(next);
                return true;
            }
        }
        false
    }

    fn build_op(&mut self, req: IoRequest) -> IoOp {
        let write = req.dir == IoDir::Write;
        let buf = if write {
            self.write_buf(&req)
        } else {
            // A reused buffer holds old data: a read is filled by the
            // device (the backends zero a short read's tail). Its capacity
            // may be larger: only its length is transferred.
            IoBuf::Owned(self.spare_bufs.take(req.pages as usize * PAGE))
        };
        let op = IoOp {
            id: req.id.0,
            file: self.backing(req.file),
            write,
            offset: req.first_page * PAGE_SIZE,
            buf,
            // A write of the file's partial last page stops at its end.
            len: req.bytes as usize,
            // The engine says which writes extend their file (and hands
            // those over one per file at a time); the filesystem, whether
            // the kernel then runs them synchronously.
            blocks: req.extends
                && self
                    .extends_synchronously
                    .get(req.device.index())
                    .copied()
                    .unwrap_or(false),
        };
        if let Some(trace) = self.trace.as_mut() {
            trace.submitted(&self.engine, &req);
        }
        self.inflight.insert(req.id.0, req);
        op
    }

    /// The memory a write request is written from: its pages' frames,
    /// lent as they are (zero-copy), or copied into a buffer
    /// (`Writeout::Copy`).
    fn write_buf(&mut self, req: &IoRequest) -> IoBuf {
        let page_frames: Vec<u32> = (0..req.pages as u64)
            .map(|i| {
                self.engine
                    .page_frame(req.file, req.first_page + i)
                    .expect("page under writeback is cached")
            })
            .collect();
        // The keeper has cleared their overwritable bits (page_map, rule
        // 8): once their locks are passed, what the request carries is
        // what is written back; later writes of these pages go through the
        // engine, which dirties them again (and, per stable_writes, waits
        // or gives them a copy).
        let frames = self.frames.read(&page_frames);
        match self.writeout {
            Writeout::ZeroCopy => {
                drop(frames);
                IoBuf::Lent(self.frames.lend(&page_frames))
            }
            Writeout::Copy => {
                // A reused buffer holds old data: all of its length is
                // overwritten here.
                let mut buf = self.spare_bufs.take(page_frames.len() * PAGE);
                for (i, &frame) in page_frames.iter().enumerate() {
                    buf.as_mut_slice()[i * PAGE..(i + 1) * PAGE]
                        .copy_from_slice(frames.frame(frame));
                }
                IoBuf::Owned(buf)
            }
        }
    }
}
