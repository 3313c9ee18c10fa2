#!/usr/bin/env bash
# Tests of the C ABI (`make test-ffi`):
#   1. Rust tests of the crate, including the check that both committed headers are
#      what the pinned cbindgen generates now;
#   2. C programs compiled with gcc against the shared and the static library and run
#      under valgrind (no leaks, no invalid accesses): every conformance vector
#      replayed through the C ABI, and every error path;
#   3. the C example, built through pkg-config from an installed prefix, acquiring and
#      releasing a lock on five real Redis nodes (ports 7170-7174), under valgrind;
#   4. PHP's FFI::cdef loading the PHP header and driving an acquisition.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib.sh

require "gcc (Debian package gcc)" command -v gcc || exit 0
require "valgrind (Debian package valgrind)" command -v valgrind || exit 0

cargo test -q -p redlock-ffi
cargo build -q -p redlock-ffi

target_dir=${CARGO_TARGET_DIR:-target}
lib_dir="$target_dir/debug"
out="$target_dir/ffi-tests"
mkdir -p "$out"
cflags=(-std=c11 -Wall -Wextra -Werror -pedantic -g -Iffi/include)
shared=(-L"$lib_dir" -l:libredlock.so -Wl,-rpath,"$(cd "$lib_dir" && pwd)")
static=("$lib_dir/libredlock.a" -lpthread -ldl -lm)
memcheck=(valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=all
  --show-leak-kinds=all)

echo "ffi: compiling the C tests" >&2
gcc "${cflags[@]}" -o "$out/vectors-shared" ffi/tests/c/vectors.c ffi/tests/c/json.c "${shared[@]}"
gcc "${cflags[@]}" -o "$out/vectors-static" ffi/tests/c/vectors.c ffi/tests/c/json.c "${static[@]}"
gcc "${cflags[@]}" -o "$out/errors-shared" ffi/tests/c/errors.c "${shared[@]}"
gcc "${cflags[@]}" -o "$out/errors-static" ffi/tests/c/errors.c "${static[@]}"
# The header is also valid C++ (the C++ guards are part of it).
if command -v g++ >/dev/null 2>&1; then
  echo '#include "redlock.h"' | g++ -std=c++11 -Wall -Werror -fsyntax-only -Iffi/include -x c++ -
fi

for program in vectors-shared vectors-static; do
  echo "ffi: $program under valgrind" >&2
  "${memcheck[@]}" "$out/$program" tests/vectors
done
for program in errors-shared errors-static; do
  echo "ffi: $program under valgrind" >&2
  "${memcheck[@]}" "$out/$program"
done

# The example, built the way a C project would: from an installed prefix via pkg-config.
if require "pkg-config (Debian package pkg-config)" command -v pkg-config; then
  prefix="$out/prefix"
  rm -rf "$prefix"
  REDLOCK_PROFILE=debug ffi/install.sh "$prefix" >/dev/null
  export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
  # shellcheck disable=SC2046
  gcc "${cflags[@]}" $(pkg-config --cflags redlock) -o "$out/acquire" ffi/examples/acquire.c \
    $(pkg-config --libs redlock) -Wl,-rpath,"$prefix/lib"
  if require "redis-server (Debian package redis-server)" command -v redis-server; then
    base_port=7170
    trap 'scripts/redis-nodes.sh stop --base-port "$base_port" >/dev/null 2>&1 || true' EXIT
    mapfile -t urls < <(scripts/redis-nodes.sh start --nodes 5 --base-port "$base_port")
    [ "${#urls[@]}" -eq 5 ] || die "expected 5 node URLs, got: ${urls[*]}"
    echo "ffi: the C example against ${urls[*]} under valgrind" >&2
    "${memcheck[@]}" "$out/acquire" "${urls[@]}" | tee "$out/acquire.log"
    grep -q '^second client: refused (conflict)$' "$out/acquire.log" || die "the rival was not refused"
    grep -q '^released on 5 of 5 nodes ' "$out/acquire.log" || die "not released on every node"
    # Nothing is left behind: every node is empty again.
    for i in 0 1 2 3 4; do
      keys=$(redis-cli -p $((base_port + i)) dbsize)
      [ "$keys" = 0 ] || die "node $i still holds $keys keys after the release"
    done
    # With one node killed the lock still holds on the other four, and nothing is left
    # on them.
    scripts/redis-nodes.sh kill 4 --base-port "$base_port" >/dev/null
    echo "ffi: the C example with node 4 killed" >&2
    "${memcheck[@]}" "$out/acquire" "${urls[@]}" | tee "$out/acquire.log"
    grep -q '^released on 4 of 5 nodes ' "$out/acquire.log" || die "not released on the 4 live nodes"
    for i in 0 1 2 3; do
      keys=$(redis-cli -p $((base_port + i)) dbsize)
      [ "$keys" = 0 ] || die "node $i still holds $keys keys after the release"
    done
    scripts/redis-nodes.sh stop --base-port "$base_port" >/dev/null

    # Fencing through the C ABI: a holder frozen (SIGSTOP) past its lease writes late,
    # after a second holder, and the item's fenced write refuses it. Five fresh nodes,
    # and a sixth server (7175) for the protected item.
    mapfile -t urls < <(scripts/redis-nodes.sh start --nodes 6 --base-port "$base_port")
    item_url=${urls[5]}
    urls=("${urls[@]:0:5}")
    echo "ffi: a fenced holder frozen past its lease, through the C ABI" >&2
    export REDLOCK_EXAMPLE_RESOURCE="redlock-example:fenced" REDLOCK_EXAMPLE_FENCED_WRITE="$item_url"
    REDLOCK_EXAMPLE_TTL_MS=1000 REDLOCK_EXAMPLE_HOLD_MS=500 "$out/acquire" "${urls[@]}" \
      >"$out/first.log" 2>&1 &
    first=$!
    for _ in $(seq 100); do
      grep -q '^fencing token ' "$out/first.log" && break
      sleep 0.02
    done
    kill -STOP "$first"
    grep -q '^fencing token ' "$out/first.log" || die "the first holder did not acquire: $(cat "$out/first.log")"
    sleep 1.5
    REDLOCK_EXAMPLE_TTL_MS=1000 "$out/acquire" "${urls[@]}" >"$out/second.log" 2>&1 \
      || die "the second holder failed: $(cat "$out/second.log")"
    kill -CONT "$first"
    status=0
    wait "$first" || status=$?
    cat "$out/first.log" "$out/second.log"
    first_token=$(sed -n 's/^fencing token //p' "$out/first.log")
    second_token=$(sed -n 's/^fencing token //p' "$out/second.log")
    [ "$second_token" -gt "$first_token" ] || die "tokens did not increase: $first_token then $second_token"
    grep -q '^fenced write: accepted$' "$out/second.log" || die "the second holder's write was refused"
    grep -q "^fenced write: stale (the item has seen $second_token)\$" "$out/first.log" \
      || die "the frozen holder's late write was not refused as stale"
    [ "$status" -eq 3 ] || die "the frozen holder exited $status, not 3 (stale)"
    unset REDLOCK_EXAMPLE_RESOURCE REDLOCK_EXAMPLE_FENCED_WRITE
    scripts/redis-nodes.sh stop --base-port "$base_port" >/dev/null
    trap - EXIT
  fi
fi

if require "php with FFI (Debian package php-cli)" php -r 'exit(extension_loaded("FFI") ? 0 : 1);'; then
  echo "ffi: PHP FFI::cdef with the PHP header" >&2
  php ffi/tests/php_load.php ffi/include/redlock_php.h "$lib_dir/libredlock.so"
fi
echo "ffi: all tests passed" >&2
