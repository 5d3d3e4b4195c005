//! `wb`: the command line of the writeback engine.

mod bench;
mod compare;
mod docs_cmd;
mod fsx_cmd;
mod html_file;
mod human;
mod mount_cmd;
mod mount_helper;
mod notify;
mod progress;
mod report_cmd;
mod run_cmd;
mod sim_cmd;
mod state_dir;
mod trace_file;
mod vopr_cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Exit code for bad input (scenario files, knob values, arguments).
pub const EXIT_BAD_INPUT: u8 = 2;
/// Exit code for a failure while running.
pub const EXIT_FAILURE: u8 = 1;

/// Prints `value` as pretty JSON on stdout; Err (after saying why on
/// stderr, as `command`): the exit code.
pub fn print_json(command: &str, value: &impl serde::Serialize) -> Result<(), ExitCode> {
    match serde_json::to_string_pretty(value) {
        Ok(text) => {
            println!("{text}");
            Ok(())
        }
        Err(e) => {
            eprintln!("{command}: could not encode the report: {e}");
            Err(ExitCode::from(EXIT_FAILURE))
        }
    }
}

#[derive(Parser)]
#[command(
    name = "wb",
    version,
    about = "A userspace writeback engine: buffered I/O whose background work never wrecks foreground latency",
    long_about = "A userspace writeback engine: buffered I/O whose background work never wrecks \
                  foreground latency. `wb sim` runs a scenario on the deterministic simulator \
                  (virtual time, device models); see scenarios/ for the published experiments."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario on the deterministic simulator (virtual time, device models).
    Sim(sim_cmd::SimArgs),
    /// Run a scenario for real: jobs as threads, devices as directories, real I/O.
    Run(run_cmd::RunArgs),
    /// Benchmarks of the real runtime against the kernel (interference, cached, throughput, cpu, dontcache, stable).
    Bench(bench::BenchArgs),
    /// Serve a directory through the engine with FUSE: `wb mount BACKING_DIR MOUNTPOINT`.
    Mount(mount_cmd::MountArgs),
    /// Many seeds of random scenarios on the simulator, with faults injected and an oracle checking each run.
    Vopr(vopr_cmd::VoprArgs),
    /// Random file operations checked against an in-memory model (reads, writes, truncates,
    /// fallocate, mappings, fsync), on a mount or any directory.
    Fsx(fsx_cmd::FsxArgs),
    /// An HTML report with plots of results saved with --json (`wb sim`, `wb sim --compare`, `wb run`).
    Report(report_cmd::ReportArgs),
    /// Print the completion script for a shell (bash, zsh, fish, elvish, powershell).
    Completions(docs_cmd::CompletionsArgs),
    /// Write the man pages of wb and each subcommand into a directory.
    Man(docs_cmd::ManArgs),
}

fn main() -> ExitCode {
    // Installed as /sbin/mount.fuse.wb, `wb` is mount(8)'s helper.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args
        .first()
        .is_some_and(|argv0| mount_helper::called_as_helper(argv0))
    {
        return mount_helper::run(&args[1..]);
    }
    let cli = Cli::parse_from(args);
    if !matches!(cli.command, Command::Mount(_)) {
        quiet_on_closed_pipe();
    }
    match cli.command {
        Command::Sim(args) => sim_cmd::run(args),
        Command::Run(args) => run_cmd::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Mount(args) => mount_cmd::run(args),
        Command::Vopr(args) => vopr_cmd::run(args),
        Command::Fsx(args) => fsx_cmd::run(args),
        Command::Report(args) => report_cmd::run(args),
        Command::Completions(args) => docs_cmd::completions(args),
        Command::Man(args) => docs_cmd::man(args),
    }
}

/// `wb sim ... | head` closes the pipe early: end quietly, as Unix tools
/// do, instead of panicking in `println!` (Rust ignores SIGPIPE, so a
/// write to the closed pipe fails, and `println!` panics on failure). Not
/// for `wb mount`: a closed stderr must never take a serving mount, and
/// its dirty data, down.
fn quiet_on_closed_pipe() {
    // SAFETY: signal(2) with SIG_DFL installs no handler of ours; called
    // before any thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}
