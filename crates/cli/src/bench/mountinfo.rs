//! Which mount holds a path, from /proc/self/mountinfo: the filesystem
//! type a bench names in its messages and reports.

use std::path::{Component, Path, PathBuf};

/// The type of the filesystem holding `dir` ("ext4", "xfs", ...), from
/// /proc/self/mountinfo.
pub fn fs_type(dir: &Path) -> Option<String> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mount_of(&text, &dir).map(|m| m.fs_type)
}

/// One line of /proc/self/mountinfo, the parts we use.
#[derive(Debug, PartialEq, Eq)]
pub struct MountEntry {
    pub mount_point: PathBuf,
    pub fs_type: String,
    pub source: String,
}

/// Parses one mountinfo line:
/// `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`
/// (the optional fields end at the lone "-"; paths escape spaces as \040).
pub fn parse_mountinfo_line(line: &str) -> Option<MountEntry> {
    let (head, tail) = line.split_once(" - ")?;
    let mount_point = unescape(head.split(' ').nth(4)?);
    let mut tail = tail.split(' ');
    let fs_type = tail.next()?.to_string();
    let source = unescape(tail.next().unwrap_or(""));
    Some(MountEntry {
        mount_point: PathBuf::from(mount_point),
        fs_type,
        source,
    })
}

/// The mount holding the absolute path `path`: the longest mount point
/// that is a prefix of it (a later line wins a tie: it is mounted over).
pub fn mount_of(mountinfo: &str, path: &Path) -> Option<MountEntry> {
    let depth = |p: &Path| {
        p.components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .count()
    };
    let mut best: Option<MountEntry> = None;
    for entry in mountinfo.lines().filter_map(parse_mountinfo_line) {
        if !path.starts_with(&entry.mount_point) {
            continue;
        }
        if best
            .as_ref()
            .is_none_or(|b| depth(&entry.mount_point) >= depth(&b.mount_point))
        {
            best = Some(entry);
        }
    }
    best
}

/// Undoes mountinfo's octal escapes (`\040` for a space, ...).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).filter(|d| {
            bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)) && d[0] <= b'3'
        });
        if let Some(d) = octal {
            out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
23 22 0:21 / /proc rw,nosuid - proc proc rw
40 22 7:0 / /mnt/wb-xfs rw,relatime shared:20 - xfs /dev/loop0 rw,attr2
41 22 0:45 / /mnt/with\\040space rw - tmpfs tmpfs rw
42 40 7:1 / /mnt/wb-xfs rw,relatime - ext4 /dev/loop1 rw
";

    #[test]
    fn mountinfo_lines_parse() {
        let e = parse_mountinfo_line(
            "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue",
        )
        .expect("a line");
        assert_eq!(e.mount_point, PathBuf::from("/mnt2"));
        assert_eq!(e.fs_type, "ext3");
        assert_eq!(e.source, "/dev/root");
        assert!(parse_mountinfo_line("garbage").is_none());
    }

    #[test]
    fn the_deepest_and_latest_mount_holds_a_path() {
        let fs = |p: &str| mount_of(MOUNTINFO, Path::new(p)).map(|m| m.fs_type);
        assert_eq!(fs("/var/tmp").as_deref(), Some("ext4"));
        assert_eq!(fs("/proc/self").as_deref(), Some("proc"));
        assert_eq!(fs("/mnt/with space/x").as_deref(), Some("tmpfs"));
        // Mounted over /mnt/wb-xfs later: the later mount is the one seen.
        let m = mount_of(MOUNTINFO, Path::new("/mnt/wb-xfs/bench")).expect("a mount");
        assert_eq!(
            (m.fs_type.as_str(), m.source.as_str()),
            ("ext4", "/dev/loop1")
        );
        // A name that merely starts like a mount point is not under it.
        assert_eq!(fs("/mnt/wb-xfs2").as_deref(), Some("ext4"));
    }
}
