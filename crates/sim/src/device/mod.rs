//! Device models: what a disk does with the requests the engine issues.
//! A model receives requests in its host queue (FIFO, at most the engine's
//! `nr_requests` at a time), dispatches them to its internal queue
//! (`queue_depth` commands, NCQ), and services them in virtual time.

pub mod common;
pub mod flash;
pub mod hdd;
pub mod params;
#[cfg(test)]
mod tests;

use crate::rng::Rng;
use std::collections::BTreeMap;
use wb_engine::Instant;

/// A request as the device sees it: a byte range on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevRequest {
    pub id: u64,
    pub write: bool,
    /// Byte offset on the device.
    pub offset: u64,
    pub len: u64,
}

pub trait DeviceModel {
    /// The model's name (hdd, sata-ssd, nvme, usb-stick).
    fn kind(&self) -> &'static str;
    /// Capacity in bytes; requests lie within it.
    fn capacity(&self) -> u64;
    /// Accepts a request at `now` into the host queue.
    fn submit(&mut self, now: Instant, req: DevRequest);
    /// The earliest time a request completes, if any is in service.
    fn next_completion(&self) -> Option<Instant>;
    /// Moves the ids of requests completed at or before `now` into `done`,
    /// in completion order, and starts service of whatever can start.
    fn complete_into(&mut self, now: Instant, done: &mut Vec<u64>);
    /// `complete_into` into a new vector.
    fn complete(&mut self, now: Instant) -> Vec<u64> {
        let mut done = Vec::new();
        self.complete_into(now, &mut done);
        done
    }
    /// Whether the device needs pages kept stable while they are written
    /// (it checksums data in flight; parameter `stable_writes = 1`).
    fn stable_writes_required(&self) -> bool;
    /// What releasing an unlinked file's blocks costs on this device.
    fn inactivation(&self) -> common::Inactivation;
    /// Median latency of an isolated 4 KiB random read on the idle device.
    fn idle_read_latency_ns(&self) -> u64;
    /// Total time the device was busy (anything in service), for utilisation.
    fn busy_ns(&self, now: Instant) -> u64;
}

/// The device models by name.
pub const MODELS: &[&str] = &["hdd", "sata-ssd", "nvme", "usb-stick"];

/// Checks a model name and its parameter overrides without building it.
pub fn validate(model: &str, params: &BTreeMap<String, String>) -> Result<(), String> {
    build(model, params, Rng::new(0), 64).map(|_| ())
}

/// Builds a model. `queue_depth` is the device's internal queue (NCQ) depth.
pub fn build(
    model: &str,
    params: &BTreeMap<String, String>,
    rng: Rng,
    queue_depth: u32,
) -> Result<Box<dyn DeviceModel>, String> {
    if queue_depth == 0 {
        return Err(format!("{model}: queue depth must be at least 1"));
    }
    if model == "hdd" {
        return Ok(Box::new(hdd::Hdd::build(params, rng, queue_depth)?));
    }
    match flash::build(model, params, rng, queue_depth) {
        Some(built) => Ok(Box::new(built?)),
        None => Err(format!(
            "unknown device model '{model}' (known: {})",
            MODELS.join(", ")
        )),
    }
}
