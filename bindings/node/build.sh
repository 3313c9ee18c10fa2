#!/usr/bin/env bash
# The Node.js package: builds the WASM core into wasm/, installs the npm dependencies
# (from package-lock.json), and runs the tests or the benchmarks.
#
#   bindings/node/build.sh install   build the core, npm ci when the lockfile changed
#   bindings/node/build.sh test      install, then every test with node --test: the
#                                    conformance vectors through WASM, ioredis, node-redis
#                                    (v4 and current) and raw sockets against 5 local
#                                    Redis nodes each, waiting and fencing, inspections,
#                                    events and OpenTelemetry spans, the TypeScript
#                                    declarations, Sentinel (a master, its replica and a
#                                    Sentinel on 7276-7278, 7279 closed), and the core
#                                    inside workerd (base ports 7200-7269, 7275, 7291;
#                                    7258-7259 stay closed)
#   bindings/node/build.sh bench     install, then the decision-cycle benchmark, the
#                                    end-to-end comparison with node-redlock (base port
#                                    7270), fenced against unfenced (7280) and lock
#                                    hand-off (7290, or REDLOCK_BENCH_PORTS)
#   bindings/node/build.sh handoff   install, then only the hand-off benchmark (on the
#                                    nodes in REDLOCK_BENCH_PORTS when set)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$repo/scripts/lib.sh"

node_version_ok() {
  command -v node >/dev/null && command -v npm >/dev/null &&
    [ "$(node -p 'Number(process.versions.node.split(".")[0])')" -ge 20 ]
}

install() {
  require "Node.js 20 or newer with npm (node and npm on PATH)" node_version_ok || exit 1
  "$repo/scripts/build-wasm.sh"
  cd "$here"
  # Install from the lockfile only when it changed since the last install. Not `npm ci`:
  # the registry this project installs from lacks workerd's macOS and Windows packages,
  # so no lockfile can list them and `npm ci` refuses it; `npm install` installs what
  # the lockfile lists and skips the optional packages of other platforms.
  if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    echo "node: npm install (from package-lock.json)" >&2
    npm install --no-audit --no-fund --loglevel=error
  fi
}

case "${1:-}" in
  install)
    install
    ;;
  test)
    install
    cd "$here"
    # Files run one at a time: some tests freeze and kill nodes and check timings.
    node --test --test-concurrency=1 test/*.test.js
    ;;
  bench)
    install
    cd "$here"
    node bench/cycle.js
    node bench/e2e.js
    node bench/fencing.js
    node bench/handoff.js
    ;;
  handoff)
    install
    cd "$here"
    node bench/handoff.js
    ;;
  *)
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
