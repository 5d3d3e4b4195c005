//! A device: its knobs, its writeback throttle, its request tags and the
//! reads waiting for one, and the writeback contexts that write to it
//! (state.rs). What the runtime reports of a device is in control.rs.

pub(crate) mod state;
