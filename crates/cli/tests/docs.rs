//! `wb completions` and `wb man`: generated from the command line's
//! definition, so they name every subcommand `wb --help` lists.

use std::path::PathBuf;

mod common;
use common::wb;

/// The subcommands `wb ARGS --help` lists (without `help`).
fn subcommands(args: &[&str]) -> Vec<String> {
    let mut all = args.to_vec();
    all.push("--help");
    let out = wb(&all);
    assert!(out.status.success(), "{all:?}");
    let text = String::from_utf8(out.stdout).expect("UTF-8 help");
    let listed = text
        .split("Commands:\n")
        .nth(1)
        .expect("the help lists commands");
    // Each command on a line of its own, indented by two; its description
    // may wrap onto lines indented further.
    listed
        .lines()
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.strip_prefix("  "))
        .filter(|line| !line.starts_with(' '))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// A fresh directory under Cargo's scratch directory for this test.
fn scratch(name: &str) -> PathBuf {
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn bash_completions_offer_every_subcommand() {
    let names = subcommands(&[]);
    for expected in ["sim", "run", "bench", "mount", "completions", "man"] {
        assert!(names.iter().any(|n| n == expected), "{expected}: {names:?}");
    }
    let out = wb(&["completions", "bash"]);
    assert!(out.status.success());
    let script = String::from_utf8(out.stdout).expect("UTF-8 script");
    // The top-level command's words: its options and subcommands.
    let top = script
        .lines()
        .find(|line| line.trim_start().starts_with("opts=\"") && line.contains(" --version "))
        .expect("the script completes wb's own words");
    let words: Vec<&str> = top.trim().trim_end_matches('"').split(' ').collect();
    for name in &names {
        assert!(words.contains(&name.as_str()), "{name} missing from {top}");
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = wb(&["completions", shell]);
        assert!(out.status.success(), "{shell}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("db-copy"),
            "{shell}"
        );
    }
}

#[test]
fn completions_refuse_an_unknown_shell_with_exit_2() {
    let out = wb(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid value 'tcsh' for '<SHELL>'")
            && stderr.contains("[possible values: bash, elvish, fish, powershell, zsh]"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn man_writes_a_page_per_command() {
    let dir = scratch("wb-man");
    let nested = dir.join("share/man/man1");
    let out = wb(&["man", "--dir", nested.to_str().expect("UTF-8 path")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut expected = vec!["wb".to_string()];
    for name in subcommands(&[]) {
        expected.push(format!("wb-{name}"));
    }
    for name in subcommands(&["bench"]) {
        expected.push(format!("wb-bench-{name}"));
    }
    for page in ["wb-mount", "wb-sim", "wb-bench-db-copy", "wb-man"] {
        assert!(expected.iter().any(|e| e == page), "{page}: {expected:?}");
    }
    let mut written: Vec<String> = std::fs::read_dir(&nested)
        .expect("the pages' directory")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    written.sort();
    let mut files: Vec<String> = expected.iter().map(|e| format!("{e}.1")).collect();
    files.sort();
    assert_eq!(written, files);
    for page in &expected {
        let text = std::fs::read_to_string(nested.join(format!("{page}.1"))).expect("a page");
        // The title comes first, after groff's definition of a quote.
        let title = text
            .lines()
            .find(|line| !line.starts_with(".ie ") && !line.starts_with(".el "))
            .expect("a first line");
        assert!(
            title.starts_with(&format!(".TH {page} 1 ")),
            "{page}: {title}"
        );
    }
    let mount = std::fs::read_to_string(nested.join("wb-mount.1")).expect("wb-mount.1");
    assert!(mount.contains(r"\fB\-\-uring\fR"), "{mount}");
    assert!(mount.contains("io_uring"), "{mount}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn man_says_when_it_cannot_make_the_directory() {
    let dir = scratch("wb-man-file");
    std::fs::create_dir_all(&dir).expect("scratch directory");
    let file = dir.join("a-file");
    std::fs::write(&file, b"x").expect("a file");
    let under = file.join("man1");
    let out = wb(&["man", "--dir", under.to_str().expect("UTF-8 path")]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "wb man: cannot make the directory {}: ",
            under.display()
        )),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
