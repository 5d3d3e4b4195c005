#!/usr/bin/env bash
# Two real filesystems for `wb run` experiments: ext4 on two loop devices,
# the first throttled to a USB stick's write speed with the blkio cgroup.
#   scripts/two-devices.sh up [SLOW_MIB_S]   # prints the two mount points
#   scripts/two-devices.sh down
# Needs root. Images live in /var/tmp/wb-loop; mounts at /mnt/wb-slow, /mnt/wb-fast.
set -euo pipefail
images=/var/tmp/wb-loop
slow=/mnt/wb-slow
fast=/mnt/wb-fast

throttle_file() {
  for f in /sys/fs/cgroup/blkio/blkio.throttle.write_bps_device /sys/fs/cgroup/io.max; do
    [ -e "$f" ] && { echo "$f"; return; }
  done
  echo ""
}

up() {
  local mib_s=${1:-10}
  mkdir -p "$images" "$slow" "$fast"
  for name in slow fast; do
    img="$images/$name.img"
    [ -f "$img" ] || { truncate -s 3G "$img"; mkfs.ext4 -q -F "$img"; }
  done
  dev_slow=$(losetup --find --show "$images/slow.img")
  dev_fast=$(losetup --find --show "$images/fast.img")
  mount "$dev_slow" "$slow"
  mount "$dev_fast" "$fast"
  majmin=$(lsblk -dno MAJ:MIN "$dev_slow" | tr -d ' ')
  tf=$(throttle_file)
  case "$tf" in
    */blkio.throttle.write_bps_device) echo "$majmin $((mib_s * 1024 * 1024))" > "$tf" ;;
    */io.max) echo "$majmin wbps=$((mib_s * 1024 * 1024))" > "$tf" ;;
    *) echo "two-devices: no blkio/io cgroup controller to throttle with" >&2; exit 1 ;;
  esac
  echo "slow $slow ($dev_slow, writes capped at ${mib_s} MiB/s)"
  echo "fast $fast ($dev_fast)"
}

down() {
  for m in "$slow" "$fast"; do
    if mountpoint -q "$m"; then
      dev=$(findmnt -no SOURCE "$m")
      majmin=$(lsblk -dno MAJ:MIN "$dev" | tr -d ' ')
      tf=$(throttle_file)
      case "$tf" in
        */blkio.throttle.write_bps_device) echo "$majmin 0" > "$tf" 2>/dev/null || true ;;
        */io.max) echo "$majmin wbps=max" > "$tf" 2>/dev/null || true ;;
      esac
      umount "$m"
      losetup -d "$dev"
    fi
  done
}

case "${1:-}" in
  up) up "${2:-10}" ;;
  down) down ;;
  *) echo "usage: $0 up [SLOW_MIB_S] | down" >&2; exit 2 ;;
esac
