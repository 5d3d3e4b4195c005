//! Durability across a crash: a child process writes, syncs, says so;
//! overwrites the rest, writes it back (`File::write_back`, no flush),
//! says so; and keeps overwriting until it is killed with SIGKILL. On
//! reopen, everything synced is there, everything written back is there
//! (a kill of the process loses nothing that landed), and every page
//! holds one of the contents written to it, never anything else.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use writeback::{Cache, OpenOptions};

const PAGE: usize = 4096;
const SYNCED_PAGES: usize = 256;
const UNSYNCED_PAGES: usize = 1024;
/// How long the parent waits for the child's reports (a second or so on
/// an idle machine).
const CHILD_PATIENCE: Duration = Duration::from_secs(60);

fn page_pattern(generation: u8, page: usize) -> Vec<u8> {
    let mut p = vec![generation; PAGE];
    p[..8].copy_from_slice(&(page as u64).to_le_bytes());
    p
}

/// The child's work: the crash test runs this binary with `--ignored
/// --exact crash_child`. Ignored, so a plain run lists it as ignored
/// instead of counting it as a test that passed; run by hand without
/// WB_CRASH_CHILD it fails and says why.
#[test]
#[ignore = "the child process of synced_and_written_back_data_survive_sigkill"]
fn crash_child() {
    let path = std::env::var("WB_CRASH_CHILD")
        .expect("crash_child is the crash test's child: set WB_CRASH_CHILD to the file to write");
    let cache = Cache::builder()
        .knob("memory", "64MiB")
        .unwrap()
        .calibrate(false)
        .build()
        .unwrap();
    let f = cache.open(&path, OpenOptions::default()).unwrap();
    for page in 0..SYNCED_PAGES {
        f.write_at(&page_pattern(2, page), (page * PAGE) as u64)
            .unwrap();
    }
    f.sync_data().unwrap();
    println!("synced");
    let overwrite = |generation| {
        for page in 0..UNSYNCED_PAGES {
            let at = (SYNCED_PAGES + page) * PAGE;
            f.write_at(&page_pattern(generation, SYNCED_PAGES + page), at as u64)
                .unwrap();
        }
    };
    overwrite(3);
    f.write_back().unwrap();
    println!("written back");
    // Overwrite the region forever; the parent kills us meanwhile.
    loop {
        overwrite(4);
    }
}

#[test]
fn synced_and_written_back_data_survive_sigkill() {
    if std::env::var("WB_CRASH_CHILD").is_ok() {
        return;
    }
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("crash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    if !writeback::io::supports_direct(&dir) {
        wb_testkit::skip(&format!("no O_DIRECT in {}", dir.display()));
        return;
    }
    let path = dir.join("f");
    // Old content everywhere, durable before the child starts.
    let mut old = Vec::new();
    for page in 0..SYNCED_PAGES + UNSYNCED_PAGES {
        old.extend(page_pattern(1, page));
    }
    std::fs::write(&path, &old).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "crash_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("WB_CRASH_CHILD", &path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Whether the child says `what` within CHILD_PATIENCE (its stdout
    // closing or the time running out is a no). The first line follows
    // libtest's "test crash_child ... ".
    let deadline = Instant::now() + CHILD_PATIENCE;
    let says = |what: &str| loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.ends_with(what) => break true,
            Ok(_) => {}
            Err(_) => break false,
        }
    };
    let (synced, written_back) = (says("synced"), says("written back"));
    if !(synced && written_back) {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(synced, "the child reported its sync");
    assert!(written_back, "the child reported its write-back");
    // Killed hard while it overwrites (and its flusher writes back).
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let after = std::fs::read(&path).unwrap();
    assert!(after.len() >= old.len());
    for page in 0..SYNCED_PAGES {
        assert!(
            after[page * PAGE..(page + 1) * PAGE] == page_pattern(2, page)[..],
            "synced page {page} lost"
        );
    }
    for page in SYNCED_PAGES..SYNCED_PAGES + UNSYNCED_PAGES {
        let got = &after[page * PAGE..(page + 1) * PAGE];
        assert!(
            got == &page_pattern(3, page)[..] || got == &page_pattern(4, page)[..],
            "{}",
            if got == &page_pattern(1, page)[..] {
                format!("page {page}: written back before the kill, old again after it")
            } else {
                format!("page {page} is neither the written-back nor a later content")
            }
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
