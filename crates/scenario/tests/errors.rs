//! Every error class, with the exact line it must point at and a phrase a
//! person would recognise.

mod common;

use common::{assert_error, base_with, parse_text, BASE};
use std::path::Path;

#[test]
fn base_is_valid() {
    parse_text(BASE).expect("BASE parses");
}

#[test]
fn syntax_errors_use_the_toml_span() {
    let e = assert_error(
        &base_with("model = \"hdd\"", "model = \"hdd"),
        5,
        "TOML syntax error",
    );
    // The parser notices the missing quote at the end of the line.
    assert_eq!(e.column, 13);
    assert_error(&base_with("[[job]]", "[[job]"), 7, "TOML syntax error");
    assert_error(&format!("{BASE}kind = \"reader\"\n"), 12, "duplicate key");
}

#[test]
fn display_has_path_line_and_column() {
    let e = assert_error(
        &base_with("name = \"t\"", "name = 5"),
        1,
        "expected a string",
    );
    assert_eq!(
        e.to_string(),
        "test.toml:1:8: name: expected a string, found an integer"
    );
}

#[test]
fn wrong_types() {
    let text = format!("{BASE}\n[cache]\ndirty_ratio = {{ a = 1 }}\n");
    assert_error(
        &text,
        14,
        "dirty_ratio: expected an integer or a string, found an inline table",
    );
    let text = format!("{BASE}\n[cache]\n[cache.dirty_ratio]\nx = 1\n");
    assert_error(
        &text,
        14,
        "dirty_ratio: expected an integer or a string, found a table",
    );
    assert_error(
        &base_with("name = \"t\"", "name = \"t\"\nseed = \"x\""),
        2,
        "seed: expected an integer, found a string",
    );
    assert_error(
        &base_with("name = \"t\"", "name = \"t\"\ncache = 3"),
        2,
        "cache: expected a table, found an integer",
    );
    assert_error(
        &base_with("file_size = \"1MiB\"", "file_size = true"),
        11,
        "file_size: expected a size",
    );
    let e = assert_error(
        &base_with("model = \"hdd\"", "model = \"hdd\"\nstrict_limit = [1]"),
        6,
        "found an array",
    );
    assert!(
        e.message.starts_with("device 'disk': strict_limit:"),
        "{}",
        e.message
    );
    assert_error(
        &base_with("kind = \"writer\"", "kind = \"writer\"\nsync = \"yes\""),
        10,
        "sync: expected a boolean",
    );
}

#[test]
fn device_array_must_be_tables() {
    let text = base_with(
        "[[device]]\nname = \"disk\"\nmodel = \"hdd\"\n",
        "device = \"disk\"\n",
    );
    assert_error(
        &text,
        3,
        "device: expected an array of tables ([[device]]), found a string",
    );
    let text = base_with("[[device]]", "[device]");
    assert_error(&text, 3, "found a table");
}

#[test]
fn unknown_keys() {
    let e = assert_error(
        &base_with("file_size", "blok_size = 1\nfile_size"),
        11,
        "unknown key 'blok_size' in job 'w'",
    );
    assert!(
        e.message.contains("(known for writer: files, file_size, block_size, pattern, sync, fsync_each; for every job: name"),
        "{}",
        e.message
    );
    assert_error(
        &base_with("file_size", "rate_iops = 5\nfile_size"),
        11,
        "applies only to reader jobs, not writer",
    );
    assert_error(
        &base_with("file_size", "interval = \"1s\"\nfile_size"),
        11,
        "applies only to occasional-writer or fsync-loop jobs",
    );
    assert_error(
        &base_with("model = \"hdd\"", "model = \"hdd\"\nqueue_dept = 1"),
        6,
        "unknown key 'queue_dept' in device 'disk' (known: name, model, params, wbt_lat_usec",
    );
    assert_error(
        &format!("{BASE}[cache]\nmemroy = \"1GiB\"\n"),
        13,
        "unknown key 'memroy' in [cache] (known: memory,",
    );
    assert_error(
        &base_with("name = \"t\"", "name = \"t\"\nseeed = 3"),
        2,
        "unknown key 'seeed' at the top level",
    );
}

