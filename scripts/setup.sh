#!/usr/bin/env bash
# Installs what the build and the tests need. Debian packages are installed with apt
# when running as root; otherwise a missing one is reported with the command to run.
# Tools that do not come from Debian go into $REDLOCK_CACHE (outside the clone).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

# Debian packages every part of the test suite uses.
need_apt redis-server:redis-server valgrind:valgrind
# Test certificates: scripts/redis-nodes.sh --tls, and the Node.js Sentinel test's slow
# TLS Sentinel, which makes its own.
need_apt openssl:openssl
# The C ABI's tests: gcc builds them, pkg-config finds the installed library, and
# PHP's FFI (in Debian's php-cli) loads the PHP header.
need_apt gcc:gcc pkg-config:pkg-config php:php-cli
# The PHP package's tests (bindings/php/build.sh also installs php-redis and, for its
# benchmark, php-symfony-lock, which provide no command).
need_apt php-cgi:php-cgi phpunit:phpunit composer:composer phpcs:php-codesniffer phpmd:phpmd
# The safety lab (make test-lab): the pictures are rendered to PNG with rsvg-convert;
# its real-system checks run a ZooKeeper server (the zookeeper package; zooinspector is
# the one command it puts on the PATH) on Java, and an etcd member with etcdctl.
need_apt rsvg-convert:librsvg2-bin java:default-jre-headless zooinspector:zookeeper \
  etcd:etcd-server etcdctl:etcd-client
# The Java binding: JDK 17 and Maven (its dependencies come from Maven Central into ~/.m2).
need_apt javac:openjdk-17-jdk-headless mvn:maven

mkdir -p "$REDLOCK_CACHE"
echo "setup: ok (cache: $REDLOCK_CACHE)"
