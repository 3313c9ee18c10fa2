#!/usr/bin/env bash
# make demo: five local Redis nodes, several workers contending for one lock, each
# incrementing a shared counter file with a read-modify-write (read, sleep, write) that
# loses updates whenever two overlap. Then a summary: acquisitions, contention retries,
# p50/p99 acquire latency, and lost updates (expected minus the final counter: 0).
#
# A worker is one line of WORKERS below: "NAME|COMMAND". It runs with
#   REDLOCK_NODES   the nodes (comma-separated URLs)
#   DEMO_RESOURCE   the resource to lock
#   DEMO_COUNTER    the counter file: under the lock, read it, sleep ~5 ms, write it + 1
#   DEMO_ROUNDS     how many increments to make
#   DEMO_STATS      a file to append one JSON line per acquisition to:
#                   {"event":"acquired","attempts":N,"acquire_us":MICROSECONDS}
#                   (plus "fencing_token":N from workers that take fencing tokens)
#   DEMO_FENCE      the counter's fencing guard: a worker with fencing tokens writes the
#                   counter only if its token is above the one in this file, then
#                   records its token there (workers without tokens leave it alone)
# (the lines `redlock exec --json` prints on stderr). Other bindings add their workers.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source scripts/lib.sh

base_port=${DEMO_BASE_PORT:-7000}
rounds=${DEMO_ROUNDS:-20}
runtime=${REDLOCK_RUNTIME:-$repo/.runtime}
mkdir -p "$runtime"
work=$(mktemp -d "$runtime/demo.XXXXXX")

cleanup() {
  scripts/redis-nodes.sh stop --base-port "$base_port" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "==> building the redlock CLI and the demo worker (release)"
cargo build --release -q -p redlock-client --features cli --bin redlock --example demo
target=$(cargo_target_dir)
export REDLOCK="$target/release/redlock"
demo="$target/release/examples/demo"

echo "==> building the Python package into \$REDLOCK_CACHE/venv-python"
bindings/python/build.sh install >/dev/null
python_worker="\"$REDLOCK_CACHE/venv-python/bin/python\" bindings/python/examples/worker.py"
echo "==> building the WASM core and the Node.js package (bindings/node)"
bindings/node/build.sh install >/dev/null
node_worker="node bindings/node/examples/demo-worker.js"
echo "==> building the PHP package (bindings/php: libredlock, Composer's autoloader)"
bindings/php/build.sh install >/dev/null
php_worker="php bindings/php/examples/worker.php"
echo "==> building the JNI library and the Java package (bindings/java)"
bindings/java/build.sh install >/dev/null
java_worker="java -cp \"\$(cat '$repo/bindings/java/target/run-classpath.txt')\" bindings/java/examples/DemoWorker.java"

echo "==> starting 5 Redis nodes on ports $base_port-$((base_port + 4))"
scripts/redis-nodes.sh start --base-port "$base_port" >/dev/null
REDLOCK_NODES=$(scripts/redis-nodes.sh urls --base-port "$base_port")
export REDLOCK_NODES
echo "    $REDLOCK_NODES"

export DEMO_RESOURCE="demo:counter"
export DEMO_COUNTER="$work/counter"
export DEMO_ROUNDS="$rounds"
mkdir -p "$work/stats"

# The read-modify-write really races: without the lock, updates are lost.
echo 0 >"$DEMO_COUNTER"
"$demo" unlocked --tasks 4 --rounds 10 --counter "$DEMO_COUNTER"
echo "==> control run without the lock: 40 increments, counter $(cat "$DEMO_COUNTER"), lost $((40 - $(cat "$DEMO_COUNTER")))"

# Fencing (the Rust, Python, Node, PHP and Java workers, and every worker that reads
# DEMO_FENCE): the counter refuses a write whose fencing token is not above the last one
# it accepted, kept in $DEMO_FENCE.
export DEMO_FENCE="$work/counter.fence"
echo 0 >"$DEMO_FENCE"
fence_check='f=$(cat "$DEMO_FENCE"); [ "$REDLOCK_FENCING_TOKEN" -gt "$f" ] || { echo "stale fencing token $REDLOCK_FENCING_TOKEN, counter saw $f" >&2; exit 3; }'
fence_record='echo "$REDLOCK_FENCING_TOKEN" >"$DEMO_FENCE"'

# One shell command per redlock exec: (check the token), read, sleep, write.
cli_increment="$fence_check; "'n=$(cat "$DEMO_COUNTER"); sleep 0.005; echo $((n + 1)) >"$DEMO_COUNTER"; '"$fence_record"
cli_worker="for i in \$(seq \"\$DEMO_ROUNDS\"); do \"\$REDLOCK\" --json exec \"\$DEMO_RESOURCE\" --fencing --ttl 5000 --retry 100000 --retry-delay 10 --retry-jitter 8 -- sh -c '$cli_increment' 2>>\"\$DEMO_STATS\" || exit 1; done"

WORKERS=(
  "rust-cli-1|$cli_worker"
  "rust-cli-2|$cli_worker"
  "rust-cli-3|$cli_worker"
  "rust-async|\"$demo\" worker --tasks 4 --rounds $((rounds * 2)) --counter \"\$DEMO_COUNTER\" --stats \"\$DEMO_STATS\" --resource \"\$DEMO_RESOURCE\" --fence \"\$DEMO_FENCE\""
  "python-sync|$python_worker"
  "python-asyncio|$python_worker --asyncio --tasks 2"
  "node-ioredis|$node_worker ioredis"
  "node-raw-socket|$node_worker raw"
  "php-stream|$php_worker stream"
  "php-phpredis|$php_worker phpredis"
  "java-nio|$java_worker nio 2"
  "java-jedis|$java_worker jedis"
)

echo 0 >"$DEMO_COUNTER"
echo "==> ${#WORKERS[@]} workers contend for $DEMO_RESOURCE"
pids=()
names=()
for entry in "${WORKERS[@]}"; do
  name=${entry%%|*}
  command=${entry#*|}
  DEMO_STATS="$work/stats/$name.jsonl" bash -c "$command" &
  pids+=($!)
  names+=("$name")
done
failed=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    echo "error: worker ${names[$i]} failed" >&2
    failed=1
  fi
done

"$demo" summary --counter "$DEMO_COUNTER" "$work"/stats/*.jsonl || failed=1
if [ "$failed" -ne 0 ]; then
  echo "demo: FAILED" >&2
  exit 1
fi
echo "demo: ok (nodes stopped on exit)"
