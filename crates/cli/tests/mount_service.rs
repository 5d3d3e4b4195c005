//! `wb mount` as a service: sd_notify to a NOTIFY_SOCKET (READY=1 once
//! serving; STOPPING=1 and STATUS= lines at SIGTERM), and `wb` as
//! mount(8)'s helper /sbin/mount.fuse.wb (`mount -t fuse.wb`, an fstab
//! line with `mount -T FILE`, `umount`, options it refuses).
//!
//! The tests that mount need root and /dev/fuse (and util-linux's mount
//! for the helper); without them they skip saying why, except under
//! `WB_REQUIRE_ALL_TESTS`, where that fails. They run one at a time (a
//! lock), wait for conditions with bounded polling, and always clean up in
//! Drop guards: the mount, the server process, and /sbin/mount.fuse.wb,
//! which they create only where nothing else is installed.

mod common;
use common::mount::*;
use std::fs;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Where mount(8) looks for the helper first.
const SBIN_HELPER: &str = "/sbin/mount.fuse.wb";
/// How often conditions are looked at.
const POLL: Duration = Duration::from_millis(20);

macro_rules! require_mount {
    () => {
        if let Some(reason) = skip_reason(false) {
            wb_testkit::skip(&reason);
            return;
        }
    };
}

/// Polls `done` until it holds or `limit` passes; whether it held.
fn wait_for(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(POLL);
    }
    done()
}

/// The notifications received until `until` holds for one of them (or
/// `limit` passes).
fn receive_until(
    socket: &UnixDatagram,
    limit: Duration,
    until: impl Fn(&str) -> bool,
) -> Vec<String> {
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("set a read timeout");
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while start.elapsed() < limit {
        if let Ok(n) = socket.recv(&mut buf) {
            let message = String::from_utf8_lossy(&buf[..n]).into_owned();
            let last = until(&message);
            got.push(message);
            if last {
                break;
            }
        }
    }
    got
}

#[test]
fn notify_socket_hears_ready_then_stopping_and_status_at_sigterm() {
    require_mount!();
    let _serial = serial();
    let root = TempRoot::new("notify");
    let (backing, mnt) = (root.dir("backing"), root.dir("mnt"));
    let socket_path = root.0.join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).expect("bind the notify socket");
    let mut cmd = Command::new(WB);
    cmd.arg("mount")
        .arg(&backing)
        .arg(&mnt)
        .args(["--no-calibrate", "--set", TEST_MEMORY, "--data-dir"])
        .arg(root.0.join("wb-data"))
        .env("NOTIFY_SOCKET", &socket_path);
    let mount = Mount::spawn(cmd, &backing, &mnt);

    let ready = receive_until(&socket, MOUNT_TIMEOUT, |m| m.starts_with("READY=1\n"));
    let serving = format!("READY=1\nSTATUS={}", &mount.serving["wb: ".len()..]);
    assert_eq!(ready, [serving]);

    let mut data = vec![0u8; 8 << 20];
    pattern(38, &mut data);
    fs::write(mnt.join("f"), &data).expect("write through the mount");
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");

    let end = "STATUS=all data written back; exiting";
    let stopping = receive_until(&socket, EXIT_TIMEOUT, |m| m == end);
    let first = stopping.first().map(String::as_str).unwrap_or_default();
    assert!(
        first.starts_with("STOPPING=1\nSTATUS=SIGTERM; writing back ")
            && first.contains(&format!("to {}", backing.display())),
        "{stopping:?}"
    );
    assert_eq!(
        stopping.last().map(String::as_str),
        Some(end),
        "{stopping:?}"
    );
    // Progress lines, if the write-back took long enough for any.
    for middle in &stopping[1..stopping.len() - 1] {
        assert!(middle.starts_with("STATUS=writing back: "), "{middle}");
    }
    assert!(err.contains("wb: SIGTERM; writing back "), "{err}");
    assert!(fs::read(backing.join("f")).expect("read back") == data);
}

