//! `wb completions SHELL` and `wb man --dir DIR`: shell completions and
//! man pages, both generated from the command line's own definition (the
//! clap derive in main.rs and the modules' `Args`), so they cannot fall
//! behind it. For packagers and `cargo install` users alike:
//!
//! ```text
//! wb completions bash > /usr/share/bash-completion/completions/wb
//! wb man --dir /usr/local/share/man/man1
//! ```

use crate::{EXIT_BAD_INPUT, EXIT_FAILURE};
use clap::{Args, CommandFactory};
use clap_complete::Shell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
#[command(after_help = "\
Examples:
  wb completions bash > ~/.local/share/bash-completion/completions/wb
  wb completions zsh > ~/.zfunc/_wb        # with fpath+=~/.zfunc before compinit
  wb completions fish > ~/.config/fish/completions/wb.fish")]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(Args)]
#[command(after_help = "\
Writes wb.1 and one page per subcommand (wb-mount.1, wb-bench-db-copy.1, ...). Read one with
`man DIR/wb-mount.1`, or install them: `wb man --dir /usr/local/share/man/man1`.")]
pub struct ManArgs {
    /// The directory to write the pages to (made if missing).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
}

/// Prints the completion script for `args.shell` on standard output.
pub fn completions(args: CompletionsArgs) -> ExitCode {
    let mut cmd = crate::Cli::command();
    // Made in memory first: `generate` panics when a write fails.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "wb", &mut script);
    let mut out = std::io::stdout().lock();
    match out.write_all(&script).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wb completions: writing the script failed: {e}");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

/// Writes the man pages into `args.dir`, made if missing.
pub fn man(args: ManArgs) -> ExitCode {
    let dir = &args.dir;
    if let Err(e) = std::fs::create_dir_all(dir) {
        eprintln!("wb man: cannot make the directory {}: {e}", dir.display());
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    let mut cmd = crate::Cli::command().disable_help_subcommand(true);
    // Names every subcommand by its path (wb-bench-db-copy).
    cmd.build();
    match write_pages(&cmd, dir) {
        Ok(pages) => {
            eprintln!("wb man: {pages} pages written to {}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("wb man: writing the pages to {} failed: {e}", dir.display());
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

/// Writes the page of `cmd` and of each subcommand that `--help` shows
/// (hidden ones get none) into `dir`; Ok: how many pages.
fn write_pages(cmd: &clap::Command, dir: &Path) -> std::io::Result<usize> {
    let mut pages = 0;
    for sub in cmd.get_subcommands().filter(|sub| !sub.is_hide_set()) {
        pages += write_pages(sub, dir)?;
    }
    // Subcommands have no version of their own: every page's footer says
    // which wb it documents.
    clap_mangen::Man::new(cmd.clone())
        .source(format!("wb {}", env!("CARGO_PKG_VERSION")))
        .generate_to(dir)?;
    Ok(pages + 1)
}
