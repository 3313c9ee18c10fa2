#!/usr/bin/env bash
# Runs every cargo-fuzz target of the project for SECONDS (default 60), all at once.
# cargo-fuzz needs a nightly toolchain (libFuzzer's sanitizer flags); it is installed
# into $REDLOCK_CACHE on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
seconds=${1:-60}

require "a nightly Rust toolchain (rustup toolchain install nightly)" rustup run nightly rustc --version || exit 0
fuzz_root="$REDLOCK_CACHE/cargo-fuzz"
if [ ! -x "$fuzz_root/bin/cargo-fuzz" ]; then
  echo "fuzz: installing cargo-fuzz into $fuzz_root" >&2
  cargo install --quiet --root "$fuzz_root" cargo-fuzz --version 0.13.1
fi
export PATH="$fuzz_root/bin:$PATH"

# One target directory for both fuzz workspaces: what they share (the core, libFuzzer) is
# built once with the sanitizer flags, not once per workspace.
target_dir="$PWD/target/fuzz"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# Every target is built first, then all run at once: a fuzzer is one process on one
# core, so on a 2-core machine the three targets take the wall time of about two.
runs=()
for dir in core/fuzz ffi/fuzz; do
  [ -d "$dir" ] || continue
  (cd "$dir/.." && cargo +nightly fuzz build --release --target-dir "$target_dir")
  for target in $(cd "$dir/.." && cargo +nightly fuzz list); do
    echo "fuzz: $dir $target for ${seconds}s" >&2
    (cd "$dir/.." && cargo +nightly fuzz run --release --target-dir "$target_dir" "$target" -- \
      -max_total_time="$seconds" -max_len=4096 -print_final_stats=1) >"$logs/$target.log" 2>&1 &
    runs+=("$!:$dir:$target")
  done
done
failed=0
for run in "${runs[@]}"; do
  IFS=: read -r pid dir target <<<"$run"
  status=0
  wait "$pid" || status=$?
  echo "fuzz: $dir $target (exit $status)" >&2
  tail -n 12 "$logs/$target.log"
  [ "$status" -eq 0 ] || failed=1
done
[ "$failed" -eq 0 ] || die "a fuzz target failed (its output is above)"
