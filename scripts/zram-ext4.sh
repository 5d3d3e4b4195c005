#!/usr/bin/env bash
# ext4 on zram0, a block device that declares queue/stable_writes = 1 (it
# compresses pages as they are written, so they must not change in
# flight): the device on which `stable_writes = auto` picks snapshot.
#   scripts/zram-ext4.sh up [MOUNTPOINT] [SIZE]   # default /mnt/wb-zram, 512M
#   scripts/zram-ext4.sh down [MOUNTPOINT]
# Needs root, the zram module (zram0) and e2fsprogs. Refuses a zram0 that
# is in use (mounted or swapped on).
set -euo pipefail
mnt=${2:-/mnt/wb-zram}
size=${3:-512M}
sys=/sys/block/zram0

in_use() {
  grep -q '^/dev/zram0 ' /proc/mounts || grep -q '^/dev/zram0 ' /proc/swaps
}

case "${1:-}" in
  up)
    [ -e "$sys" ] || modprobe zram 2>/dev/null || true
    [ -e "$sys" ] || { echo "zram-ext4: no zram0 (zram module not available)" >&2; exit 3; }
    if in_use; then echo "zram-ext4: /dev/zram0 is in use" >&2; exit 3; fi
    echo 1 > "$sys/reset"
    echo "$size" > "$sys/disksize"
    mkfs.ext4 -q -F /dev/zram0
    mkdir -p "$mnt"
    mount /dev/zram0 "$mnt"
    echo "$mnt (/dev/zram0, ext4, stable_writes $(cat "$sys/queue/stable_writes"))"
    ;;
  down)
    if mountpoint -q "$mnt"; then umount "$mnt"; fi
    if ! in_use && [ -e "$sys" ]; then echo 1 > "$sys/reset"; fi
    ;;
  *) echo "usage: $0 up [MOUNTPOINT] [SIZE] | down [MOUNTPOINT]" >&2; exit 2 ;;
esac