#[test]
fn an_unusable_notify_socket_is_said_once_and_the_mount_serves() {
    require_mount!();
    let _serial = serial();
    let root = TempRoot::new("notify-bad");
    let (backing, mnt) = (root.dir("backing"), root.dir("mnt"));
    let mut cmd = Command::new(WB);
    cmd.arg("mount")
        .arg(&backing)
        .arg(&mnt)
        .args(["--no-calibrate", "--set", TEST_MEMORY, "--data-dir"])
        .arg(root.0.join("wb-data"))
        .env("NOTIFY_SOCKET", root.0.join("nobody-listens.sock"));
    let mount = Mount::spawn(cmd, &backing, &mnt);
    fs::write(mnt.join("f"), b"kept").expect("write through the mount");
    let (status, err) = mount.stop();
    assert!(status.success(), "{status}: {err}");
    let said: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("notifying the service manager"))
        .collect();
    assert_eq!(
        said,
        ["wb mount: notifying the service manager (READY=1) failed: \
          No such file or directory (os error 2); not trying again"],
        "{err}"
    );
    assert_eq!(fs::read(backing.join("f")).expect("read back"), b"kept");
}

/// /sbin/mount.fuse.wb pointing at the `wb` under test for the guard's
/// life: made where absent (removed after), or put back as it was where
/// it was a symlink to another `wb`.
struct SbinHelper {
    previous: Option<PathBuf>,
}

impl SbinHelper {
    /// None (after skipping, with the reason) where something else is
    /// installed there.
    fn install() -> Option<SbinHelper> {
        let path = Path::new(SBIN_HELPER);
        let previous = match fs::symlink_metadata(path) {
            Err(_) => None,
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = fs::read_link(path).expect("read the helper's link");
                if target.file_name().is_none_or(|n| n != "wb") {
                    wb_testkit::skip(&format!(
                        "{SBIN_HELPER} links to {}, not to a wb",
                        target.display()
                    ));
                    return None;
                }
                fs::remove_file(path).expect("remove the old helper link");
                Some(target)
            }
            Ok(_) => {
                wb_testkit::skip(&format!("{SBIN_HELPER} is a file, not a link to wb"));
                return None;
            }
        };
        std::os::unix::fs::symlink(WB, path).expect("link the helper");
        Some(SbinHelper { previous })
    }
}

impl Drop for SbinHelper {
    fn drop(&mut self) {
        let _ = fs::remove_file(SBIN_HELPER);
        if let Some(previous) = &self.previous {
            let _ = std::os::unix::fs::symlink(previous, SBIN_HELPER);
        }
    }
}

/// The pid of the `wb mount` serving `mnt`, from /proc.
fn server_of(mnt: &Path) -> Option<u32> {
    let want = mnt.as_os_str().as_encoded_bytes();
    fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
        let cmdline = fs::read(entry.path().join("cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        (args.get(1) == Some(&&b"mount"[..]) && args.get(3) == Some(&want)).then_some(pid)
    })
}

/// Whether process `pid` is gone (or a zombie no one reaped yet).
fn gone(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// The filesystem type of the mount at `mnt`, from /proc/self/mountinfo.
fn mount_type(mnt: &Path) -> Option<String> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = mnt.to_string_lossy();
    info.lines()
        .filter(|l| l.split(' ').nth(4) == Some(want.as_ref()))
        .filter_map(|l| l.split_once(" - ")?.1.split(' ').next().map(String::from))
        .next_back()
}

/// Unmounts `mnt` and ends its server, if the test did not.
struct MountedByHelper {
    mnt: PathBuf,
}

impl Drop for MountedByHelper {
    fn drop(&mut self) {
        let server = server_of(&self.mnt);
        if is_mounted(&self.mnt) {
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        }
        if let Some(pid) = server {
            if !wait_for(EXIT_TIMEOUT, || gone(pid)) {
                let _ = Command::new("kill")
                    .arg("-KILL")
                    .arg(pid.to_string())
                    .status();
            }
        }
    }
}

/// Writes through the mount at `mnt`, unmounts it with umount(8), and
/// checks that the server wrote the data back to `backing` and exited.
fn write_umount_and_check(backing: &Path, mnt: &Path, seed: u64) {
    let pid = server_of(mnt).expect("a wb mount process serves the mount");
    let mut data = vec![0u8; 8 << 20];
    pattern(seed, &mut data);
    fs::write(mnt.join("f"), &data).expect("write through the mount");
    run(Command::new("umount").arg(mnt));
    assert!(!is_mounted(mnt), "{} still mounted", mnt.display());
    assert!(
        wait_for(EXIT_TIMEOUT, || gone(pid)),
        "wb mount (pid {pid}) still runs {EXIT_TIMEOUT:?} after umount"
    );
    assert!(fs::read(backing.join("f")).expect("read back") == data);
}

