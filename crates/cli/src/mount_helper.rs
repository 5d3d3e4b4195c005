//! `mount.fuse.wb`: `wb` as mount(8)'s external helper, so that
//! `mount -t fuse.wb BACKING MNT -o memory=4GiB,...` and /etc/fstab lines
//! work. `wb` is installed with a symlink /sbin/mount.fuse.wb to it
//! (scripts/install.sh) and, called by that name, is this helper.
//!
//! 1. mount(8) runs `/sbin/mount.fuse.wb SPEC DIR [-sfnv] [-N NS] [-o
//!    OPTIONS] [-t fuse.wb]` (util-linux, mount(8) "EXTERNAL HELPERS"),
//!    and waits for it to exit.
//! 2. The options map to `wb mount`'s arguments ([`map_options`]):
//!    wb's own (allow_other, shared_backing, data_dir=, uring=, ...) and
//!    engine knobs (`NAME=VALUE`, as `--set`); mount(8)'s and systemd's
//!    own are ignored; anything else is refused (exit 1), before anything
//!    is started.
//! 3. The server is `wb mount` started again from this executable, in a
//!    new session (setsid: no controlling terminal, not in mount(8)'s
//!    process group), stdin from /dev/null, stdout and stderr appended to
//!    a log file in the state directory.
//! 4. The helper waits (at most [`READY_TIMEOUT`]) for the server's
//!    `READY=1`, sent over sd_notify to a socket the helper binds in the
//!    abstract namespace and names in the server's NOTIFY_SOCKET (with
//!    WB_NOTIFY_READY_ONLY=1: nothing else is sent there): exit 0 once
//!    serving. If the server exits first, its messages are copied
//!    from the log to stderr and the helper exits 32 (mount(8)'s "mount
//!    failure").
//!
//! `umount MNT` ends the server as any unmount does: it writes all
//! dirty data back and exits; umount(8) returns once the mount is
//! detached, before that write-back ends.

use crate::notify::{address, NOTIFY_READY_ONLY, NOTIFY_SOCKET};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// The name `wb` answers to as mount(8)'s helper (argv[0]'s basename).
pub const HELPER_NAME: &str = "mount.fuse.wb";
/// The filesystem type it mounts.
const FS_TYPE: &str = "fuse.wb";
/// How long the helper waits for the server to serve: building a cache
/// and calibrating a new device take seconds; a server that takes longer
/// is stopped and the mount fails.
pub const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// A server's log past this size is moved to `.log.old` at the next mount
/// of the same mountpoint, so that logs stay bounded.
const LOG_KEEP_BYTES: u64 = 1 << 20;
/// How often the helper looks whether the server exited meanwhile.
const READY_POLL: Duration = Duration::from_millis(100);
/// mount(8)'s exit codes: incorrect invocation, mount failure.
pub const EXIT_USAGE: u8 = 1;
pub const EXIT_MOUNT_FAILED: u8 = 32;

/// Options mount(8) or systemd act on themselves, or that ask for what
/// the mount does anyway (suid, dev, exec and the access-time modes other
/// than noatime: the kernel's defaults), ignored here. nosuid, nodev,
/// noexec and noatime are passed on (`wb mount --flag`).
const IGNORED: &[&str] = &[
    "defaults",
    "rw",
    "auto",
    "noauto",
    "user",
    "users",
    "nofail",
    "_netdev",
    "exec",
    "suid",
    "dev",
    "atime",
    "relatime",
    "strictatime",
    "nodiratime",
    "lazytime",
    "async",
];
/// Prefixes of ignored options: x-* (x-systemd.* among them) and the ones
/// FUSE sets itself (wb names its mounts `wb:BACKING`, type fuse.wb).
const IGNORED_PREFIXES: &[&str] = &["x-", "fsname=", "subtype="];
/// wb's own options without a value: the `wb mount` flag of each.
const FLAGS: &[(&str, &str)] = &[
    ("allow_other", "--allow-other"),
    ("shared_backing", "--shared-backing"),
    ("no_calibrate", "--no-calibrate"),
    ("fixed_memory", "--fixed-memory"),
];
/// wb's own options with a value (not engine knobs): the `wb mount` option.
const VALUED: &[(&str, &str)] = &[
    ("data_dir", "--data-dir"),
    ("uring", "--uring"),
    ("io_backend", "--io-backend"),
];

