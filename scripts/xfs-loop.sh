#!/usr/bin/env bash
# XFS on a loop device for `wb bench interference --dir /mnt/wb-xfs/bench`
# (the interference experiment's reference setup). The loop device uses
# direct I/O to its image, so no page cache sits under the filesystem;
# with --buffered it writes its image through the page cache (plain
# `losetup`, the setup of the issue's reference figures).
#   scripts/xfs-loop.sh up [--buffered]   # prints the mount point
#   scripts/xfs-loop.sh down
# Needs root and xfsprogs (installed here if missing).
set -euo pipefail
img=/var/tmp/wb-loop/xfs.img
mnt=/mnt/wb-xfs

case "${1:-}" in
  up)
    command -v mkfs.xfs >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq xfsprogs; }
    mkdir -p "$(dirname "$img")" "$mnt"
    [ -f "$img" ] || { truncate -s 20G "$img"; mkfs.xfs -q -f "$img"; }
    direct=on
    [ "${2:-}" = --buffered ] && direct=off
    dev=$(losetup --direct-io="$direct" --find --show "$img")
    mount "$dev" "$mnt"
    echo "$mnt ($dev, XFS, loop with direct I/O $direct)"
    ;;
  down)
    if mountpoint -q "$mnt"; then
      dev=$(findmnt -no SOURCE "$mnt")
      umount "$mnt"
      losetup -d "$dev"
    fi
    ;;
  *) echo "usage: $0 up | down" >&2; exit 2 ;;
esac
