#!/usr/bin/env bash
# The test command: formatting, lints, and every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# The library's optional features (the `metrics` facade and `tracing`
# spans, crates/writeback/src/telemetry) are on for the test run, so their
# own tests run in it and one build serves every cargo call below; clippy
# checks the library both ways.
cargo clippy -p writeback --all-targets --features metrics,tracing -- -D warnings
features=writeback/metrics,writeback/tracing
cargo test --workspace --profile release-test --features "$features"
# The mount's tests again over FUSE over io_uring (crates/fuse/src/uring):
# the kernel's switch on for the run, put back as it was after.
uring=/sys/module/fuse/parameters/enable_uring
if [ -w "$uring" ]; then
  was=$(cat "$uring")
  trap 'echo "$was" > "$uring"' EXIT
  echo Y > "$uring"
  # Every test file of crates/fuse, and those of `wb mount` itself
  # (signals, crashes, memory limits, remounts), which picks io_uring by
  # default now and is checked to have done so. --workspace, not -p: the
  # same packages as the run above resolve the same features (other
  # members' dev-dependencies unify into shared crates), so its build
  # serves and nothing is compiled again; scenario's errors.rs, named like
  # a mount test, runs again too (milliseconds).
  targets=()
  for f in crates/fuse/tests/*.rs crates/cli/tests/mount*.rs; do
    targets+=(--test "$(basename "$f" .rs)")
  done
  WB_FUSE_TRANSPORT=uring cargo test --workspace --profile release-test --features "$features" "${targets[@]}"
  echo "$was" > "$uring"
  trap - EXIT
elif [ -n "${WB_REQUIRE_ALL_TESTS:-}" ]; then
  echo "test.sh: cannot switch on FUSE over io_uring ($uring not writable): the mount's tests over io_uring cannot run" >&2
  exit 1
else
  echo "test.sh: skipping the mount's tests over io_uring ($uring not writable; run as root)" >&2
fi
# The simulator's oracle catches each planted bug of the engine.
for bug in planted-clean-on-error planted-skip-flush planted-early-ack planted-whole-pages; do
  cargo test --profile release-test -p wb-sim --features "$bug" --test planted
done