/// Why the helper refused or failed.
#[derive(Debug, PartialEq, Eq)]
pub enum HelperError {
    /// The arguments are not mount(8)'s helper convention.
    Usage(String),
    /// An -o option that is not wb's, mount(8)'s or systemd's.
    UnknownOption(String),
    /// An option wb knows, misused.
    BadOption { option: String, reason: String },
    /// Starting or waiting for the server failed.
    Failed(String),
}

impl std::fmt::Display for HelperError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HelperError::Usage(m) => write!(
                f,
                "{m}\nusage: {HELPER_NAME} BACKING_DIR MOUNTPOINT [-sfnv] [-o OPTIONS] [-t {FS_TYPE}]"
            ),
            HelperError::UnknownOption(o) => write!(
                f,
                "unknown mount option '{o}': wb takes allow_other, shared_backing, no_calibrate, \
                 fixed_memory, data_dir=PATH, uring=auto|on|off, io_backend=NAME and engine knobs \
                 as NAME=VALUE (memory=4GiB, wbt_lat_usec=2000, ...; see `wb mount --help`)"
            ),
            HelperError::BadOption { option, reason } => {
                write!(f, "mount option '{option}': {reason}")
            }
            HelperError::Failed(m) => f.write_str(m),
        }
    }
}

impl HelperError {
    fn exit_code(&self) -> ExitCode {
        match self {
            HelperError::Failed(_) => ExitCode::from(EXIT_MOUNT_FAILED),
            _ => ExitCode::from(EXIT_USAGE),
        }
    }
}

/// A call of the helper, as mount(8) makes it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Invocation {
    pub spec: OsString,
    pub dir: OsString,
    /// The -o lists, in order.
    pub options: Vec<String>,
    /// -s: ignore (with a warning) options wb does not know.
    pub sloppy: bool,
    /// -f: check everything, mount nothing.
    pub fake: bool,
    /// -v: say what is run.
    pub verbose: bool,
}

/// Parses mount(8)'s helper arguments (after argv[0]).
pub fn parse_args(args: &[OsString]) -> Result<Invocation, HelperError> {
    let mut inv = Invocation::default();
    let mut positional = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let text = arg.to_string_lossy();
        if text == "--help" || text == "-h" {
            return Err(HelperError::Usage(
                "mount(8)'s helper for wb (see docs/service.md)".into(),
            ));
        }
        let Some(letters) = text.strip_prefix('-').filter(|l| !l.is_empty()) else {
            positional.push(arg.clone());
            continue;
        };
        let mut letters = letters.chars();
        while let Some(letter) = letters.next() {
            match letter {
                's' => inv.sloppy = true,
                'f' => inv.fake = true,
                'n' | 'w' => {}
                'v' => inv.verbose = true,
                'o' | 't' | 'N' => {
                    let attached: String = letters.by_ref().collect();
                    let value = match attached.is_empty() {
                        false => attached,
                        true => rest
                            .next()
                            .map(|v| v.to_string_lossy().into_owned())
                            .ok_or_else(|| {
                                HelperError::Usage(format!("-{letter} needs a value"))
                            })?,
                    };
                    option_arg(&mut inv, letter, value)?;
                }
                'r' => {
                    return Err(HelperError::BadOption {
                        option: "ro".into(),
                        reason: "wb mounts are read-write only".into(),
                    })
                }
                other => return Err(HelperError::Usage(format!("unknown argument -{other}"))),
            }
        }
    }
    let [spec, dir] = <[OsString; 2]>::try_from(positional).map_err(|p| {
        HelperError::Usage(format!(
            "expected BACKING_DIR and MOUNTPOINT, got {} path(s)",
            p.len()
        ))
    })?;
    inv.spec = spec;
    inv.dir = dir;
    Ok(inv)
}

/// An argument with a value: -o OPTIONS, -t TYPE, -N NAMESPACE.
fn option_arg(inv: &mut Invocation, letter: char, value: String) -> Result<(), HelperError> {
    match letter {
        'o' => inv.options.push(value),
        't' if value == FS_TYPE || value == "fuse" => {}
        't' => {
            return Err(HelperError::Usage(format!(
                "filesystem type '{value}': this helper mounts {FS_TYPE}"
            )))
        }
        _ => {
            return Err(HelperError::Usage(format!(
                "-N {value}: mounting in another namespace is not supported"
            )))
        }
    }
    Ok(())
}

/// What the -o options ask `wb mount` for.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Mapped {
    /// `wb mount` arguments (besides the two paths and --data-dir).
    pub args: Vec<String>,
    /// data_dir=PATH, if given.
    pub data_dir: Option<PathBuf>,
    /// Options ignored with -s (sloppy), to be warned about.
    pub ignored: Vec<String>,
}