#[test]
fn bad_knob_values_carry_the_knob_error() {
    let text = format!("{BASE}\n[cache]\nmemory = \"4GiB\"\ndirty_ratio = 150\n");
    assert_error(
        &text,
        15,
        "invalid value '150' for dirty_ratio: must be between 1 and 100",
    );
    let text = format!("{BASE}[cache]\ndirty_throttle = \"global\"\n");
    assert_error(&text, 13, "expected 'io-less' or 'global-2007'");
    let text = base_with("model = \"hdd\"", "model = \"hdd\"\nqueue_depth = 0");
    assert_error(&text, 6, "device 'disk': invalid value '0' for queue_depth");
    let text = base_with(
        "model = \"hdd\"",
        "model = \"hdd\"\nmax_ratio = 10\nmin_ratio = 20",
    );
    assert_error(&text, 7, "min_ratio (20) may not exceed max_ratio (10)");
}

#[test]
fn bad_job_values() {
    assert_error(
        &base_with("\"1MiB\"", "\"1 parsec\""),
        11,
        "unknown size unit",
    );
    assert_error(
        &base_with("\"1MiB\"", "0"),
        11,
        "file_size: must be between 1 byte and 16TiB",
    );
    assert_error(
        &base_with("file_size", "block_size = \"65MiB\"\nfile_size"),
        11,
        "block_size: must be between 1 byte and 64MiB",
    );
    assert_error(
        &base_with("file_size", "files = 0\nfile_size"),
        11,
        "files: must be between 1 and 100000, found 0",
    );
    assert_error(
        &base_with("file_size", "start = 5\nfile_size"),
        11,
        "needs a unit",
    );
    assert_error(
        &base_with("file_size", "runtime = \"0s\"\nfile_size"),
        11,
        "runtime: must be more than 0",
    );
    assert_error(
        &base_with("file_size", "domain = \"a b\"\nfile_size"),
        11,
        "'a b' is not a valid name",
    );
    assert_error(
        &base_with("\"writer\"", "\"wrter\""),
        9,
        "unknown job kind 'wrter' (expected writer, reader, occasional-writer, fsync-loop, dbench or remover)",
    );
    // A remover writes nothing, and a big file needs a size.
    let remover = base_with("\"writer\"", "\"remover\"\nfiles = 10");
    parse_text(&remover).expect("a remover parses");
    assert_error(
        &remover.replace("file_size", "mode = \"dontcache\"\nfile_size"),
        12,
        "a remover writes nothing: 'mode' applies to writing jobs",
    );
    assert_error(
        &remover.replace("files = 10", "files = 10\nbig_files = 2"),
        11,
        "big_files needs big_file_size",
    );
    assert_error(
        &remover.replace("files = 10", "files = 10\nunlink_cost = \"soon\""),
        11,
        "unlink_cost",
    );
    let reader = base_with(
        "\"writer\"",
        "\"reader\"\nruntime = \"1s\"\npattern = \"zigzag\"",
    );
    assert_error(
        &reader,
        11,
        "expected \"sequential\" or \"random\", found \"zigzag\"",
    );
    let loop_ = base_with("kind = \"writer\"", "kind = \"fsync-loop\"\ncount = -1")
        .replace("file_size = \"1MiB\"\n", "");
    assert_error(&loop_, 10, "count: must be at least 1, found -1");
}

#[test]
fn durations() {
    let top = |d: &str| base_with("name = \"t\"", &format!("name = \"t\"\nduration = {d}"));
    assert_error(
        &top("\"0s\""),
        2,
        "duration: must be more than 0 and at most 24h",
    );
    assert_error(&top("\"25h\""), 2, "at most 24h");
    assert_error(&top("60"), 2, "needs a unit");
    assert_error(&top("\"5 fortnights\""), 2, "unknown duration unit");
    assert_eq!(
        parse_text(&top("\"24h\"")).map(|s| s.duration_ns).ok(),
        Some(24 * 3600 * 1_000_000_000)
    );
}

