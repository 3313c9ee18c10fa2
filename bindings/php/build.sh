#!/usr/bin/env bash
# Builds, checks, tests and benchmarks the PHP package redlock/redlock.
#
#   bindings/php/build.sh lib      cargo build -p redlock-ffi --release; copy libredlock.so
#                                  and the PHP header into bindings/php/lib/
#   bindings/php/build.sh deps     the Debian packages the tests need
#   bindings/php/build.sh install  lib + the Debian packages + Composer's autoloader
#                                  (what `make demo` runs)
#   bindings/php/build.sh lint     php -l on every file, composer validate, phpcs (PSR-12),
#                                  phpmd (unused code)
#   bindings/php/build.sh test     install + lint + the redlock CLI (for the interop test),
#                                  then PHPUnit: vectors, FFI, preloading under php-cgi, error
#                                  paths, both drivers against local Redis nodes (ports 7500-7534),
#                                  Sentinel (a master, its replica and a Sentinel: 7535-7538),
#                                  fencing (ports 7550-7555), the README's samples
#                                  (examples/*.php: 7545-7549 and 7557), Symfony Lock
#                                  (7560-7564 and 7580-7584), frozen nodes (7565-7569),
#                                  misuse (7575-7579)
#   bindings/php/build.sh bench    install, then bench/bench.php next to Symfony Lock's
#                                  CombinedStore (5 local nodes on ports 7540-7544)
#
# Everything comes from Debian's packages (php-cli, php-redis, php-cgi, phpunit, composer,
# php-codesniffer, phpmd, php-sqlite3, php-symfony-lock): Packagist is not needed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$repo/scripts/lib.sh"
export COMPOSER_ALLOW_SUPERUSER=1

# need_deb CHECK PACKAGE: CHECK (a shell command) succeeds, installing PACKAGE if not.
need_deb() {
  bash -c "$1" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" -ne 0 ]; then
    die "missing Debian package $2 (install it with: sudo apt-get install -y $2)"
  fi
  echo "setup: installing $2" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "$2" >/dev/null ||
    { apt-get update -q >/dev/null && apt-get install -y -q "$2" >/dev/null; }
  bash -c "$1" >/dev/null 2>&1 || die "installing $2 did not satisfy: $1"
}

need_php_ext() {
  need_deb "php -r 'exit(extension_loaded(\"$1\") ? 0 : 1);'" "$2"
}

deps() {
  need_apt php:php-cli php-cgi:php-cgi phpunit:phpunit composer:composer \
    phpcs:php-codesniffer phpmd:phpmd
  need_php_ext FFI php-cli
  need_php_ext redis php-redis
  # The hand-off test stops and resumes its waiter processes.
  need_php_ext posix php-common
  need_php_ext pcntl php-cli
  # The fencing tests check the SQL pattern against SQLite through PDO.
  need_php_ext pdo_sqlite php-sqlite3
  # RedlockStore is tested under Symfony Lock (and the benchmark compares with it).
  need_deb "test -f /usr/share/php/Symfony/Component/Lock/autoload.php" php-symfony-lock
}

build_lib() {
  require "cargo (Rust toolchain)" command -v cargo || return 1
  (cd "$repo" && cargo build -q -p redlock-ffi --release)
  local built
  built="$(cargo_target_dir)/release/libredlock.so"
  [ -f "$built" ] || die "cargo did not produce $built"
  mkdir -p "$here/lib"
  # The release profile keeps debug info for profiling; the package does not need it.
  if command -v objcopy >/dev/null 2>&1; then
    objcopy --strip-debug "$built" "$here/lib/libredlock.so.tmp"
  else
    cp "$built" "$here/lib/libredlock.so.tmp"
  fi
  mv -f "$here/lib/libredlock.so.tmp" "$here/lib/libredlock.so"
  cp "$repo/ffi/include/redlock_php.h" "$here/lib/redlock_php.h"
}

install() {
  deps
  build_lib
  (cd "$here" && composer dump-autoload --dev -q)
}

lint() {
  cd "$here"
  local file
  while IFS= read -r file; do
    php -l "$file" >/dev/null || die "php -l: $file"
  done < <(find src tests bench examples -name '*.php'; echo preload.php; echo bin/ffi-header)
  composer validate -q --no-check-publish
  phpcs -q
  phpmd src,tests,examples,bench,preload.php text unusedcode
}

case "${1:-}" in
  lib) build_lib ;;
  deps) deps ;;
  install) install ;;
  lint)
    deps
    lint
    ;;
  test)
    install
    lint
    # The interop test runs the project's redlock CLI (the build `make test-rust` made).
    export REDLOCK_CLI
    REDLOCK_CLI=$(cli_binary)
    export REDLOCK_LIBRARY="$here/lib/libredlock.so"
    export REDLOCK_HEADER="$here/lib/redlock_php.h"
    shift
    cd "$here"
    phpunit "$@"
    ;;
  bench)
    install
    need_deb "test -f /usr/share/php/Symfony/Component/Lock/autoload.php" php-symfony-lock
    shift
    php "$here/bench/bench.php" "$@"
    ;;
  *)
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