/// Maps comma-separated mount options to `wb mount` arguments.
pub fn map_options(lists: &[String], sloppy: bool) -> Result<Mapped, HelperError> {
    let mut mapped = Mapped::default();
    for option in lists.iter().flat_map(|l| l.split(',')).map(str::trim) {
        if option.is_empty()
            || IGNORED.contains(&option)
            || IGNORED_PREFIXES.iter().any(|p| option.starts_with(p))
        {
            continue;
        }
        match map_one(option, &mut mapped) {
            Err(HelperError::UnknownOption(o)) if sloppy => mapped.ignored.push(o),
            result => result?,
        }
    }
    Ok(mapped)
}

fn map_one(option: &str, mapped: &mut Mapped) -> Result<(), HelperError> {
    let bad = |reason: &str| HelperError::BadOption {
        option: option.to_string(),
        reason: reason.to_string(),
    };
    let (name, value) = match option.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (option, None),
    };
    if name == "ro" {
        return Err(bad("wb mounts are read-write only"));
    }
    if wb_fuse::MountFlag::named(name).is_some() {
        if value.is_some() {
            return Err(bad("takes no value"));
        }
        mapped.args.extend(["--flag".to_string(), name.to_string()]);
        return Ok(());
    }
    if let Some((_, flag)) = FLAGS.iter().find(|(n, _)| *n == name) {
        if value.is_some() {
            return Err(bad("takes no value"));
        }
        mapped.args.push(flag.to_string());
        return Ok(());
    }
    let known_knob =
        wb_engine::Config::KNOBS.contains(&name) || wb_engine::DeviceConfig::KNOBS.contains(&name);
    let valued = VALUED.iter().find(|(n, _)| *n == name);
    if valued.is_none() && !known_knob {
        return Err(HelperError::UnknownOption(option.to_string()));
    }
    let value = value
        .filter(|v| !v.is_empty())
        .ok_or_else(|| bad("needs a value (NAME=VALUE)"))?;
    match valued {
        Some(("data_dir", _)) => mapped.data_dir = Some(PathBuf::from(value)),
        Some((_, arg)) => mapped.args.extend([arg.to_string(), value.to_string()]),
        None => mapped
            .args
            .extend(["--set".to_string(), format!("{name}={value}")]),
    }
    Ok(())
}

/// `wb` called as `mount.fuse.wb`: mounts and returns once serving.
pub fn run(args: &[OsString]) -> ExitCode {
    match mount(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{HELPER_NAME}: {e}");
            e.exit_code()
        }
    }
}

fn mount(args: &[OsString]) -> Result<(), HelperError> {
    let inv = parse_args(args)?;
    let mapped = map_options(&inv.options, inv.sloppy)?;
    for option in &mapped.ignored {
        eprintln!("{HELPER_NAME}: ignoring unknown option '{option}' (-s)");
    }
    let data_dir = match &mapped.data_dir {
        Some(dir) => dir.clone(),
        None => crate::state_dir::default_dir().map_err(|e| HelperError::Failed(e.to_string()))?,
    };
    let command = server_command(&inv, &mapped, &data_dir)?;
    if inv.verbose || inv.fake {
        eprintln!(
            "{HELPER_NAME}: running {} in the background",
            command_line(&command)
        );
    }
    if inv.fake {
        return Ok(());
    }
    crate::state_dir::ensure(&data_dir).map_err(|e| HelperError::Failed(e.to_string()))?;
    let log_path = data_dir.join(log_name(Path::new(&inv.dir)));
    let (mut child, ready, log_start) = start_server(command, &log_path)?;
    match wait_ready(&ready, &mut child) {
        Ok(()) => {
            if inv.verbose {
                eprintln!(
                    "{HELPER_NAME}: serving (pid {}; log {})",
                    child.id(),
                    log_path.display()
                );
            }
            Ok(())
        }
        Err(why) => {
            copy_log(&log_path, log_start);
            Err(HelperError::Failed(format!(
                "{why} (its log: {})",
                log_path.display()
            )))
        }
    }
}