#[test]
fn unknown_device_reference() {
    assert_error(
        &base_with("device = \"disk\"", "device = \"dsk\""),
        10,
        "job 'w': device: unknown device 'dsk' (devices: disk)",
    );
}

#[test]
fn duplicate_names() {
    let text = format!(
        "{BASE}\n[[job]]\nname = \"w\"\nkind = \"writer\"\ndevice = \"disk\"\nfile_size = 1\n"
    );
    assert_error(&text, 14, "duplicate job name 'w' (first used on line 8)");
    let text = base_with(
        "[[job]]",
        "[[device]]\nname = \"disk\"\nmodel = \"nvme\"\n\n[[job]]",
    );
    assert_error(
        &text,
        8,
        "duplicate device name 'disk' (first used on line 4)",
    );
}

#[test]
fn bad_names() {
    assert_error(
        &base_with("name = \"disk\"", "name = \"my.disk\""),
        4,
        "'my.disk' is not a valid name",
    );
    let long = "x".repeat(33);
    assert_error(
        &base_with("name = \"w\"", &format!("name = \"{long}\"")),
        8,
        "is not a valid name",
    );
    assert_error(
        &base_with("name = \"t\"", "name = \"  \""),
        1,
        "name: must not be empty",
    );
}

#[test]
fn missing_required_keys_point_at_the_header() {
    assert_error(
        &base_with("name = \"t\"\n", ""),
        1,
        "missing required key 'name'",
    );
    assert_error(
        &base_with("name = \"disk\"\n", ""),
        3,
        "device #1: missing required key 'name'",
    );
    assert_error(
        &base_with("model = \"hdd\"\n", ""),
        3,
        "device 'disk': missing required key 'model'",
    );
    assert_error(
        &base_with("file_size = \"1MiB\"\n", ""),
        7,
        "job 'w': missing required key 'file_size'",
    );
    assert_error(
        &base_with("kind = \"writer\"\n", ""),
        7,
        "job 'w': missing required key 'kind' (writer, reader",
    );
    assert_error(
        &base_with("device = \"disk\"\n", ""),
        7,
        "job 'w': missing required key 'device'",
    );
    let occasional = base_with(
        "kind = \"writer\"",
        "kind = \"occasional-writer\"\ncount = 3",
    )
    .replace("file_size = \"1MiB\"\n", "");
    assert_error(&occasional, 7, "missing required key 'interval'");
}

#[test]
fn table_counts() {
    let no_jobs = BASE.split("[[job]]").next().unwrap_or_default().to_string();
    assert_error(&no_jobs, 1, "a scenario needs at least one [[job]]");
    assert_error(
        "name = \"t\"\n",
        1,
        "a scenario needs at least one [[device]]",
    );
    assert_error(
        &format!("job = []\n{no_jobs}"),
        1,
        "a scenario needs at least one [[job]]",
    );
    let mut many = String::from("name = \"t\"\n");
    for i in 0..65 {
        many.push_str(&format!("[[device]]\nname = \"d{i}\"\nmodel = \"hdd\"\n"));
    }
    // The 65th device starts on line 2 + 64 * 3.
    assert_error(
        &many,
        2 + 64 * 3,
        "too many [[device]] tables: 65 (at most 64)",
    );
}

#[test]
fn jobs_must_finish() {
    let reader = base_with("kind = \"writer\"", "kind = \"reader\"");
    assert_error(
        &reader,
        7,
        "job 'w': a foreground reader needs runtime, or set background = true",
    );
    let background = base_with("kind = \"writer\"", "kind = \"writer\"\nbackground = true");
    assert_error(&background, 7, "at least one foreground job is required");
}

#[test]
fn min_ratio_sum() {
    let text = base_with(
        "[[job]]",
        "min_ratio = 60\n\n[[device]]\nname = \"ssd\"\nmodel = \"nvme\"\nmin_ratio = 50\n\n[[job]]",
    );
    assert_error(
        &text,
        12,
        "the devices' min_ratio add up to 110%, more than 100% (disk 60, ssd 50)",
    );
}

