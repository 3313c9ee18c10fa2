#!/usr/bin/env bash
# Builds libredlock (release) and installs it with its headers and a pkg-config file:
#   ffi/install.sh PREFIX
# gives PREFIX/lib/libredlock.{so,a}, PREFIX/include/redlock.h (and redlock_php.h)
# and PREFIX/lib/pkgconfig/redlock.pc, so `pkg-config --cflags --libs redlock` works
# with PKG_CONFIG_PATH=PREFIX/lib/pkgconfig (and `--static --libs` links libredlock.a).
# The tree is relocatable: redlock.pc finds the prefix from its own place.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 PREFIX" >&2; exit 2; }
cd "$(dirname "$0")/.."
prefix=$(mkdir -p "$1" && cd "$1" && pwd)
profile=${REDLOCK_PROFILE:-release}
if [ "$profile" = release ]; then
  cargo build -q -p redlock-ffi --release
else
  cargo build -q -p redlock-ffi
fi
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
[ "$profile" = release ] && lib_dir="$target_dir/release" || lib_dir="$target_dir/debug"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include"
# The release profile keeps debug info for profiling; the installed library does not.
if command -v objcopy >/dev/null 2>&1 && [ "$profile" = release ]; then
  objcopy --strip-debug "$lib_dir/libredlock.so" "$prefix/lib/libredlock.so"
  objcopy --strip-debug "$lib_dir/libredlock.a" "$prefix/lib/libredlock.a"
  chmod 0755 "$prefix/lib/libredlock.so"
  chmod 0644 "$prefix/lib/libredlock.a"
else
  install -m 0755 "$lib_dir/libredlock.so" "$prefix/lib/"
  install -m 0644 "$lib_dir/libredlock.a" "$prefix/lib/"
fi
install -m 0644 ffi/include/redlock.h ffi/include/redlock_php.h "$prefix/include/"
sed -e "s|@VERSION@|$version|" ffi/redlock.pc.in >"$prefix/lib/pkgconfig/redlock.pc"
echo "installed libredlock $version into $prefix"
