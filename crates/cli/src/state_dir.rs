//! Where `wb` keeps its state (device calibrations, the mount helper's
//! logs) when `--data-dir` is not given: the directory a service's state
//! conventionally lives in, picked in this order —
//!
//! 1. `$STATE_DIRECTORY` (systemd's `StateDirectory=`; the first of
//!    several colon-separated paths);
//! 2. `/var/lib/wb` when running as root (euid 0);
//! 3. `$XDG_STATE_HOME/wb`;
//! 4. `$HOME/.local/state/wb`.
//!
//! Empty or relative values are skipped, as the XDG base directory
//! specification says. The pick is a pure function of the environment
//! ([`pick`]) so that it can be tested without touching the process's.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The state directory of root's `wb`.
pub const ROOT_STATE_DIR: &str = "/var/lib/wb";
/// Why no state directory could be found or made.
#[derive(Debug)]
pub enum StateDirError {
    /// None of the variables is set to an absolute path, and not root.
    Unknown,
    /// It could not be created.
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl std::fmt::Display for StateDirError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateDirError::Unknown => write!(
                f,
                "no state directory: none of STATE_DIRECTORY, XDG_STATE_HOME or HOME \
                 is an absolute path (and not root, so not {ROOT_STATE_DIR}); pass --data-dir DIR"
            ),
            StateDirError::Create { path, source } => write!(
                f,
                "cannot create the state directory {}: {source}",
                path.display()
            ),
        }
    }
}

impl std::error::Error for StateDirError {}

/// The state directory for an environment read through `var`, as root
/// or not (see the module's order); None if none applies.
pub fn pick(var: impl Fn(&str) -> Option<OsString>, root: bool) -> Option<PathBuf> {
    let absolute = |value: OsString| {
        let path = PathBuf::from(value);
        path.is_absolute().then_some(path)
    };
    if let Some(dirs) = var("STATE_DIRECTORY") {
        let first = dirs.to_string_lossy().split(':').next().map(OsString::from);
        if let Some(path) = first.and_then(absolute) {
            return Some(path);
        }
    }
    if root {
        return Some(PathBuf::from(ROOT_STATE_DIR));
    }
    if let Some(path) = var("XDG_STATE_HOME").and_then(absolute) {
        return Some(path.join("wb"));
    }
    var("HOME")
        .and_then(absolute)
        .map(|home| home.join(".local/state/wb"))
}

/// The state directory of this process (its environment and euid).
pub fn default_dir() -> Result<PathBuf, StateDirError> {
    pick(
        |name| std::env::var_os(name),
        nix::unistd::geteuid().is_root(),
    )
    .ok_or(StateDirError::Unknown)
}

/// The default of `--data-dir` for clap: [`default_dir`], or an empty
/// path when there is none ([`ensure`] then says why).
pub fn clap_default() -> OsString {
    default_dir().map(OsString::from).unwrap_or_default()
}

/// Makes `dir` (a `--data-dir`, perhaps the default) if missing, with its
/// parents.
pub fn ensure(dir: &Path) -> Result<(), StateDirError> {
    if dir.as_os_str().is_empty() {
        return Err(StateDirError::Unknown);
    }
    std::fs::create_dir_all(dir).map_err(|source| StateDirError::Create {
        path: dir.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let map: BTreeMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        move |name| map.get(name).cloned()
    }

    const ALL: &[(&str, &str)] = &[
        ("STATE_DIRECTORY", "/var/lib/wb-unit:/var/lib/other"),
        ("XDG_STATE_HOME", "/home/u/state"),
        ("HOME", "/home/u"),
    ];

    #[test]
    fn systemd_state_directory_comes_first_and_only_its_first_path() {
        assert_eq!(pick(env(ALL), false), Some("/var/lib/wb-unit".into()));
        assert_eq!(pick(env(ALL), true), Some("/var/lib/wb-unit".into()));
    }

    #[test]
    fn root_gets_var_lib_wb_before_the_xdg_directories() {
        assert_eq!(pick(env(&ALL[1..]), true), Some("/var/lib/wb".into()));
        assert_eq!(pick(env(&[]), true), Some("/var/lib/wb".into()));
    }

    #[test]
    fn a_user_gets_xdg_state_home_then_home() {
        assert_eq!(pick(env(&ALL[1..]), false), Some("/home/u/state/wb".into()));
        assert_eq!(
            pick(env(&ALL[2..]), false),
            Some("/home/u/.local/state/wb".into())
        );
        assert_eq!(pick(env(&[]), false), None);
    }

    #[test]
    fn empty_and_relative_values_are_skipped() {
        let vars = [
            ("STATE_DIRECTORY", ""),
            ("XDG_STATE_HOME", "state"),
            ("HOME", "/home/u"),
        ];
        assert_eq!(
            pick(env(&vars), false),
            Some("/home/u/.local/state/wb".into())
        );
        let vars = [("STATE_DIRECTORY", "relative:/abs"), ("HOME", "")];
        assert_eq!(pick(env(&vars), false), None);
    }
}
