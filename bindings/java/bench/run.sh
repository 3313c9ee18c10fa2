#!/usr/bin/env bash
# The Java binding's JMH benchmarks (build.sh bench runs this after building the library):
#   CycleBench  the N = 5 acquire + release decision cycle through JNI, next to the core's
#               own figure (cargo bench -p redlock-core --bench cycle) and the native loop's
#               (cargo bench -p redlock-jni --bench engine)
#   LockBench   acquire + release p50/p99 on five local nodes (base port 7450): the nio and
#               Jedis drivers, Redisson's RedissonRedLock (5 nodes) and RLock (1 node),
#               healthy and with node 4 frozen (SIGSTOP) after connecting
# Extra arguments go to JMH (for example a benchmark regex, or -p client=nio).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
repo=$(cd "$here/../.." && pwd)
source "$repo/scripts/lib.sh"
base_port=${BENCH_BASE_PORT:-7450}

cd "$here"
mvn -q -B -Dstyle.color=never -Pbench test-compile \
  dependency:build-classpath -DincludeScope=test -Dmdep.outputFile=target/bench-classpath.txt
classpath="target/test-classes:target/classes:$(cat target/bench-classpath.txt)"

cleanup() { "$repo/scripts/redis-nodes.sh" stop --base-port "$base_port" >/dev/null 2>&1 || true; }
trap cleanup EXIT
"$repo/scripts/redis-nodes.sh" start --base-port "$base_port" >/dev/null
nodes=$("$repo/scripts/redis-nodes.sh" urls --base-port "$base_port")

java -cp "$classpath" org.openjdk.jmh.Main \
  -jvmArgs "-Dredlock.repo=$repo -Dredlock.bench.nodes=$nodes -Dredlock.bench.base-port=$base_port" \
  -rf json -rff target/jmh-result.json "$@"
