#!/usr/bin/env bash
# Installs what the build and the tests need. Debian packages are installed with apt
# when running as root; otherwise a missing one is reported with the command to run.
# Tools that do not come from Debian go into $REDLOCK_CACHE (outside the clone).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

# Debian packages every part of the test suite uses.
need_apt redis-server:redis-server valgrind:valgrind
# The C ABI's tests: gcc builds them, pkg-config finds the installed library, and
# PHP's FFI (in Debian's php-cli) loads the PHP header.
need_apt gcc:gcc pkg-config:pkg-config php:php-cli
# The Java binding: JDK 17 and Maven (its dependencies come from Maven Central into ~/.m2).
need_apt javac:openjdk-17-jdk-headless mvn:maven

mkdir -p "$REDLOCK_CACHE"
echo "setup: ok (cache: $REDLOCK_CACHE)"
