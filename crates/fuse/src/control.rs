//! The virtual `.writeback` directory at the mount root: the engine's
//! knobs and statistics as files, sysfs style.
//!
//! ```text
//! .writeback/stats                 statistics, one `name value` a line (read-only)
//! .writeback/metrics               the same in the Prometheus text format (read-only)
//! .writeback/<cache knob>          e.g. dirty_ratio, dirty_expire_centisecs
//! .writeback/<device>/<knob>       e.g. vda/wbt_lat_usec, vda/max_ratio
//! .writeback/trace                 1 while a trace is recorded (with `wb mount --trace FILE`)
//! ```
//!
//! With `--trace FILE`, the mount records a trace from the start (see
//! `writeback::Cache::start_trace`): `echo 0 > MOUNT/.writeback/trace`
//! stops it and writes FILE, `echo 1` starts a new one (written at the
//! next 0 or at unmount).
//!
//! Reading a knob gives its value and a newline; writing sets it (`echo 0 >
//! MOUNT/.writeback/vda/wbt_lat_usec`). An invalid value gets EINVAL and
//! changes nothing (the engine validates before it changes anything).
//! `memory` can be lowered, and raised again up to what the mount started
//! with (its frames are allocated then); over a lowered budget the cache
//! frees clean pages at once and dirty ones once written back. While the
//! mount follows memory pressure, `memory` is the budget now and the
//! ceiling the budget grows back to; `memory_min` its floor; `stats` has
//! the budget in force (`memory_bytes`) and why.
//!
//! The directory is reachable by name only: it is left out of the root's
//! listing so that `cp -a`, `diff -r`, `find` or `rm -rf` over the mount
//! see exactly the backing directory. It never reaches the backing
//! directory: a backing entry named `.writeback` at the root is shadowed.

use crate::attr::{virtual_attr, VirtualKind};
use crate::sys::Errno;
use fuser::{FileAttr, FileType};
use std::ffi::OsStr;
use wb_engine::{Config, DeviceConfig};
use writeback::Cache;

/// Name of the directory at the mount root.
pub const CONTROL_DIR: &str = ".writeback";
/// Inode numbers of the virtual tree start here (above any backing or
/// synthetic inode number, see inode.rs).
pub(crate) const CONTROL_BASE: u64 = 1 << 63;
/// Inode numbers per device directory: the directory and its knobs.
const PER_DEVICE: u64 = 1 << 16;
/// Largest value accepted in one write to a knob file.
pub(crate) const MAX_VALUE_BYTES: usize = 4096;

/// A node of the virtual tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Node {
    Dir,
    Stats,
    Metrics,
    Knob(usize),
    DeviceDir(usize),
    DeviceKnob(usize, usize),
    Trace,
}

/// The inode slot of `trace` among the root's files (after the knobs).
const TRACE_SLOT: u64 = PER_DEVICE - 1;
/// The inode slot of `metrics` (after the knobs, before `trace`).
const METRICS_SLOT: u64 = PER_DEVICE - 2;

/// Where `.writeback/trace` writes a trace, and how many events it keeps.
#[derive(Clone, Debug)]
pub struct TraceTarget {
    pub path: std::path::PathBuf,
    pub events: usize,
}

impl Node {
    pub fn ino(self) -> u64 {
        CONTROL_BASE
            + match self {
                Node::Dir => 0,
                Node::Stats => 1,
                Node::Knob(k) => 2 + k as u64,
                Node::DeviceDir(d) => PER_DEVICE * (d as u64 + 1),
                Node::DeviceKnob(d, k) => PER_DEVICE * (d as u64 + 1) + 1 + k as u64,
                Node::Trace => TRACE_SLOT,
                Node::Metrics => METRICS_SLOT,
            }
    }