/// Starts the server `command` in a new session with its output appended
/// to `log_path` (the previous log moved to `.old` once past
/// [`LOG_KEEP_BYTES`]), told to notify a fresh readiness socket: the
/// child, that socket, and where in the log its output begins.
fn start_server(
    mut command: Command,
    log_path: &Path,
) -> Result<(Child, UnixDatagram, u64), HelperError> {
    if fs::metadata(log_path).is_ok_and(|m| m.len() > LOG_KEEP_BYTES) {
        let _ = fs::rename(log_path, log_path.with_extension("log.old"));
    }
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path)
        .map_err(|e| failed(format!("opening the log {}", log_path.display()), e))?;
    let log_start = log
        .metadata()
        .map_err(|e| failed(format!("reading the log {}", log_path.display()), e))?
        .len();
    let (ready, name) = ready_socket()?;
    command
        .env(NOTIFY_SOCKET, &name)
        .env(NOTIFY_READY_ONLY, "1")
        .stdin(Stdio::null())
        .stdout(
            log.try_clone()
                .map_err(|e| failed("duplicating the log's descriptor", e))?,
        )
        .stderr(log);
    // SAFETY: the closure runs in the child between fork and exec, where
    // only async-signal-safe calls are allowed: setsid(2) is one, and
    // nix's wrapper neither allocates nor locks; it touches no memory of
    // the parent.
    unsafe {
        command.pre_exec(|| {
            nix::unistd::setsid()
                .map(drop)
                .map_err(std::io::Error::from)
        });
    }
    let child = command
        .spawn()
        .map_err(|e| failed("starting wb mount", e))?;
    Ok((child, ready, log_start))
}

fn failed(context: impl std::fmt::Display, e: impl std::fmt::Display) -> HelperError {
    HelperError::Failed(format!("{context}: {e}"))
}

/// `wb mount SPEC DIR ARGS --data-dir DATA_DIR` from this executable.
fn server_command(
    inv: &Invocation,
    mapped: &Mapped,
    data_dir: &Path,
) -> Result<Command, HelperError> {
    let wb = std::env::current_exe().map_err(|e| failed("finding the wb executable", e))?;
    let mut command = Command::new(wb);
    command
        .arg0("wb")
        .arg("mount")
        .arg(&inv.spec)
        .arg(&inv.dir)
        .args(&mapped.args)
        .arg("--data-dir")
        .arg(data_dir);
    Ok(command)
}

/// `command` as a shell would show it (arguments with spaces quoted).
fn command_line(command: &Command) -> String {
    let mut words = vec![command.get_program().to_string_lossy().into_owned()];
    for arg in command.get_args() {
        let arg = arg.to_string_lossy();
        words.push(match arg.contains(char::is_whitespace) {
            true => format!("'{arg}'"),
            false => arg.into_owned(),
        });
    }
    words.join(" ")
}

/// The log of the server of `mountpoint`: mount-mnt-wb.log for /mnt/wb.
pub fn log_name(mountpoint: &Path) -> String {
    let escaped: String = mountpoint
        .to_string_lossy()
        .trim_matches('/')
        .chars()
        .map(|c| match c {
            c if c.is_ascii_alphanumeric() || c == '.' || c == '_' => c,
            _ => '-',
        })
        .collect();
    match escaped.is_empty() {
        true => "mount-root.log".to_string(),
        false => format!("mount-{escaped}.log"),
    }
}

/// A datagram socket bound to a fresh abstract name, and that name as
/// NOTIFY_SOCKET gives it (`@...`).
fn ready_socket() -> Result<(UnixDatagram, OsString), HelperError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let name = OsString::from(format!("@wb-mount-helper-{}-{nanos}", std::process::id()));
    let addr = address(&name).map_err(|e| failed("naming the readiness socket", e))?;
    let socket =
        UnixDatagram::bind_addr(&addr).map_err(|e| failed("binding the readiness socket", e))?;
    socket
        .set_read_timeout(Some(READY_POLL))
        .map_err(|e| failed("setting up the readiness socket", e))?;
    Ok((socket, name))
}

/// Waits for READY=1 from the server; Err: why it will not come.
fn wait_ready(socket: &UnixDatagram, child: &mut Child) -> Result<(), String> {
    let deadline = Instant::now() + READY_TIMEOUT;
    let mut buf = [0u8; 4096];
    loop {
        match socket.recv(&mut buf) {
            Ok(n) if is_ready(&buf[..n]) => return Ok(()),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(format!("waiting for wb mount to serve: {e}")),
        }
        match child.try_wait() {
            Ok(Some(status)) => return Err(format!("wb mount exited ({status}) before serving")),
            Ok(None) => {}
            Err(e) => return Err(format!("waiting for wb mount: {e}")),
        }
        if Instant::now() >= deadline {
            // SIGTERM: it stops as at any signal (nothing is mounted yet,
            // or it unmounts and writes back).
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            return Err(format!(
                "wb mount did not serve within {} s; stopped it",
                READY_TIMEOUT.as_secs()
            ));
        }
    }
}

