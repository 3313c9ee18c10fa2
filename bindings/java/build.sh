#!/usr/bin/env bash
# Builds, tests and benchmarks the Java binding (io.github.redlockcore).
#
#   bindings/java/build.sh lib      cargo build -p redlock-jni --release, and stage the
#                                   library under target/native/redlock/native/<os>/<arch>/
#                                   (the jar resource path NativeLibrary loads from)
#   bindings/java/build.sh test     lib, the JNI crate's own tests (cargo test -p redlock-jni:
#                                   the loop's native half without a JVM), then
#                                   `mvn -q verify`: compile (javac -Xlint -Werror),
#                                   package the jar with the library inside, and run the
#                                   JUnit 5 tests through Surefire (vectors, JNI boundary,
#                                   both drivers against local Redis nodes, base ports 7400-7474;
#                                   7495-7499 are ports where nothing listens)
#   bindings/java/build.sh install  lib, then the jar into the local Maven repository, and
#                                   target/run-classpath.txt (the jar and Jedis) for the
#                                   examples (what `make demo` runs the Java workers with)
#   bindings/java/build.sh bench    lib, then the JMH benchmarks (bench/run.sh)
#
# Maven downloads from Maven Central into its local repository (~/.m2 by default, outside
# the clone; MAVEN_REPO_LOCAL changes it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$repo/scripts/lib.sh"

need_tools() {
  need_apt javac:openjdk-17-jdk-headless mvn:maven
  require "cargo (Rust toolchain)" command -v cargo || return 1
  local version
  version=$(javac -version 2>&1 | sed -n 's/^javac \([0-9]*\).*/\1/p')
  [ "${version:-0}" -ge 17 ] || die "javac 17 or newer is needed, found: $(javac -version 2>&1)"
}

mvn_args=(-q -B -Dstyle.color=never)
[ -n "${MAVEN_REPO_LOCAL:-}" ] && mvn_args+=("-Dmaven.repo.local=$MAVEN_REPO_LOCAL")

os_arch() {
  local os arch
  case "$(uname -s)" in
    Linux) os=linux ;;
    Darwin) os=darwin ;;
    *) os=$(uname -s | tr 'A-Z' 'a-z') ;;
  esac
  case "$(uname -m)" in
    x86_64 | amd64) arch=amd64 ;;
    aarch64 | arm64) arch=aarch64 ;;
    *) arch=$(uname -m) ;;
  esac
  echo "$os/$arch"
}

build_lib() {
  need_tools
  (cd "$repo" && cargo build -q -p redlock-jni --release)
  local target built dir
  target=$(cargo_target_dir)
  built="$target/release/libredlock_jni.so"
  [ "$(uname -s)" = Darwin ] && built="$target/release/libredlock_jni.dylib"
  [ -f "$built" ] || die "cargo did not produce $built"
  dir="$here/target/native/redlock/native/$(os_arch)"
  mkdir -p "$dir"
  # The release profile keeps debug info for profiling; the jar does not need it.
  if command -v objcopy >/dev/null 2>&1; then
    objcopy --strip-debug "$built" "$dir/$(basename "$built").tmp"
  else
    cp "$built" "$dir/$(basename "$built").tmp"
  fi
  mv -f "$dir/$(basename "$built").tmp" "$dir/$(basename "$built")"
}

case "${1:-}" in
  lib) build_lib ;;
  test)
    build_lib
    shift
    (cd "$repo" && cargo test -q -p redlock-jni)
    # The interop tests run the Rust CLI against the same nodes (the build `make
    # test-rust` made).
    cli=$(cli_binary)
    (cd "$here" && mvn "${mvn_args[@]}" verify "-Dredlock.cli=$cli" "$@")
    ;;
  install)
    build_lib
    (cd "$here" && mvn "${mvn_args[@]}" -DskipTests install &&
      mvn "${mvn_args[@]}" dependency:build-classpath -DincludeScope=runtime \
        -Dmdep.outputFile=target/classpath.txt)
    # What examples/ run with: java -cp "$(cat target/run-classpath.txt)" examples/X.java
    printf '%s:%s\n' "$here/target/redlock-0.1.0.jar" "$(cat "$here/target/classpath.txt")" \
      >"$here/target/run-classpath.txt"
    ;;
  bench)
    build_lib
    shift
    "$here/bench/run.sh" "$@"
    ;;
  *)
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
