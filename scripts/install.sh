#!/bin/sh
# Installs wb: `cargo install --path crates/cli --root PREFIX` (PREFIX
# defaults to /usr/local), then, as root, mount(8)'s helper
# /sbin/mount.fuse.wb as a symlink to PREFIX/bin/wb, so that
# `mount -t fuse.wb` and /etc/fstab lines work (docs/service.md).
#
# Usage: scripts/install.sh [PREFIX]
set -eu

prefix=${1:-/usr/local}
here=$(cd "$(dirname "$0")/.." && pwd)

cargo install --locked --path "$here/crates/cli" --root "$prefix"
wb="$prefix/bin/wb"
case "$wb" in
/*) ;;
*) wb="$(pwd)/$wb" ;;
esac

# --- man pages and shell completions ---------------------------------------
# Reserved: `wb man` and `wb completions` come on another branch; install
# their output here, e.g.
#   "$wb" man --dir "$prefix/share/man/man1"
#   "$wb" completions bash > "$prefix/share/bash-completion/completions/wb"
# ----------------------------------------------------------------------------

helper=/sbin/mount.fuse.wb
if [ "$(id -u)" -ne 0 ]; then
	echo "install.sh: installed $wb; not root, so $helper (for mount -t fuse.wb" \
		"and /etc/fstab) was not made: run as root, or: sudo ln -sf $wb $helper" >&2
	exit 0
fi
if [ -e "$helper" ] && [ ! -L "$helper" ]; then
	echo "install.sh: $helper exists and is not a symlink; left alone" >&2
	exit 1
fi
ln -sfn "$wb" "$helper"
echo "install.sh: installed $wb and $helper -> $wb"
