#!/usr/bin/env bash
# The cache budget where it runs (issue 34): `wb mount` with default
# settings in a cgroup v1 memory cgroup, side by side with the kernel's
# page cache in the same cgroup. Needs root, /dev/fuse, cgroup v1 memory
# at /sys/fs/cgroup/memory, a C compiler (the hog), and room under DIR.
#
#   scripts/memory-budget.sh copy wb|kernel LIMIT SRC   # copy SRC in (dd bs=1M), read back, cmp
#   scripts/memory-budget.sh hog wb|kernel|alone LIMIT FILE_GIB HOG_GIB
#       # the mount (or cat, through the kernel) reads a FILE_GIB file, then a process
#       # allocates and touches HOG_GIB in the same cgroup; the budget over time
#
# WB (default target/release/wb), WB_ARGS (more `wb mount` arguments, e.g.
# --fixed-memory), DIR (default /var/tmp/wb-memory), AFTER (seconds the
# timeline goes on after the hog, default 15). Prints
# times, the cgroup's peak memory (memory.max_usage_in_bytes; the kernel's
# page cache of SRC fills it in both cases), wb's own peak RSS, failcnt
# and OOM kills; the hog's budget timeline goes to DIR/timeline.log. Always
# unmounts and removes the cgroup, also on failure.
set -uo pipefail
WB=${WB:-$(dirname "$0")/../target/release/wb}
WB=$(readlink -f "$WB")
DIR=${DIR:-/var/tmp/wb-memory}
CG=/sys/fs/cgroup/memory/wb-memory-budget
mkdir -p "$DIR/backing" "$DIR/mnt"
PID= LOGGER=

incg() { bash -c "echo \$\$ > $CG/cgroup.procs; exec $*"; }
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc | xargs printf '%.2f'; }
gib() { awk '{printf "%.2fGiB", $1/1073741824}'; }

cleanup() {
  mountpoint -q "$DIR/mnt" && umount "$DIR/mnt"
  [ -n "$PID" ] && { kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; }
  [ -n "$LOGGER" ] && kill "$LOGGER" 2>/dev/null
  for p in $(cat $CG/cgroup.procs 2>/dev/null); do echo "$p" > /sys/fs/cgroup/memory/cgroup.procs; done
  [ -d $CG ] && rmdir $CG
}
trap cleanup EXIT

cgroup() {
  mkdir -p $CG
  echo "$1" > $CG/memory.limit_in_bytes
  echo 0 > $CG/memory.max_usage_in_bytes
}

peak() {
  echo "  peak $(gib < $CG/memory.max_usage_in_bytes), failcnt $(cat $CG/memory.failcnt)," \
    "oom_kill $(awk '/^oom_kill /{print $2}' $CG/memory.oom_control)"
  echo 0 > $CG/memory.max_usage_in_bytes
}

mount_wb() {
  # Not through incg: $! is then wb itself (bash execs it).
  bash -c "echo \$\$ > $CG/cgroup.procs; exec $WB mount $DIR/backing $DIR/mnt --no-calibrate \
    --data-dir $DIR/wb-data ${WB_ARGS:-}" > "$DIR/mount.out" 2> "$DIR/mount.err" &
  PID=$!
  for _ in $(seq 300); do grep -q serving "$DIR/mount.out" && break; sleep 0.1; done
  head -1 "$DIR/mount.out"
}

unmount_wb() {
  echo "  wb peak RSS $(awk '/^VmHWM/{printf "%.2fGiB", $2/1048576}' /proc/$PID/status)"
  umount "$DIR/mnt"; wait "$PID"; echo "  wb exit $?"; PID=
}

copy() {
  local mode=$1 limit=$2 src=$3 target
  rm -f "$DIR/backing/copy"
  sync; echo 3 > /proc/sys/vm/drop_caches
  cgroup "$limit"
  target=$DIR/backing
  [ "$mode" = wb ] && { mount_wb; target=$DIR/mnt; }
  local t0; t0=$(now)
  incg dd if="$src" of="$target/copy" bs=1M status=none; echo "  dd exit $?"
  echo "  copy: dd $(since "$t0") s"
  if [ "$mode" = wb ]; then unmount_wb; else incg sync; fi
  echo "  copy: until written back (unmount / sync) $(since "$t0") s"
  peak
  sync; echo 3 > /proc/sys/vm/drop_caches
  [ "$mode" = wb ] && mount_wb
  t0=$(now)
  incg "cmp $src <(dd if=$target/copy bs=1M status=none)" && echo "  read back (dd bs=1M | cmp): equal"
  echo "  read back: $(since "$t0") s"
  peak
  [ "$mode" = wb ] && unmount_wb
  rm -f "$DIR/backing/copy"
}

