#!/usr/bin/env bash
# Builds the core for WebAssembly (crate `redlock-wasm` in wasm/) and writes the
# wasm-bindgen output, optimised by wasm-opt, into bindings/node/wasm/.
#
#   scripts/build-wasm.sh          build (installing what is missing first)
#   scripts/build-wasm.sh --tools  only install the tools
#
# The Rust standard library for wasm32-unknown-unknown comes from rustup when that
# target is installed. Otherwise Debian's rustc-web (with its exact std source, LLVM and
# lld) is downloaded with apt-get, unpacked into $REDLOCK_CACHE (nothing is installed
# system-wide) and builds std itself with `-Z build-std`. wasm-bindgen-cli is pinned to
# the version of the `wasm-bindgen` crate and installed into $REDLOCK_CACHE; wasm-opt
# comes from npm's binaryen (Debian's is too old).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
source "$repo/scripts/lib.sh"

# Must equal the `wasm-bindgen` version pinned in wasm/Cargo.toml.
WASM_BINDGEN_VERSION=0.2.130
BINARYEN_VERSION=132.0.0
TARGET=wasm32-unknown-unknown
out_dir=$repo/bindings/node/wasm
# The wasm build uses another compiler than the host build, so it keeps its own
# target directory instead of invalidating the workspace's.
target_dir=$repo/target/wasm-build

log() { echo "build-wasm: $*" >&2; }

# ---- the Rust toolchain for wasm32 ------------------------------------------------

