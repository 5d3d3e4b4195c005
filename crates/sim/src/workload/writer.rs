//! Sequential writer: files one after another, in blocks; optionally an
//! fsync after each file and a sync() at the end.

use super::{Next, Op, Workload};
use wb_engine::Instant;

pub struct Writer {
    files: usize,
    file_size: u64,
    block_size: u64,
    sync: bool,
    fsync_each: bool,
    file: usize,
    offset: u64,
    fsync_pending: bool,
    synced: bool,
}

impl Writer {
    pub fn new(
        files: u32,
        file_size: u64,
        block_size: u64,
        sync: bool,
        fsync_each: bool,
    ) -> Writer {
        assert!(files >= 1 && file_size > 0 && block_size > 0);
        Writer {
            files: files as usize,
            file_size,
            block_size,
            sync,
            fsync_each,
            file: 0,
            offset: 0,
            fsync_pending: false,
            synced: false,
        }
    }
}

impl Workload for Writer {
    fn next(&mut self, _now: Instant) -> Next {
        if self.fsync_pending {
            self.fsync_pending = false;
            return Next::Op(Op::Fsync {
                file: self.file - 1,
            });
        }
        if self.file < self.files {
            let len = self.block_size.min(self.file_size - self.offset);
            let op = Op::Write {
                file: self.file,
                offset: self.offset,
                len,
            };
            self.offset += len;
            if self.offset == self.file_size {
                self.file += 1;
                self.offset = 0;
                self.fsync_pending = self.fsync_each;
            }
            return Next::Op(op);
        }
        if self.sync && !self.synced {
            self.synced = true;
            return Next::Op(Op::Sync);
        }
        Next::Finished
    }

    fn files(&self) -> Vec<(u64, u64)> {
        vec![(0, self.file_size); self.files]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_files_in_blocks_then_syncs() {
        let mut w = Writer::new(2, 10, 4, true, true);
        let mut ops = Vec::new();
        while let Next::Op(op) = w.next(Instant(0)) {
            ops.push(op);
        }
        assert_eq!(
            ops,
            vec![
                Op::Write {
                    file: 0,
                    offset: 0,
                    len: 4
                },
                Op::Write {
                    file: 0,
                    offset: 4,
                    len: 4
                },
                Op::Write {
                    file: 0,
                    offset: 8,
                    len: 2
                },
                Op::Fsync { file: 0 },
                Op::Write {
                    file: 1,
                    offset: 0,
                    len: 4
                },
                Op::Write {
                    file: 1,
                    offset: 4,
                    len: 4
                },
                Op::Write {
                    file: 1,
                    offset: 8,
                    len: 2
                },
                Op::Fsync { file: 1 },
                Op::Sync,
            ]
        );
    }
}