hog_binary() {
  cat > "$DIR/hog.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
int main(int argc, char **argv) {
  double gib = argc > 1 ? atof(argv[1]) : 8, hold = argc > 2 ? atof(argv[2]) : 0;
  size_t n = (size_t)(gib * (1 << 30)); double t0 = now();
  char *p = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) { perror("mmap"); return 1; }
  madvise(p, n, MADV_HUGEPAGE);
  printf("  hog: each GiB at");
  for (size_t o = 0; o < n; o += 1 << 30) {
    memset(p + o, 1, n - o < (1 << 30) ? n - o : (1 << 30));
    printf(" %.2f", now() - t0); fflush(stdout);
  }
  printf(" s\n  hog: %g GiB allocated and touched in %.2f s\n", gib, now() - t0); fflush(stdout);
  usleep(hold * 1e6); return 0;
}
EOF
  cc -O2 -o "$DIR/hog" "$DIR/hog.c" || exit 1
}

log_wb() {
  while :; do
    echo "$(since "$1") $(grep -E -e '^(memory_bytes|cached_bytes|memory_given_back_bytes) ' \
      -e '^memory_reason_.* 1' -e '^memory_(shrinks|grows) ' "$DIR/mnt/.writeback/stats" 2>/dev/null |
      awk '/reason/{sub("memory_reason_", "", $1); r=$1; next} /bytes/{printf "%s=%.2fGiB ", $1, $2/1073741824; next} {printf "%s=%s ", $1, $2} END{printf "why=%s", r}')" \
      "cgroup=$(gib < $CG/memory.usage_in_bytes)"
    sleep 0.25
  done
}

log_kernel() {
  while :; do
    echo "$(since "$1") cgroup=$(gib < $CG/memory.usage_in_bytes)" \
      "$(awk '/^total_(cache|rss) /{printf "%s=%.2fGiB ", $1, $2/1073741824}' $CG/memory.stat)"
    sleep 0.25
  done
}

hog() {
  local mode=$1 limit=$2 file_gib=$3 hog_gib=$4 t0
  hog_binary
  [ -f "$DIR/backing/big" ] && [ "$(stat -c %s "$DIR/backing/big")" = $((file_gib << 30)) ] ||
    dd if=/dev/urandom of="$DIR/backing/big" bs=1M count=$((file_gib * 1024)) oflag=direct status=none
  sync; echo 3 > /proc/sys/vm/drop_caches
  cgroup "$limit"
  t0=$(now)
  case $mode in
    wb)
      mount_wb
      log_wb "$t0" > "$DIR/timeline.log" & LOGGER=$!
      incg dd if="$DIR/mnt/big" of=/dev/null bs=1M status=none
      echo "  read $file_gib GiB through the mount: $(since "$t0") s";;
    kernel)
      log_kernel "$t0" > "$DIR/timeline.log" & LOGGER=$!
      incg cat "$DIR/backing/big" > /dev/null
      echo "  read $file_gib GiB through the kernel: $(since "$t0") s";;
    alone) ;;
  esac
  sleep 2
  echo "  hog starts at $(since "$t0") s, cgroup at $(gib < $CG/memory.usage_in_bytes)"
  incg "$DIR/hog" "$hog_gib" 3; echo "  hog exit $? at $(since "$t0") s"
  sleep "${AFTER:-15}"
  peak
  if [ "$mode" = wb ]; then
    kill -0 "$PID" && echo "  wb still serving"
    grep -E '^memory_(bytes|ceiling_bytes|shrinks|grows|given_back_bytes) ' "$DIR/mnt/.writeback/stats" | tr '\n' ' '; echo
    unmount_wb
  fi
  [ -n "$LOGGER" ] && kill "$LOGGER"; LOGGER=
}

case ${1:-} in
  copy) shift; copy "$@";;
  hog) shift; hog "$@";;
  *) sed -n '2,16p' "$0"; exit 2;;
esac
