#!/usr/bin/env bash
# Builds every installable artefact into dist/ (`make dist`):
#
#   redlock_core-V-py3-none-<platform>.whl   Python wheel with libredlock inside: installs
#                                             with pip alone, no Rust toolchain
#   redlock_core-V.tar.gz                     Python sdist: Python and Rust source, builds
#                                             libredlock with cargo when installed
#   redlock-core-V.tgz                        npm package (npm pack; its prepack step builds
#                                             the WASM core and its TypeScript types)
#   redlock-core-V.crate, redlock-client-V.crate   the Rust crates (cargo package)
#   libredlock-V-<platform>.tar.gz            the C library: lib/libredlock.{so,a},
#                                             include/, lib/pkgconfig/redlock.pc
#
# Builds are reused: only what changed is rebuilt. scripts/test-dist.sh installs each
# artefact outside the clone and runs an example with it.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source scripts/lib.sh

out=$repo/dist
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
platform="$(uname -s | tr '[:upper:]' '[:lower:]')-$(uname -m)"
target_dir=$(cargo_target_dir)
rm -rf "$out"
mkdir -p "$out"

echo "dist: Python wheel and sdist" >&2
bindings/python/build.sh wheel
bindings/python/build.sh sdist
cp bindings/python/dist/redlock_core-"$version"-*.whl bindings/python/dist/redlock_core-"$version".tar.gz "$out/"

echo "dist: npm package" >&2
require "Node.js 20 or newer with npm" command -v npm || exit 1
(cd bindings/node && npm pack --silent --pack-destination "$out" >/dev/null)

echo "dist: Rust crates" >&2
# --no-verify: test-dist.sh builds the packaged crates in a project of its own.
# --allow-dirty: package the tree as it is (a build leaves git-ignored files only).
rm -f "$target_dir"/package/redlock-*.crate
cargo package -q -p redlock-core -p redlock-client --no-verify --allow-dirty
cp "$target_dir"/package/redlock-core-"$version".crate "$target_dir"/package/redlock-client-"$version".crate "$out/"

echo "dist: C library" >&2
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
ffi/install.sh "$staging/libredlock-$version" >/dev/null
tar -C "$staging" -czf "$out/libredlock-$version-$platform.tar.gz" "libredlock-$version"

(cd "$out" && ls -l)