    pub fn from_ino(ino: u64) -> Option<Node> {
        let n = ino.checked_sub(CONTROL_BASE)?;
        let node = match (n / PER_DEVICE, n % PER_DEVICE) {
            (0, 0) => Node::Dir,
            (0, 1) => Node::Stats,
            (0, TRACE_SLOT) => Node::Trace,
            (0, METRICS_SLOT) => Node::Metrics,
            (0, k) => Node::Knob(k as usize - 2),
            (d, 0) => Node::DeviceDir(d as usize - 1),
            (d, k) => Node::DeviceKnob(d as usize - 1, k as usize - 1),
        };
        node.valid_shape().then_some(node)
    }

    fn valid_shape(self) -> bool {
        match self {
            Node::Knob(k) => k < Config::KNOBS.len(),
            Node::DeviceKnob(_, k) => k < DeviceConfig::KNOBS.len(),
            _ => true,
        }
    }

    pub fn is_dir(self) -> bool {
        matches!(self, Node::Dir | Node::DeviceDir(_))
    }

    fn kind(self) -> VirtualKind {
        match self {
            Node::Dir | Node::DeviceDir(_) => VirtualKind::Dir,
            Node::Stats | Node::Metrics => VirtualKind::ReadOnly,
            _ => VirtualKind::Writable,
        }
    }
}

/// The virtual tree over one cache.
pub(crate) struct Control<'a> {
    pub cache: &'a Cache,
    pub server: crate::stats_text::ServerCounts,
    /// The kernel's requests by opcode.
    pub requests: &'a crate::requests::Requests,
    /// `wb mount --trace FILE`: `trace` exists.
    pub trace: Option<&'a TraceTarget>,
}