fn mount_cmd(args: &[&std::ffi::OsStr]) -> Output {
    Command::new("mount")
        .args(args)
        .output()
        .expect("run mount")
}

fn mount_tool_missing() -> bool {
    Command::new("mount").arg("--version").output().is_err()
}

/// A test of mount(8) with /sbin/mount.fuse.wb: serialised with the other
/// mount tests, the helper installed, a backing directory and a
/// mountpoint, and whatever stays mounted unmounted at the end. Fields
/// drop in order: the mount, the directories, the helper, the lock.
struct HelperCase {
    _mounted: MountedByHelper,
    root: TempRoot,
    backing: PathBuf,
    mnt: PathBuf,
    _helper: SbinHelper,
    _serial: std::sync::MutexGuard<'static, ()>,
}

impl HelperCase {
    /// None (after skipping, with the reason) without root, /dev/fuse,
    /// util-linux's mount or a free /sbin/mount.fuse.wb.
    fn new(name: &str) -> Option<HelperCase> {
        if let Some(reason) = skip_reason(false) {
            wb_testkit::skip(&reason);
            return None;
        }
        if mount_tool_missing() {
            wb_testkit::skip("util-linux's mount is not installed");
            return None;
        }
        let serial = serial();
        let helper = SbinHelper::install()?;
        let root = TempRoot::new(name);
        let (backing, mnt) = (root.dir("backing"), root.dir("mnt"));
        Some(HelperCase {
            _mounted: MountedByHelper { mnt: mnt.clone() },
            root,
            backing,
            mnt,
            _helper: helper,
            _serial: serial,
        })
    }
}

