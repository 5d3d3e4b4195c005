//! sd_notify(3): telling a service manager (systemd, `Type=notify`) that
//! `wb mount` is serving (`READY=1`), that it is stopping (`STOPPING=1`)
//! and what it is doing (`STATUS=...`).
//!
//! The protocol is one datagram per message, `NAME=value` lines, sent to
//! the AF_UNIX socket named by `$NOTIFY_SOCKET`: a path, or with a
//! leading `@` a name in the abstract namespace. std's `UnixDatagram`
//! speaks it in a few lines (abstract names included), so no crate is
//! needed. Notifying is a courtesy: an unset variable means nobody
//! listens, and one that is unusable (a relative name, a socket that is
//! gone) is said once on stderr and otherwise ignored: it never fails or
//! stops the mount.

use std::ffi::OsStr;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::atomic::{AtomicBool, Ordering};

/// The variable naming the socket.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";
/// Set (to 1) by mount.fuse.wb for the server it starts: its socket
/// listens only until READY=1 (the helper then exits), so nothing more
/// is sent to it.
pub const NOTIFY_READY_ONLY: &str = "WB_NOTIFY_READY_ONLY";

/// Where notifications go, if anywhere.
#[derive(Debug)]
pub struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
    /// Set at the first failed send: later ones are not tried (nor said).
    failed: AtomicBool,
    /// Only READY=1 is sent ([`NOTIFY_READY_ONLY`]).
    ready_only: bool,
}

impl Notifier {
    /// From `$NOTIFY_SOCKET`; a notifier that sends nothing when it is
    /// unset or unusable (said once on stderr, as `who`).
    pub fn from_env(who: &str) -> Notifier {
        let target = std::env::var_os(NOTIFY_SOCKET).and_then(|value| match open(&value) {
            Ok(target) => Some(target),
            Err(e) => {
                eprintln!(
                    "{who}: {NOTIFY_SOCKET}={}: {e}; not notifying the service manager",
                    value.to_string_lossy()
                );
                None
            }
        });
        Notifier {
            target,
            failed: AtomicBool::new(false),
            ready_only: std::env::var_os(NOTIFY_READY_ONLY).is_some_and(|v| v == "1"),
        }
    }

    /// Sends `message` (`NAME=value` lines). A failure is said once on
    /// stderr (as `who`) and stops further sends.
    pub fn send(&self, who: &str, message: &str) {
        let Some((socket, addr)) = &self.target else {
            return;
        };
        if self.failed.load(Ordering::Relaxed) {
            return;
        }
        if let Err(e) = socket.send_to_addr(message.as_bytes(), addr) {
            self.failed.store(true, Ordering::Relaxed);
            let first = message.lines().next().unwrap_or_default();
            eprintln!(
                "{who}: notifying the service manager ({first}) failed: {e}; not trying again"
            );
        }
    }

    /// Serving: `READY=1` with `status` as STATUS.
    pub fn ready(&self, who: &str, status: &str) {
        self.send(who, &format!("READY=1\nSTATUS={}", one_line(status)));
    }

    /// Stopping: `STOPPING=1` with `status` as STATUS.
    pub fn stopping(&self, who: &str, status: &str) {
        if !self.ready_only {
            self.send(who, &format!("STOPPING=1\nSTATUS={}", one_line(status)));
        }
    }

    /// What is being done now.
    pub fn status(&self, who: &str, status: &str) {
        if !self.ready_only {
            self.send(who, &format!("STATUS={}", one_line(status)));
        }
    }
}

/// A value fits one line of the protocol.
fn one_line(text: &str) -> String {
    text.replace('\n', " ")
}

/// The socket address `value` names: `@name` (abstract) or an absolute path.
pub fn address(value: &OsStr) -> std::io::Result<SocketAddr> {
    let bytes = value.as_bytes();
    match bytes.first() {
        Some(b'@') => SocketAddr::from_abstract_name(&bytes[1..]),
        Some(b'/') => SocketAddr::from_pathname(value),
        _ => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not an absolute path or an abstract socket name (@NAME)",
        )),
    }
}

fn open(value: &OsStr) -> std::io::Result<(UnixDatagram, SocketAddr)> {
    let addr = address(value)?;
    let socket = UnixDatagram::unbound()?;
    Ok((socket, addr))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn receive(socket: &UnixDatagram) -> String {
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("set a timeout");
        let mut buf = [0u8; 512];
        let n = socket.recv(&mut buf).expect("a notification");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    fn notifier_for(value: &str) -> Notifier {
        Notifier {
            target: Some(open(OsStr::new(value)).expect("a usable address")),
            failed: AtomicBool::new(false),
            ready_only: false,
        }
    }

    #[test]
    fn abstract_names_receive_ready_and_one_line_statuses() {
        let name = format!("wb-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("an abstract name");
        let listener = UnixDatagram::bind_addr(&addr).expect("bind");
        let notifier = notifier_for(&format!("@{name}"));
        notifier.ready("test", "serving a\nat b");
        assert_eq!(receive(&listener), "READY=1\nSTATUS=serving a at b");
        notifier.stopping("test", "SIGTERM");
        assert_eq!(receive(&listener), "STOPPING=1\nSTATUS=SIGTERM");
    }

    #[test]
    fn relative_and_empty_names_are_refused() {
        for value in ["", "relative/sock", "vsock:2:1"] {
            let err = address(OsStr::new(value)).expect_err(value);
            assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{value}");
        }
    }

    #[test]
    fn a_socket_that_is_gone_stops_sending_without_failing() {
        let notifier = notifier_for("/nonexistent/wb-notify.sock");
        notifier.ready("test", "serving");
        assert!(notifier.failed.load(Ordering::Relaxed));
        notifier.status("test", "still nothing, and no panic");
    }
}
