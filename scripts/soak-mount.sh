#!/usr/bin/env bash
# Soak (issue 11): `wb mount` with memory=64MiB serving fio (randrw,
# verify=crc32c, 4 jobs) for SECONDS (default 600) while a knob changes
# every second (the memory among them: down to 16 MiB and back); samples the server's RSS every second. Prints the fio
# errors, the knob changes made and the largest RSS; exits 1 on a fio
# error, a dead server, or RSS over the budget + 64 MiB + 5 %.
#   scripts/soak-mount.sh [SECONDS] [DIR]     # DIR on a disk (O_DIRECT), default /var/tmp/wb-soak
# Needs root, /dev/fuse and fio (scripts/setup.sh installs it).
set -euo pipefail
secs=${1:-600}
base=${2:-/var/tmp/wb-soak}
wb=${WB:-target/release/wb}
budget_mib=64
limit_kib=$(( (budget_mib + 64) * 1024 * 105 / 100 ))
rm -rf "$base"; mkdir -p "$base/backing" "$base/mnt"
"$wb" mount "$base/backing" "$base/mnt" --no-calibrate --set memory=${budget_mib}MiB \
  --data-dir "$base/wb-data" > "$base/mount.log" 2>&1 &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; umount -l "$base/mnt" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 100); do mountpoint -q "$base/mnt" && break; sleep 0.1; done
mountpoint -q "$base/mnt" || { cat "$base/mount.log"; exit 1; }
dev=$(ls "$base/mnt/.writeback" | while read -r d; do [ -d "$base/mnt/.writeback/$d" ] && echo "$d"; done | head -1)
fio --directory="$base/mnt" --name=soak --rw=randrw --bs=16k --size=48m --numjobs=4 \
  --ioengine=psync --verify=crc32c --verify_fatal=1 --verify_backlog=256 --randrepeat=1 \
  --time_based --runtime="$secs" --output-format=json > "$base/fio.json" 2> "$base/fio.err" &
fio_pid=$!
knobs=("$dev/wbt_lat_usec 0" "$dev/wbt_lat_usec -1" "$dev/wbt_lat_usec 2000" "$dev/queue_depth 1"
       "$dev/queue_depth 32" "$dev/nr_requests 4" "$dev/nr_requests 128" "$dev/stable_writes wait"
       "$dev/stable_writes snapshot" "$dev/stable_writes none" "dirty_ratio 5" "dirty_ratio 40"
       "dirty_background_ratio 2" "dirty_background_ratio 10" "dirty_expire_centisecs 100"
       "dirty_expire_centisecs 3000" "memory 16MiB" "memory 64MiB" "memory 32MiB" "memory 64MiB")
changes=0; max_rss=0; i=0
while kill -0 "$fio_pid" 2>/dev/null; do
  set -- ${knobs[$((i % ${#knobs[@]}))]}
  echo "$2" > "$base/mnt/.writeback/$1" && changes=$((changes + 1))
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo dead)
  [ "$rss" = dead ] && { echo "the server died"; cat "$base/mount.log"; exit 1; }
  [ "$rss" -gt "$max_rss" ] && max_rss=$rss
  i=$((i + 1)); sleep 1
done
wait "$fio_pid" || true
errors=$(python3 -c "
import json; d=json.load(open('$base/fio.json'))
print(sum(j['error'] for j in d['jobs']), sum(j['read']['io_bytes']+j['write']['io_bytes'] for j in d['jobs']))")
read -r fio_errors fio_bytes <<< "$errors"
echo "soak: ${secs} s, fio errors ${fio_errors}, $((fio_bytes >> 20)) MiB moved, ${changes} knob changes, max RSS $((max_rss / 1024)) MiB (limit $((limit_kib / 1024)) MiB)"
[ "$fio_errors" = 0 ] && [ "$max_rss" -le "$limit_kib" ]
