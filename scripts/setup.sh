#!/usr/bin/env bash
# Installs what the project's build and tests need on a fresh machine.
# Idempotent; safe to run again.
set -euo pipefail

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found; install a Rust toolchain (rustup) first" >&2
  exit 1
fi

# Debian packages for tests and benchmarks: fio (kernel comparisons, the
# mount's verify test), dbench (the mount's benchmarks), e2fsprogs (ext4
# on zram0 for the stable-pages mount test, scripts/zram-ext4.sh), sqlite3
# (a database in WAL mode on the mount: it maps its index), util-linux
# (setpriv: writes as another user in the mount's POSIX tests), git (a
# clone, fsck and gc on the mount), python3 (POSIX locks from a second
# process), nocache (an LD_PRELOAD wrapper that drops a program's pages
# with fadvise DONTNEED: the kernel-nocache writer of wb bench interference),
# prometheus (its promtool checks the mount's .writeback/metrics).
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  missing=()
  for pkg in fio dbench e2fsprogs sqlite3 util-linux git python3 nocache prometheus; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  fi
fi

rustup component add rustfmt clippy >/dev/null 2>&1 || true
