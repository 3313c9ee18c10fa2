#!/usr/bin/env bash
# Builds libredlock (release) and installs it with its headers and a pkg-config file:
#   ffi/install.sh PREFIX
# gives PREFIX/lib/libredlock.{so,a}, PREFIX/include/redlock.h (and redlock_php.h)
# and PREFIX/lib/pkgconfig/redlock.pc, so `pkg-config --cflags --libs redlock` works
# with PKG_CONFIG_PATH=PREFIX/lib/pkgconfig.
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
install -m 0755 "$lib_dir/libredlock.so" "$prefix/lib/"
install -m 0644 "$lib_dir/libredlock.a" "$prefix/lib/"
install -m 0644 ffi/include/redlock.h ffi/include/redlock_php.h "$prefix/include/"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" ffi/redlock.pc.in >"$prefix/lib/pkgconfig/redlock.pc"
echo "installed libredlock $version into $prefix"
