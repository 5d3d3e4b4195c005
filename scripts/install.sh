#!/bin/sh
# Installs wb: `cargo install --path crates/cli --root PREFIX` (PREFIX
# defaults to /usr/local), then, as root, mount(8)'s helper
# /sbin/mount.fuse.wb as a symlink to PREFIX/bin/wb, man pages and shell
# completions under PREFIX/share, so that
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

# Man pages and shell completions, generated from the command line's own
# definition (`wb man`, `wb completions`).
mkdir -p "$prefix/share/man/man1" "$prefix/share/bash-completion/completions" \
	"$prefix/share/zsh/site-functions" "$prefix/share/fish/vendor_completions.d"
"$wb" man --dir "$prefix/share/man/man1"
"$wb" completions bash > "$prefix/share/bash-completion/completions/wb"
"$wb" completions zsh > "$prefix/share/zsh/site-functions/_wb"
"$wb" completions fish > "$prefix/share/fish/vendor_completions.d/wb.fish"

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
