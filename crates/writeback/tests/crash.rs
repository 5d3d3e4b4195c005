//! Durability across a crash: a child process writes, syncs, says so, and
//! keeps writing until it is killed with SIGKILL. On reopen, everything
//! synced is there, and every unsynced page holds either its old or its
//! new content, never anything else.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use writeback::{Cache, OpenOptions};

const PAGE: usize = 4096;
const SYNCED_PAGES: usize = 256;
const UNSYNCED_PAGES: usize = 1024;

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
#[ignore = "the child process of synced_data_survives_sigkill_and_the_rest_is_old_or_new"]
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
    // Overwrite the old region forever; the parent kills us meanwhile.
    loop {
        for page in 0..UNSYNCED_PAGES {
            let at = (SYNCED_PAGES + page) * PAGE;
            f.write_at(&page_pattern(3, SYNCED_PAGES + page), at as u64)
                .unwrap();
        }
    }
}

#[test]
fn synced_data_survives_sigkill_and_the_rest_is_old_or_new() {
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
    let mut lines = BufReader::new(stdout).lines();
    let synced = lines.any(|l| l.map(|l| l.contains("synced")).unwrap_or(false));
    assert!(synced, "the child reported its sync");
    // Let it write (and its flusher write back) a little, then kill it hard.
    std::thread::sleep(std::time::Duration::from_millis(200));
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
    let mut new_pages = 0;
    for page in SYNCED_PAGES..SYNCED_PAGES + UNSYNCED_PAGES {
        let got = &after[page * PAGE..(page + 1) * PAGE];
        let is_new = got == &page_pattern(3, page)[..];
        assert!(
            is_new || got == &page_pattern(1, page)[..],
            "page {page} is neither old nor new"
        );
        new_pages += is_new as usize;
    }
    eprintln!("{new_pages} of {UNSYNCED_PAGES} unsynced pages reached the disk before the kill");
    let _ = std::fs::remove_dir_all(&dir);
}
