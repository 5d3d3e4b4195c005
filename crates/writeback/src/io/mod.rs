//! Low-level I/O: page-aligned buffers, O_DIRECT files, asynchronous
//! backends (io_uring with a thread-pool fallback) and device calibration.

pub mod aligned;
pub mod backend;
pub mod calibrate;
mod caller_ring;
pub mod direct;
pub mod faults;
mod on_caller;
mod open;
pub mod pages;
mod pool;
mod tail;
pub mod threads;
pub mod uring;

pub use aligned::{AlignedBuf, PAGE_SIZE};
pub use backend::{IoBackend, IoDone, IoOp};
pub use calibrate::{calibrate, device_id, DeviceProfile};
pub use direct::{open_direct, supports_direct};
pub use faults::Faults;
pub use on_caller::WRITE_ON_CALLER_MAX_BYTES;
pub use open::{backend_by_name, default_backend_name, open_backend};
pub use pages::{IoBuf, IoPages};
pub(crate) use pool::BufPool;
