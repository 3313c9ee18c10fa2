# redlock: `make demo` runs the main job, `make test` runs every test.
# Both install what they need first (scripts/setup.sh).

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
CARGO ?= cargo
# Tools the project installs itself live here, outside the clone.
export REDLOCK_CACHE ?= $(HOME)/.cache/redlock

# Every test target; `make test` runs them all, in this order.
TEST_TARGETS := lint test-core test-ffi test-fuzz-smoke test-sim test-rust test-python test-node test-java

.PHONY: all setup test demo bench bench-rust bench-ffi bench-python bench-node bench-java fuzz lint safety-report $(TEST_TARGETS)

all: test

setup:
	scripts/setup.sh

test: setup
	@for target in $(TEST_TARGETS); do \
	  echo "==> make $$target"; \
	  $(MAKE) --no-print-directory $$target || exit 1; \
	done
	@echo "==> all tests passed"

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy -p redlock-core --no-default-features -- -D warnings

# Unit, property and doc tests of the core, and the conformance vectors.
test-core:
	$(CARGO) test -p redlock-core

# The C ABI: header drift, C tests under valgrind (shared and static library), the C
# example against five local Redis nodes, and PHP's FFI loading the PHP header.
test-ffi:
	ffi/tests/run.sh

# A short run of every fuzz target (the long run is `make fuzz`).
test-fuzz-smoke:
	scripts/fuzz.sh 10

# The deterministic simulation (release mode: its randomised suite runs thousands of seeds).
test-sim:
	$(CARGO) test -p redlock-sim --release

# The Rust driver and the redlock CLI against real local Redis nodes
# (scripts/redis-nodes.sh starts and stops them; base ports 7100-7160).
test-rust:
	$(CARGO) test -p redlock-client

# The Python package (ctypes over libredlock, redis-py sync and asyncio): builds the wheel,
# installs it into $(REDLOCK_CACHE)/venv-python; ruff, mypy, pytest (vectors, the ctypes
# layer, both drivers against local Redis nodes on base ports 7300-7340).
test-python:
	bindings/python/build.sh test

# The WASM core (scripts/build-wasm.sh) and the Node.js package: conformance vectors through
# WASM, ioredis, node-redis and raw sockets against local Redis nodes, the TypeScript
# declarations, and the core inside workerd (base ports 7210-7264).
test-node:
	bindings/node/build.sh test

# The Java binding (JNI over the core, Maven, JDK 17): builds the JNI library into the jar,
# then `mvn -q verify` runs the JUnit 5 tests (vectors through JNI, error paths, the nio and
# Jedis drivers against local Redis nodes on base ports 7400-7460, interop with the CLI).
test-java:
	bindings/java/build.sh test

# The scenario x strategy safety table (the one in docs/safety.md).
safety-report:
	$(CARGO) run -p redlock-sim --release -- report

fuzz:
	scripts/fuzz.sh $${FUZZ_SECONDS:-120}

bench: bench-ffi bench-rust bench-python bench-node bench-java
	$(CARGO) bench -p redlock-core --bench cycle

# The Rust driver against five local nodes (base port 7185): Criterion means next to the
# raw redis floor, then p50/p99 (healthy, one node frozen) and hand-offs per second.
bench-rust:
	$(CARGO) bench -p redlock-client --bench lock
	$(CARGO) bench -p redlock-client --bench handoff

# The Python drivers against pottery's Redlock on five local nodes (base port 7380),
# healthy and with one node frozen, and the ctypes overhead per decision cycle.
bench-python:
	bindings/python/build.sh bench

# The N = 5 decision cycle through WASM in Node.js (against the native Criterion figure),
# and acquire + release latency next to node-redlock on five local nodes (base port 7270).
bench-node:
	bindings/node/build.sh bench

# JMH: the N = 5 decision cycle through JNI, and acquire + release p50/p99 of the nio and
# Jedis drivers next to Redisson's RedissonRedLock and RLock on five local nodes (base port
# 7450), healthy and with one node frozen.
bench-java:
	bindings/java/build.sh bench

# Per-call overhead of the C ABI against the core, N = 5 acquire + release.
bench-ffi:
	$(CARGO) bench -p redlock-ffi --bench ffi_cycle

# Five local nodes, redlock exec processes and async tasks contending for one counter;
# prints acquisitions, retries, acquire latency and lost updates (always 0).
demo: setup
	scripts/demo.sh