#[test]
fn model_validation_points_at_model() {
    assert_error(
        &base_with("\"hdd\"", "\"floppy\""),
        5,
        "device 'disk': unknown device model 'floppy'",
    );
    let params = base_with(
        "model = \"hdd\"",
        "model = \"hdd\"\n[device.params]\nreadahead_kib = \"lots\"",
    );
    assert_error(&params, 5, "readahead_kib: 'lots' is not a number");
    let params = base_with(
        "model = \"hdd\"",
        "model = \"hdd\"\nparams = { readahead_kib = true }",
    );
    assert_error(
        &params,
        6,
        "device 'disk': params: readahead_kib: expected a string or a number, found a boolean",
    );
}

#[test]
fn unreadable_and_non_utf8_files() {
    let missing = Path::new("/nonexistent/dir/scenario.toml");
    let e = wb_scenario::load(missing, &common::validate).expect_err("no such file");
    assert_eq!((e.line, e.column), (0, 0));
    assert!(e.message.contains("cannot read scenario"), "{}", e.message);
    assert!(e
        .to_string()
        .starts_with("/nonexistent/dir/scenario.toml: cannot read scenario: "));

    let dir = std::env::temp_dir().join(format!("wb-scenario-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("bad.toml");
    std::fs::write(&path, b"name = \"t\"\nx = \"\xff\"\n").expect("write");
    let e = wb_scenario::load(&path, &common::validate).expect_err("bad utf-8");
    assert_eq!((e.line, e.column), (2, 6));
    assert!(e.message.contains("not valid UTF-8"));
    std::fs::write(&path, BASE).expect("write");
    assert!(wb_scenario::load(&path, &common::validate).is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn write_mode_and_pattern() {
    let text = base_with(
        "kind = \"writer\"",
        "kind = \"writer\"\nmode = \"dontcache\"\npattern = \"random\"",
    );
    match parse_text(&text) {
        Ok(s) => {
            assert_eq!(s.jobs[0].mode, wb_scenario::WriteMode::Dontcache);
            assert!(matches!(
                s.jobs[0].kind,
                wb_scenario::JobKind::Writer { random: true, .. }
            ));
        }
        Err(e) => panic!("{e}"),
    }
    assert_error(
        &base_with(
            "kind = \"writer\"",
            "kind = \"writer\"\nmode = \"direct-ish\"",
        ),
        10,
        "unknown mode \"direct-ish\" (known: buffered, dontcache, direct)",
    );
    assert_error(
        &base_with(
            "kind = \"writer\"",
            "kind = \"writer\"\npattern = \"zigzag\"",
        ),
        10,
        "expected \"sequential\" or \"random\", found \"zigzag\"",
    );
}

#[test]
fn a_reader_block_larger_than_its_file() {
    let text = format!(
        "{BASE}\n[[job]]\nname = \"r\"\nkind = \"reader\"\ndevice = \"disk\"\nfile_size = \"1KiB\"\nblock_size = \"4KiB\"\nbackground = true\n"
    );
    assert_error(
        &text,
        18,
        "a reader's block_size (4096 bytes) must not exceed its file_size (1024 bytes)",
    );
}

#[test]
fn dbench_jobs() {
    let job = |extra: &str| {
        format!(
            "{BASE}\n[[job]]\nname = \"c\"\nkind = \"dbench\"\ndevice = \"disk\"\nfile_size = \"1KiB\"\ncount = 10\n{extra}"
        )
    };
    assert_error(
        &job("block_size = \"4KiB\"\n"),
        19,
        "a dbench job's block_size (4096 bytes) must not exceed its file_size (1024 bytes)",
    );
    assert_error(
        &job("block_size = \"1KiB\"\nflush_every = -1\n"),
        20,
        "must be between 0 and 1000000, found -1",
    );
    assert_error(
        &job("block_size = \"1KiB\"\npattern = \"random\"\n"),
        20,
        "key 'pattern' in job 'c' applies only to writer or reader jobs, not dbench",
    );
}