/// Whether a notification says READY=1.
fn is_ready(message: &[u8]) -> bool {
    String::from_utf8_lossy(message)
        .lines()
        .any(|l| l == "READY=1")
}

/// Copies what the server wrote to its log since `start` to stderr (its
/// reason for failing), at most the last 64 KiB.
fn copy_log(path: &Path, start: u64) {
    const MOST_BYTES: u64 = 64 << 10;
    let Ok(mut file) = File::open(path) else {
        return;
    };
    let end = file.metadata().map_or(start, |m| m.len());
    let from = start.max(end.saturating_sub(MOST_BYTES));
    let mut text = String::new();
    if file.seek(SeekFrom::Start(from)).is_ok() && file.read_to_string(&mut text).is_ok() {
        eprint!("{text}");
    }
}

/// Whether `argv0` names the helper.
pub fn called_as_helper(argv0: &OsStr) -> bool {
    Path::new(argv0)
        .file_name()
        .is_some_and(|n| n == HELPER_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn mount8s_calling_convention_parses() {
        let inv = parse_args(&args(&[
            "/srv/data",
            "/mnt/wb",
            "-n",
            "-sv",
            "-o",
            "rw,memory=4GiB",
            "-t",
            "fuse.wb",
            "-oallow_other",
        ]))
        .expect("parses");
        assert_eq!(inv.spec, "/srv/data");
        assert_eq!(inv.dir, "/mnt/wb");
        assert_eq!(inv.options, ["rw,memory=4GiB", "allow_other"]);
        assert!(inv.sloppy && inv.verbose && !inv.fake);
        let err = parse_args(&args(&["/srv/data", "/mnt/wb", "-N", "/proc/1/ns/mnt"]));
        assert_eq!(
            err,
            Err(HelperError::Usage(
                "-N /proc/1/ns/mnt: mounting in another namespace is not supported".into()
            ))
        );
        assert!(matches!(
            parse_args(&args(&["/srv/data"])),
            Err(HelperError::Usage(_))
        ));
        assert!(matches!(
            parse_args(&args(&["a", "b", "-o"])),
            Err(HelperError::Usage(_))
        ));
    }

    #[test]
    fn options_map_to_wb_mount_arguments() {
        let lists = ["defaults,nofail,_netdev,x-systemd.automount,noauto,rw,relatime,nosuid,nodev,fsname=x,subtype=wb".to_string(),
            "allow_other,memory=4GiB,wbt_lat_usec=2000,uring=off,shared_backing,data_dir=/var/lib/wb2".to_string()];
        let mapped = map_options(&lists, false).expect("maps");
        assert_eq!(
            mapped.args,
            [
                "--flag",
                "nosuid",
                "--flag",
                "nodev",
                "--allow-other",
                "--set",
                "memory=4GiB",
                "--set",
                "wbt_lat_usec=2000",
                "--uring",
                "off",
                "--shared-backing",
            ]
        );
        assert_eq!(mapped.data_dir, Some(PathBuf::from("/var/lib/wb2")));
        assert!(mapped.ignored.is_empty());
    }

    #[test]
    fn unknown_and_misused_options_are_refused_unless_sloppy() {
        let one = |o: &str| map_options(&[o.to_string()], false);
        assert_eq!(
            one("bogus=1"),
            Err(HelperError::UnknownOption("bogus=1".into()))
        );
        assert_eq!(
            one("noexec=1"),
            Err(HelperError::BadOption {
                option: "noexec=1".into(),
                reason: "takes no value".into()
            })
        );
        assert!(matches!(
            one("allow_other=1"),
            Err(HelperError::BadOption { .. })
        ));
        assert!(matches!(one("memory"), Err(HelperError::BadOption { .. })));
        assert!(matches!(one("ro"), Err(HelperError::BadOption { .. })));
        let sloppy = map_options(&["bogus,memory=1GiB".to_string()], true).expect("sloppy");
        assert_eq!(sloppy.ignored, ["bogus"]);
        assert_eq!(sloppy.args, ["--set", "memory=1GiB"]);
    }

    #[test]
    fn log_names_follow_the_mountpoint() {
        assert_eq!(log_name(Path::new("/mnt/wb")), "mount-mnt-wb.log");
        assert_eq!(log_name(Path::new("/mnt/a b/")), "mount-mnt-a-b.log");
        assert_eq!(log_name(Path::new("/")), "mount-root.log");
        assert!(called_as_helper(OsStr::new("/sbin/mount.fuse.wb")));
        assert!(!called_as_helper(OsStr::new("/usr/local/bin/wb")));
    }
}
