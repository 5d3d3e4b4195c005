//! Writeback domains for FUSE writers: each file is charged to the cgroup
//! (v2) of the process that opened it first, as Linux's cgroup writeback
//! charges an inode to the cgroup that first dirtied it. The cgroup comes
//! from /proc/PID/cgroup of the request's pid and is remembered for a
//! second, for at most `MAX_REMEMBERED` pids, so a burst of opens reads
//! /proc once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use writeback::{Cache, Domain};

/// Pids whose cgroup is remembered at once (the table is cleared when full).
const MAX_REMEMBERED: usize = 4096;
/// How long a pid's cgroup is trusted (pids are reused; processes move).
const REMEMBER_FOR: Duration = Duration::from_secs(1);

#[derive(Default)]
pub(crate) struct CgroupDomains {
    by_pid: Mutex<HashMap<u32, (Domain, Instant)>>,
}

impl CgroupDomains {
    /// The domain of process `pid`'s cgroup; the root domain for the root
    /// cgroup, a process already gone, cgroup v1 only, or when the cache
    /// has no domain slot left.
    pub fn domain_of(&self, cache: &Cache, pid: u32) -> Domain {
        let now = Instant::now();
        let mut by_pid = self.by_pid.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&(domain, since)) = by_pid.get(&pid) {
            if now.duration_since(since) < REMEMBER_FOR {
                return domain;
            }
        }
        let domain = cgroup_of(pid)
            .and_then(|path| cache.domain(&path).ok())
            .unwrap_or(Domain::ROOT);
        if by_pid.len() >= MAX_REMEMBERED {
            by_pid.clear();
        }
        by_pid.insert(pid, (domain, now));
        domain
    }
}

/// The cgroup v2 path of `pid` ("/" is the root: None), from the `0::`
/// line of /proc/PID/cgroup.
fn cgroup_of(pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    parse_cgroup(&text)
}

fn parse_cgroup(text: &str) -> Option<String> {
    let path = text.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
    (path != "/" && !path.is_empty()).then(|| path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_v2_line_names_the_cgroup() {
        let hybrid = "4:memory:/a\n0::/batch/job-1\n1:cpu:/\n";
        assert_eq!(parse_cgroup(hybrid).as_deref(), Some("/batch/job-1"));
        assert_eq!(parse_cgroup("0::/\n"), None, "the root is the root domain");
        assert_eq!(parse_cgroup("3:cpu:/x\n"), None, "v1 only");
        assert_eq!(parse_cgroup(""), None);
    }
}
