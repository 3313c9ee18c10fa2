# redlock: `make demo` runs the main job, `make test` runs every test.
# Both install what they need first (scripts/setup.sh).

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
CARGO ?= cargo
# Tools the project installs itself live here, outside the clone.
export REDLOCK_CACHE ?= $(HOME)/.cache/redlock

# Every test target; `make test` runs them all, in this order.
TEST_TARGETS := lint test-core test-ffi test-fuzz-smoke test-sim test-lab test-rust test-python test-node test-java test-php test-dist test-docs

.PHONY: all setup test demo dist bench bench-handoff bench-rust bench-ffi bench-python bench-node bench-java bench-php fuzz lint safety-report safety-pictures $(TEST_TARGETS)

all: test

setup:
	scripts/setup.sh

# Each target's wall time is printed after it, so a slow CI run says where the time went.
test: setup
	@start=$$(date +%s); \
	for target in $(TEST_TARGETS); do \
	  began=$$(date +%s); \
	  echo "==> make $$target"; \
	  $(MAKE) --no-print-directory $$target || exit 1; \
	  echo "<== make $$target: $$(( $$(date +%s) - began )) s"; \
	done; \
	echo "==> all tests passed in $$(( $$(date +%s) - start )) s"

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy -p redlock-core --no-default-features -- -D warnings
	$(CARGO) clippy -p redlock-client --all-targets --features cli -- -D warnings

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

# The Rust driver and the redlock CLI (the `cli` feature) against real local Redis nodes
# (scripts/redis-nodes.sh starts and stops them; base ports 7100-7199, and 7700-7738 and
# 7745-7760 for the CLI's exit statuses and signals, the waiting tests' own node sets, and
# the event, tracing and Sentinel tests; the Sentinel itself, redis-server --sentinel, on
# 7199; a master and two Sentinels, one of them stopped, on 7181-7183 for a Sentinel that
# hangs; a master with a password on 7184 and its Sentinel on 7195; 7766-7797 for the
# close, bad-input and CLI release tests; 7850-7854 for the audit fixes; 7950-7959 for the
# owed releases). The `tracing` and `sentinel` features are on, for their tests.
test-rust:
	$(CARGO) test -p redlock-client --features cli,tracing,sentinel

# The Python package (ctypes over libredlock, redis-py sync and asyncio): builds the wheel,
# installs it into $(REDLOCK_CACHE)/venv-python; ruff, mypy, pytest (vectors, the ctypes
# layer, both drivers against local Redis nodes on base ports 7300-7340; Sentinel mode on a
# master and its replica at 7350 and 7352 with `redis-server --sentinel` on 7355,
# Sentinels that never answer on 7360-7363, one slow to connect and answer on 7364, and a
# master on 7365 whose Sentinel on 7366 has a password; misuse and bad input on
# 7370-7379, the audit fixes on 7870-7874, owed releases on 7960-7969).
test-python:
	bindings/python/build.sh test

# The WASM core (scripts/build-wasm.sh) and the Node.js package: conformance vectors through
# WASM (fencing, waiting and inspection included), ioredis, node-redis and raw sockets
# against local Redis nodes, waiting, fencing, inspections, events and OpenTelemetry spans
# on real nodes, the TypeScript declarations, and the core inside workerd (base ports
# 7200-7269, 7275 and 7291-7295 (the queue of waiters), 7228 with a password for workerd's
# raw sockets; Sentinel mode on a master, its
# replica and a Sentinel at 7276-7278, 7279 closed, Sentinels that never answer on
# 7235-7237, 7237 over TLS and slow to connect; a master with a password and its Sentinel
# on 7238-7239; 7258-7259 stay closed; misuse and bad input on 7640-7659, the audit
# fixes on 7890-7894, owed releases on 7970-7974).
test-node:
	bindings/node/build.sh test

# The PHP package (FFI over libredlock; a non-blocking stream driver and a phpredis driver):
# php -l, phpcs, phpmd, then PHPUnit: conformance vectors (fencing and waiting included)
# through FFI, preloading under php-cgi, error paths, both drivers against local Redis
# nodes (waiting with release notices included; base ports 7500-7534), Sentinel mode (a
# master and its replica on 7535-7536, `redis-server --sentinel` on 7537, 7538 closed,
# Sentinels that never answer on 7540-7541),
# fencing tokens and the resource-side check (ports 7550-7555), the README's samples
# (7545-7549, 7557), interop with the CLI, frozen nodes (7565-7569), misuse after close
# (7575-7579), Symfony's contract (7580-7584) and the audit fixes (7930-7934).
test-php:
	bindings/php/build.sh test

# The safety lab's pictures render, and its pause-after-acquire prediction holds against
# real Redis nodes (base port 7600), ZooKeeper (7690) and etcd (7695, 7696) on loopback.
test-lab:
	tests/lab/run.sh

# Every installable artefact into dist/: the Python wheel (libredlock inside) and sdist,
# the npm tarball (WASM build and types inside), the Rust crates, the C library tarball.
dist:
	scripts/dist.sh

# Each artefact of `make dist` installed outside the clone (a virtualenv with no Rust
# toolchain, the sdist built with cargo, an empty npm project, a cargo project by path,
# a C program linked dynamically and statically), running the examples against three
# local Redis nodes (base port 7740).
test-dist:
	scripts/test-dist.sh

# Documentation that cannot drift: every code block in the READMEs is a verbatim part of
# an example file that the tests run; cargo doc with -D warnings; a docstring on every
# public Python member; a doc comment on every exported TypeScript declaration.
test-docs:
	scripts/test-docs.sh

# The Java binding (JNI over the core, Maven, JDK 17): builds the JNI library into the jar,
# then `mvn -q verify` runs the JUnit 5 tests (vectors through JNI, error paths, the nio and
# Jedis drivers against local Redis nodes on base ports 7400-7460; Sentinel mode on a master
# at 7410, its replica at 7412 and `redis-server --sentinel` at 7415, 7416 closed, a
# stopped server on 7417 as a Sentinel that hangs, one slow to connect and answer on 7418; the
# README's samples on 7460-7463; interop with the CLI; a frozen node's owed releases on
# 7470-7474 and 7980-7989; the audit fixes on 7910-7914).
test-java:
	bindings/java/build.sh test

# The scenario x strategy safety table (the one in docs/safety.md).
safety-report:
	$(CARGO) run -p redlock-sim --release -- report

# The timelines docs/safety.md shows, as SVG in docs/pictures/ (drift-tested like the table).
safety-pictures:
	$(CARGO) run -p redlock-sim --release -- --pictures docs/pictures

fuzz:
	scripts/fuzz.sh $${FUZZ_SECONDS:-120}

bench: bench-ffi bench-rust bench-python bench-node bench-java bench-php
	$(CARGO) bench -p redlock-core --bench cycle

# The Rust driver against five local nodes (base port 7185): Criterion means next to the
# raw redis floor, then p50/p99 (healthy, one node frozen) and hand-offs per second.
# Lock hand-off with 4 and 16 contenders, Rust, Node.js (and node-redlock) and Python
# (and pottery) side by side on the same five nodes (base port 7800).
bench-handoff:
	scripts/bench-handoff.sh

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

# The PHP stream and phpredis drivers next to Symfony Lock's CombinedStore over five
# RedisStores on five local nodes (base port 7540), healthy and with one node frozen.
bench-php:
	bindings/php/build.sh bench

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
