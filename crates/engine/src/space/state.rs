//! A device's free space as the engine accounts it, and the room a write
//! may still reserve (space/).

use crate::ids::PAGE_SIZE;
use crate::time::Instant;

/// Largest margin left free for the filesystem's metadata (64 MiB).
const MAX_MARGIN_PAGES: u64 = (64 << 20) / PAGE_SIZE;

/// A device's free space as the engine accounts it.
#[derive(Clone, Debug, Default)]
pub(crate) struct DeviceSpace {
    /// Free pages at the last report (statvfs f_bavail); None: never
    /// reported, no limit.
    pub free_pages: Option<u64>,
    /// Reserved pages written back (their blocks allocated) since then.
    pub allocated_since: u64,
    /// Pages marked PG_RESERVED on the device.
    pub reserved: u64,
    /// A writer found too little room: the device's dirty pages are being
    /// written back since then, and a report is asked for once they are.
    pub flush_started: Option<Instant>,
    /// A report has been asked for and not yet received.
    pub statfs_asked: bool,
    /// When the free space is asked for next.
    pub next_statfs: Option<Instant>,
}

impl DeviceSpace {
    /// Pages a write may still reserve, or None without a limit.
    pub(super) fn room(&self) -> Option<u64> {
        let free = self.free_pages?;
        let margin = (free / 64).min(MAX_MARGIN_PAGES);
        Some(
            free.saturating_sub(margin)
                .saturating_sub(self.allocated_since)
                .saturating_sub(self.reserved),
        )
    }
}