impl Control<'_> {
    fn devices(&self) -> Vec<String> {
        self.cache.device_names()
    }

    fn exists(&self, node: Node) -> bool {
        match node {
            Node::DeviceDir(d) | Node::DeviceKnob(d, _) => d < self.devices().len(),
            Node::Trace => self.trace.is_some(),
            _ => true,
        }
    }

    pub fn attr(&self, node: Node) -> Result<FileAttr, Errno> {
        if !self.exists(node) {
            return Err(libc::ENOENT);
        }
        Ok(virtual_attr(node.ino(), node.kind()))
    }

    pub fn lookup(&self, parent: Node, name: &OsStr) -> Result<Node, Errno> {
        let name = name.to_str().ok_or(libc::ENOENT)?;
        self.list(parent)?
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, node)| node)
            .ok_or(libc::ENOENT)
    }

    /// The entries of a directory node, in a fixed order.
    pub fn list(&self, dir: Node) -> Result<Vec<(String, Node)>, Errno> {
        match dir {
            Node::Dir => {
                let mut entries = vec![
                    ("stats".to_string(), Node::Stats),
                    ("metrics".to_string(), Node::Metrics),
                ];
                if self.trace.is_some() {
                    entries.push(("trace".to_string(), Node::Trace));
                }
                for (k, knob) in Config::KNOBS.iter().enumerate() {
                    entries.push((knob.to_string(), Node::Knob(k)));
                }
                for (d, name) in self.devices().into_iter().enumerate() {
                    entries.push((name, Node::DeviceDir(d)));
                }
                Ok(entries)
            }
            Node::DeviceDir(d) if d < self.devices().len() => Ok(DeviceConfig::KNOBS
                .iter()
                .enumerate()
                .map(|(k, knob)| (knob.to_string(), Node::DeviceKnob(d, k)))
                .collect()),
            Node::DeviceDir(_) => Err(libc::ENOENT),
            _ => Err(libc::ENOTDIR),
        }
    }

    pub fn kind_of(node: Node) -> FileType {
        if node.is_dir() {
            FileType::Directory
        } else {
            FileType::RegularFile
        }
    }

    /// A file's content, taken once per open (as sysfs does), so reads at
    /// increasing offsets see one consistent snapshot.
    pub fn read(&self, node: Node) -> Result<Vec<u8>, Errno> {
        let text = match node {
            Node::Stats => {
                crate::stats_text::render(&self.cache.stats(), self.cache.oldest_dirty_age())
                    + &crate::stats_text::render_server(&self.server, self.requests)
            }
            Node::Metrics => crate::metrics_text::render(
                self.cache.metric_families(),
                &self.server,
                self.requests,
            ),
            Node::Knob(k) => self.cache.knob(Config::KNOBS[k]).ok_or(libc::ENOENT)? + "\n",
            Node::DeviceKnob(d, k) => {
                let device = self.devices().get(d).cloned().ok_or(libc::ENOENT)?;
                self.cache
                    .device_knob(&device, DeviceConfig::KNOBS[k])
                    .ok_or(libc::ENOENT)?
                    + "\n"
            }
            Node::Trace => format!("{}\n", self.cache.tracing() as u8),
            Node::Dir | Node::DeviceDir(_) => return Err(libc::EISDIR),
        };
        Ok(text.into_bytes())
    }

    /// Sets a knob from a write of `data` at offset 0 (the whole value in
    /// one write, as sysfs wants). Invalid values change nothing: EINVAL.
    pub fn write(&self, node: Node, offset: u64, data: &[u8]) -> Result<(), Errno> {
        if offset != 0 || data.len() > MAX_VALUE_BYTES {
            return Err(libc::EINVAL);
        }
        let value = std::str::from_utf8(data).map_err(|_| libc::EINVAL)?.trim();
        let result = match node {
            Node::Knob(k) => self.cache.set_knob(Config::KNOBS[k], value),
            Node::DeviceKnob(d, k) => {
                let device = self.devices().get(d).cloned().ok_or(libc::ENOENT)?;
                self.cache
                    .set_device_knob(&device, DeviceConfig::KNOBS[k], value)
            }
            Node::Trace => return self.switch_trace(value),
            Node::Stats | Node::Metrics => return Err(libc::EACCES),
            Node::Dir | Node::DeviceDir(_) => return Err(libc::EISDIR),
        };
        result.map_err(|e| e.errno())
    }

    /// `1`: starts a new trace; `0`: stops the one under way (if any) and
    /// writes it to the target's file (EIO if that fails: the trace is lost).
    fn switch_trace(&self, value: &str) -> Result<(), Errno> {
        let target = self.trace.ok_or(libc::ENOENT)?;
        match value {
            "1" => {
                self.cache.start_trace(target.events);
                Ok(())
            }
            "0" => match self.cache.stop_trace() {
                Some(trace) => write_trace(&trace, &target.path).map_err(|e| {
                    // The writer gets EIO; what went wrong goes to the log.
                    eprintln!(
                        "wb mount: writing the trace to {}: {e}",
                        target.path.display()
                    );
                    libc::EIO
                }),
                None => Ok(()),
            },
            _ => Err(libc::EINVAL),
        }
    }
}

/// Writes `trace` to `path` as Chrome trace-event JSON.
pub fn write_trace(trace: &writeback::Trace, path: &std::path::Path) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    trace.write_json(&mut out)?;
    std::io::Write::flush(&mut out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inode_numbers_round_trip() {
        let nodes = [
            Node::Dir,
            Node::Stats,
            Node::Knob(0),
            Node::Knob(Config::KNOBS.len() - 1),
            Node::DeviceDir(0),
            Node::DeviceDir(7),
            Node::DeviceKnob(3, 0),
            Node::DeviceKnob(3, DeviceConfig::KNOBS.len() - 1),
            Node::Trace,
            Node::Metrics,
        ];
        for node in nodes {
            assert_eq!(Node::from_ino(node.ino()), Some(node), "{node:?}");
        }
        assert_eq!(Node::from_ino(5), None);
        assert_eq!(Node::from_ino(Node::Knob(Config::KNOBS.len()).ino()), None);
    }
}