# Sets CARGO_ENV to the environment cargo needs for the wasm build.
CARGO_ENV=()
setup_rust() {
  if command -v rustup >/dev/null 2>&1 && rustup target list --installed 2>/dev/null | grep -qx "$TARGET"; then
    log "using rustup's $TARGET target"
    return
  fi
  need_apt apt-get:apt dpkg-deb:dpkg
  local version
  version=$(apt-cache policy rustc-web 2>/dev/null | awk '/Candidate:/ {print $2}')
  if [ -z "$version" ] || [ "$version" = "(none)" ]; then
    [ "$(id -u)" -eq 0 ] || die "apt-cache knows no rustc-web; run 'sudo apt-get update' (or: rustup target add $TARGET)"
    apt-get update -q >/dev/null
    version=$(apt-cache policy rustc-web 2>/dev/null | awk '/Candidate:/ {print $2}')
  fi
  [ -n "$version" ] && [ "$version" != "(none)" ] ||
    die "Debian offers no rustc-web here; install rustup's $TARGET target instead"
  # 1.96.0+dfsg1-1~deb12u2 -> 1.96
  local major_minor
  major_minor=$(echo "$version" | sed -E 's/^([0-9]+\.[0-9]+).*/\1/')
  local root=$REDLOCK_CACHE/rust-web/$version
  if [ ! -f "$root/.complete" ]; then
    local llvm
    llvm=$(apt-cache show "libstd-rust-web-$major_minor=$version" 2>/dev/null |
      sed -n 's/^Depends:.*\blibllvm\([0-9]\+\).*/\1/p' | head -n1)
    [ -n "$llvm" ] || die "cannot read the LLVM version libstd-rust-web-$major_minor depends on"
    local packages=(rustc-web libstd-rust-web-dev "libstd-rust-web-$major_minor" rust-web-src
      rust-web-llvm "libllvm$llvm" "lld-$llvm")
    log "downloading ${packages[*]} (rustc-web $version, ~140 MB) into $root"
    rm -rf "$root"
    mkdir -p "$root/debs"
    # apt's download sandbox user cannot write to a root-only cache; that is harmless.
    (cd "$root/debs" && apt-get download -qq "${packages[@]}" 2>&1 | grep -v "^W: Download is performed unsandboxed" >&2 || true)
    local deb count=0
    for deb in "$root"/debs/*.deb; do
      [ -e "$deb" ] || continue
      dpkg-deb -x "$deb" "$root/unpacked"
      count=$((count + 1))
    done
    [ "$count" -eq ${#packages[@]} ] || die "expected ${#packages[@]} packages, got $count in $root/debs"
    # Only the standard library's source is needed; the rest is the compiler's.
    local src=$root/unpacked/usr/src/rustc-$major_minor.0
    if [ -d "$src" ]; then
      find "$src" -mindepth 1 -maxdepth 1 ! -name library -exec rm -rf {} +
    fi
    rm -rf "$root/debs"
    local tool
    for tool in rustc rustdoc; do
      cat >"$root/$tool" <<EOF
#!/bin/sh
# Runs Debian's $tool $version from this folder without installing it.
export LD_LIBRARY_PATH="$root/unpacked/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export PATH="\$PATH:$root/unpacked/usr/bin"
exec "$root/unpacked/usr/bin/$tool" "\$@"
EOF
      chmod +x "$root/$tool"
    done
    "$root/rustc" --version >/dev/null || die "the unpacked rustc-web does not run (see $root)"
    touch "$root/.complete"
  fi
  log "using Debian's rustc-web $version with -Z build-std"
  # Building std ourselves also lets panics abort without their formatting machinery
  # (the core never panics; this only trims the module, by about 10 %).
  CARGO_ENV=(RUSTC="$root/rustc" RUSTDOC="$root/rustdoc" RUSTC_BOOTSTRAP=1
    CARGO_UNSTABLE_BUILD_STD=std,panic_abort
    CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="-Zunstable-options -Cpanic=immediate-abort")
}

# ---- wasm-bindgen-cli and wasm-opt ------------------------------------------------

WASM_BINDGEN=""
setup_wasm_bindgen() {
  local root=$REDLOCK_CACHE/wasm-bindgen-$WASM_BINDGEN_VERSION
  WASM_BINDGEN=$root/bin/wasm-bindgen
  if [ ! -x "$WASM_BINDGEN" ]; then
    log "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION into $root (takes a few minutes once)"
    # Without --locked: the CLI's own lockfile pins a crate version the registry lacks.
    cargo install -q wasm-bindgen-cli --version "=$WASM_BINDGEN_VERSION" --root "$root" ||
      die "cargo install wasm-bindgen-cli $WASM_BINDGEN_VERSION failed"
  fi
}

WASM_OPT=""
setup_wasm_opt() {
  local root=$REDLOCK_CACHE/binaryen-$BINARYEN_VERSION
  WASM_OPT=$root/node_modules/.bin/wasm-opt
  if [ ! -x "$WASM_OPT" ]; then
    need_apt npm:npm
    log "installing binaryen $BINARYEN_VERSION from npm into $root"
    mkdir -p "$root"
    npm install -q --no-audit --no-fund --prefix "$root" "binaryen@$BINARYEN_VERSION" >/dev/null ||
      die "npm install binaryen@$BINARYEN_VERSION failed"
  fi
}

# ---- build ------------------------------------------------------------------------

setup_rust
setup_wasm_bindgen
setup_wasm_opt
[ "${1:-}" = "--tools" ] && exit 0

log "cargo build -p redlock-wasm --target $TARGET --release"
# Size matters for a module every cold start compiles, so -Oz, except for the crates on
# a lock's path (the core, this shell, the ChaCha20 token generator): at -Oz they made
# a lock cycle ~1.5x slower. The allocator (dlmalloc, built with std) is on it too: about
# 4 us of a 27 us driver cycle went to malloc and free; at -O3 the cycle is ~1.7 us
# shorter for 0.5 KiB more. Without LTO each crate keeps its own level, at the same
# size as with it (~127 KiB).
env "${CARGO_ENV[@]}" \
  CARGO_TARGET_DIR="$target_dir" \
  CARGO_PROFILE_RELEASE_OPT_LEVEL=z \
  CARGO_PROFILE_RELEASE_LTO=false \
  CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
  CARGO_PROFILE_RELEASE_PANIC=abort \
  CARGO_PROFILE_RELEASE_DEBUG=0 \
  cargo build -q --manifest-path "$repo/Cargo.toml" -p redlock-wasm --release --target "$TARGET" \
  --config 'profile.release.package.rand_chacha.opt-level=3' \
  --config 'profile.release.package.ppv-lite86.opt-level=3' \
  --config 'profile.release.package.rand_core.opt-level=3' \
  --config 'profile.release.package.redlock-core.opt-level=3' \
  --config 'profile.release.package.redlock-wasm.opt-level=3' \
  --config 'profile.release.package.dlmalloc.opt-level=3'

raw=$target_dir/$TARGET/release/redlock_wasm.wasm
[ -f "$raw" ] || die "cargo did not produce $raw"
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
# One output for Node and edge runtimes: `web` is an ES module whose initSync takes
# either the module's bytes (Node) or a precompiled WebAssembly.Module (workerd, which
# refuses to compile from bytes). Weak refs free objects the caller forgets to free.
"$WASM_BINDGEN" --target web --weak-refs --out-dir "$staging" --out-name redlock_wasm "$raw"
"$WASM_OPT" -Oz --strip-debug --strip-producers --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
  --enable-mutable-globals --enable-reference-types --enable-multivalue \
  "$staging/redlock_wasm_bg.wasm" -o "$staging/redlock_wasm_bg.opt.wasm"
mv "$staging/redlock_wasm_bg.opt.wasm" "$staging/redlock_wasm_bg.wasm"
rm -rf "$out_dir"
mkdir -p "$out_dir"
# snippets/ holds the small JS helpers the module imports (wasm-bindgen inline_js).
cp -r "$staging"/snippets "$out_dir"/
cp "$staging"/redlock_wasm.js "$staging"/redlock_wasm.d.ts "$staging"/redlock_wasm_bg.wasm \
  "$staging"/redlock_wasm_bg.wasm.d.ts "$out_dir"/

size=$(stat -c %s "$out_dir/redlock_wasm_bg.wasm")
gzipped=$(gzip -9 -c "$out_dir/redlock_wasm_bg.wasm" | wc -c)
log "wrote $out_dir/redlock_wasm_bg.wasm: $size bytes ($((size / 1024)) KiB), $gzipped bytes gzipped"