#[test]
fn mount_t_fuse_wb_serves_and_umount_writes_back() {
    let Some(case) = HelperCase::new("mount-t") else {
        return;
    };
    let (root, backing, mnt) = (&case.root, &case.backing, &case.mnt);
    let data_dir = root.0.join("state");
    let options = format!("memory=256MiB,no_calibrate,data_dir={}", data_dir.display());
    let out = mount_cmd(&[
        "-t".as_ref(),
        "fuse.wb".as_ref(),
        backing.as_os_str(),
        mnt.as_os_str(),
        "-o".as_ref(),
        options.as_ref(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {err}", out.status);
    // Mounted and serving by the time mount(8) returned, as type fuse.wb.
    assert_eq!(mount_type(mnt).as_deref(), Some("fuse.wb"));
    let log_path = data_dir.join(format!(
        "mount-{}.log",
        mnt.to_string_lossy().trim_matches('/').replace('/', "-")
    ));
    let log = fs::read_to_string(&log_path).expect("the server's log in the state directory");
    let serving = format!("wb: serving {} at {}", backing.display(), mnt.display());
    assert!(log.contains(&serving), "{log}");
    write_umount_and_check(backing, mnt, 1);
    // The whole end in the log, and no complaint about the helper's
    // readiness socket, gone since the helper exited.
    let log = fs::read_to_string(&log_path).expect("the server's log");
    assert!(log.contains("wb: unmounted; writing back "), "{log}");
    assert!(
        log.ends_with("wb: all data written back; exiting\n"),
        "{log}"
    );
    assert!(!log.contains("notifying"), "{log}");

    // A knob value the server refuses: its error, mount(8)'s failure, nothing mounted.
    let out = mount_cmd(&[
        "-t".as_ref(),
        "fuse.wb".as_ref(),
        backing.as_os_str(),
        mnt.as_os_str(),
        "-o".as_ref(),
        format!("memory=lots,no_calibrate,data_dir={}", data_dir.display()).as_ref(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(32), "{err}");
    assert!(err.contains("wb mount: --set memory=lots: "), "{err}");
    assert!(
        err.contains("mount.fuse.wb: wb mount exited (exit status: 2) before serving (its log: "),
        "{err}"
    );
    assert!(!is_mounted(mnt));
}

#[test]
fn an_fstab_line_mounts_with_mount_big_t() {
    let Some(case) = HelperCase::new("fstab") else {
        return;
    };
    let (root, backing, mnt) = (&case.root, &case.backing, &case.mnt);
    let fstab = root.0.join("fstab");
    fs::write(
        &fstab,
        format!(
            "# a test fstab\n{} {} fuse.wb defaults,nofail,_netdev,x-systemd.requires=local-fs.target,\
             nosuid,nodev,noexec,noatime,memory=256MiB,no_calibrate,data_dir={} 0 0\n",
            backing.display(),
            mnt.display(),
            root.0.join("state").display()
        ),
    )
    .expect("write the fstab");
    let out = mount_cmd(&["-T".as_ref(), fstab.as_os_str(), mnt.as_os_str()]);
    assert!(
        out.status.success(),
        "{}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(is_mounted(mnt), "{} not mounted", mnt.display());
    // The line's kernel flags reach the mount (mountinfo's per-mount
    // options, the sixth field).
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").expect("read mountinfo");
    let line = mountinfo
        .lines()
        .find(|l| l.split(' ').nth(4) == Some(mnt.to_str().expect("utf-8 path")))
        .expect("the mount in mountinfo");
    let flags: Vec<&str> = line.split(' ').nth(5).unwrap_or("").split(',').collect();
    for flag in ["nosuid", "nodev", "noexec", "noatime"] {
        assert!(flags.contains(&flag), "{flag} missing: {line}");
    }
    write_umount_and_check(backing, mnt, 2);
}

#[test]
fn an_unknown_option_is_refused_and_nothing_is_mounted() {
    let root = TempRoot::new("bad-option");
    let (backing, mnt) = (root.dir("backing"), root.dir("mnt"));
    let helper = root.0.join("mount.fuse.wb");
    std::os::unix::fs::symlink(WB, &helper).expect("link the helper");
    let out = Command::new(&helper)
        .arg(&backing)
        .arg(&mnt)
        .args(["-o", "rw,memory=256MiB,bogus=1"])
        .output()
        .expect("run the helper");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "mount.fuse.wb: unknown mount option 'bogus=1': wb takes allow_other, shared_backing, \
         no_calibrate, fixed_memory, data_dir=PATH, uring=auto|on|off, io_backend=NAME and engine \
         knobs as NAME=VALUE (memory=4GiB, wbt_lat_usec=2000, ...; see `wb mount --help`)\n"
    );
    assert!(out.stdout.is_empty());
    assert!(!is_mounted(&mnt));
    assert_eq!(server_of(&mnt), None);

    let out = Command::new(&helper)
        .arg(&backing)
        .arg(&mnt)
        .args(["-o", "allow_other=yes"])
        .output()
        .expect("run the helper");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "mount.fuse.wb: mount option 'allow_other=yes': takes no value\n"
    );
    assert!(!is_mounted(&mnt));
}

#[test]
fn help_states_the_stop_bound_and_the_state_directory_order() {
    // The help, docs/service.md and the example unit say 10 s.
    assert_eq!(wb_fuse::SERVE_END_TIMEOUT, Duration::from_secs(10));
    let out = common::wb(&["mount", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout).replace('\n', " ");
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    for said in [
        "writers are throttled to keep what is dirty under the dirty limit",
        "plus up to 10 s for the serving threads to end",
        "systemd: TimeoutStopSec",
        "READY=1 once serving, STOPPING=1 when the end begins and STATUS=",
        "Default: $STATE_DIRECTORY (its first path), else /var/lib/wb as root, else \
         $XDG_STATE_HOME/wb, else $HOME/.local/state/wb",
    ] {
        assert!(help.contains(said), "--help lacks {said:?}: {help}");
    }
}

#[test]
fn a_state_directory_that_cannot_be_made_is_a_clear_error() {
    let root = TempRoot::new("state-dir");
    let (backing, mnt) = (root.dir("backing"), root.dir("mnt"));
    let file = root.0.join("a-file");
    fs::write(&file, b"").expect("make a file");
    let data_dir = file.join("state");
    let out = Command::new(WB)
        .arg("mount")
        .arg(&backing)
        .arg(&mnt)
        .arg("--data-dir")
        .arg(&data_dir)
        .output()
        .expect("run wb mount");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "wb mount: cannot create the state directory {}: Not a directory (os error 20)\n",
            data_dir.display()
        )
    );
    assert!(!is_mounted(&mnt));
}
