//! Small typed handles. All are dense indices so that tables are `Vec`s and
//! iteration order is deterministic.

macro_rules! id {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u32);

        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

id!(
    /// A backing device (a disk in the simulator, a filesystem for real).
    DeviceId
);
id!(
    /// A writeback domain (tenant); domain 0 is the root domain.
    DomainId
);
id!(
    /// A bdi_writeback: one (device, domain) pair with its own accounting and flusher.
    WbId
);
id!(
    /// A file known to the cache.
    FileId
);
id!(
    /// An open file; carries the error sequence it has seen.
    HandleId
);
id!(
    /// A caller (thread) of the data path; carries per-task throttling state.
    TaskId
);

/// An I/O request handed to the runtime; completions name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IoId(pub u64);

/// Page index within a file (4 KiB pages).
pub type PageIndex = u64;

/// Bytes per page.
pub const PAGE_SIZE: u64 = 4096;
