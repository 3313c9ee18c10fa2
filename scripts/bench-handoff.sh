#!/usr/bin/env bash
# Lock hand-off between contending clients, side by side in one run on the same five
# Redis nodes, every library at its default settings (`make bench-handoff`):
#
# - Rust: redlock-client with release notices and without
#   (cargo bench -p redlock-client --bench handoff);
# - Node.js: redlock-core with notices and without, and node-redlock
#   (bindings/node/bench/handoff.js);
# - Python: redlock-core sync and asyncio with notices, sync without, and pottery
#   (bindings/python/bench/handoff.py).
#
# Each reports hand-offs per second, release-to-next-holder latency (p50, p99) and
# fairness with 4 and 16 contenders, and one uncontended acquisition for scale. The
# nodes run on base port $REDLOCK_BENCH_BASE_PORT (default 7800) for the whole run.
# Speed is measured, never asserted: run it on a quiet machine.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
source "$repo/scripts/lib.sh"

base=${REDLOCK_BENCH_BASE_PORT:-7800}
nodes="$repo/scripts/redis-nodes.sh"
"$nodes" start --base-port "$base" >/dev/null
trap '"$nodes" stop --base-port "$base" >/dev/null 2>&1 || true' EXIT
ports=$(seq -s, "$base" $((base + 4)))
urls=$(for p in $(seq "$base" $((base + 4))); do printf 'redis://127.0.0.1:%s,' "$p"; done)
urls=${urls%,}

echo "== nodes: 127.0.0.1:{$ports}"
echo "== Rust"
REDLOCK_BENCH_URLS=$urls cargo bench -p redlock-client --bench handoff
echo "== Node.js"
REDLOCK_BENCH_PORTS=$ports "$repo/bindings/node/build.sh" handoff
echo "== Python"
"$repo/bindings/python/build.sh" handoff --ports "$ports"
