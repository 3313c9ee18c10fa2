#!/usr/bin/env bash
# `make test-dist`: every artefact `make dist` builds, installed the way a user would,
# into a fresh place outside the clone, then an example run with it against three local
# Redis nodes (base port 7740):
#
#   Python  the wheel into a new virtualenv with no Rust toolchain on PATH, then
#           examples/quickstart.py and quickstart_async.py; the sdist into another one
#           (cargo builds libredlock, its progress shown), checking that the unpacked
#           source tree is left exactly as it was
#   npm     the tarball (WASM build and TypeScript types inside) and ioredis into an
#           empty npm project, then examples/quickstart.js
#   Rust    both .crate files unpacked, a new cargo project depending on them by path,
#           running examples/quickstart.rs and blocking.rs
#   C       the libredlock tarball unpacked, examples/acquire.c linked through
#           pkg-config dynamically and statically (--static), both run
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source scripts/lib.sh

scripts/dist.sh
dist=$repo/dist
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
target_dir=$(cargo_target_dir)

work=$(mktemp -d /tmp/redlock-dist-test.XXXXXX)
base_port=7740
cleanup() {
  scripts/redis-nodes.sh stop --base-port "$base_port" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
REDLOCK_NODES=$(scripts/redis-nodes.sh start --nodes 3 --base-port "$base_port" | paste -sd, -)
export REDLOCK_NODES
passed=0
ok() {
  echo "test-dist: ok: $*" >&2
  passed=$((passed + 1))
}
# Every node is empty again (examples release what they take).
nodes_empty() {
  local i keys
  for i in 0 1 2; do
    keys=$(redis-cli -p $((base_port + i)) dbsize)
    [ "$keys" = 0 ] || die "$1 left $keys keys on node $i"
  done
}

# ---- Python ------------------------------------------------------------------------
python=${PYTHON:-python3}
wheel=$(ls "$dist"/redlock_core-"$version"-py3-none-*.whl)
# The constraints pin redis-py as the tests do; pip's own cache makes this quick.
constraints=$repo/bindings/python/requirements-dev.txt
"$python" -m venv "$work/venv-wheel"
# No cargo, rustc or repository on the way: PATH holds only the system's tools.
PATH=/usr/local/bin:/usr/bin:/bin "$work/venv-wheel/bin/python" -m pip install -q -c "$constraints" "$wheel"
for example in quickstart.py quickstart_async.py; do
  cp "bindings/python/examples/$example" "$work/"
  (cd "$work" && PATH=/usr/local/bin:/usr/bin:/bin "$work/venv-wheel/bin/python" "$example") >"$work/out.txt"
  cat "$work/out.txt" >&2
  grep -q "holding orders:42 for" "$work/out.txt" || die "python $example did not hold the lock"
done
library=$("$work/venv-wheel/bin/python" -c 'import redlock_core; print(redlock_core.library_path())')
case $library in "$work"/venv-wheel/*) ;; *) die "the wheel's package loads $library" ;; esac
nodes_empty "the Python examples"
ok "Python wheel in a fresh virtualenv, no Rust toolchain: examples ran ($library)"

# The sdist builds from source with cargo (progress shown), outside its own tree.
mkdir "$work/sdist"
tar -C "$work/sdist" -xzf "$dist/redlock_core-$version.tar.gz"
source_tree="$work/sdist/redlock_core-$version"
[ -f "$source_tree/rust/ffi/Cargo.toml" ] || die "the sdist lacks the Rust source"
(cd "$source_tree" && find . -type f -print0 | sort -z | xargs -0 sha256sum; find . | sort) >"$work/before"
"$python" -m venv "$work/venv-sdist"
# A cargo target directory in the cache keeps repeated runs quick; by default the build
# uses a temporary one.
CARGO_TARGET_DIR=$REDLOCK_CACHE/sdist-target "$work/venv-sdist/bin/python" -m pip install -v \
  -c "$constraints" "$source_tree" >"$work/sdist.log" 2>&1 || {
  tail -40 "$work/sdist.log" >&2
  die "installing the sdist failed"
}
grep -q "redlock-core: building libredlock with cargo" "$work/sdist.log" || die "no build progress shown"
grep -q "Finished .release" "$work/sdist.log" || die "cargo's progress was not shown"
(cd "$source_tree" && find . -type f -print0 | sort -z | xargs -0 sha256sum; find . | sort) >"$work/after"
diff "$work/before" "$work/after" >&2 || die "building the sdist wrote into its source tree"
(cd "$work" && "$work/venv-sdist/bin/python" quickstart.py) >/dev/null
nodes_empty "the sdist's example"
ok "Python sdist built with cargo (progress shown, source tree untouched): example ran"

# ---- npm ---------------------------------------------------------------------------
tarball=$dist/redlock-core-$version.tgz
listing=$(tar -tzf "$tarball")
for file in package/wasm/redlock_wasm_bg.wasm package/wasm/redlock_wasm.js \
  package/wasm/redlock_wasm.d.ts package/index.d.ts package/api.d.ts package/edge.d.ts; do
  grep -qx "$file" <<<"$listing" || die "the npm tarball lacks $file"
done
mkdir "$work/npm-app"
ioredis=$(node -p 'require("./bindings/node/node_modules/ioredis/package.json").version' 2>/dev/null || echo 5)
(
  cd "$work/npm-app"
  npm init -y >/dev/null
  npm pkg set type=module >/dev/null
  npm install --no-audit --no-fund --loglevel=error "$tarball" "ioredis@$ioredis" >/dev/null
  cp "$repo/bindings/node/examples/quickstart.js" .
  node quickstart.js
) >"$work/out.txt"
cat "$work/out.txt" >&2
# The refusal decides at a quorum of conflicts (two of the three nodes): the third node's
# answer may still be pending.
grep -Eq "held elsewhere: .*conflict.*conflict" "$work/out.txt" || die "the npm example did not run through"
nodes_empty "the npm example"
ok "npm tarball (WASM and types inside) in an empty npm project: example ran"

# ---- Rust --------------------------------------------------------------------------
mkdir -p "$work/crates" "$work/rust-app/src"
for crate in redlock-core redlock-client; do
  tar -C "$work/crates" -xzf "$dist/$crate-$version.crate"
done
cat >"$work/rust-app/Cargo.toml" <<EOF
[package]
name = "redlock-dist-check"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
redlock-client = { path = "../crates/redlock-client-$version" }
tokio = { version = "1", features = ["macros", "rt-multi-thread", "time"] }

# redlock-client asks crates.io for redlock-core; take the packaged one instead.
[patch.crates-io]
redlock-core = { path = "../crates/redlock-core-$version" }
EOF
mkdir "$work/rust-app/src/bin"
cp bindings/rust/examples/quickstart.rs "$work/rust-app/src/main.rs"
cp bindings/rust/examples/blocking.rs "$work/rust-app/src/bin/blocking.rs"
# The repository's lockfile pins the same dependency versions, and its target directory
# already holds most of them compiled.
cp Cargo.lock "$work/rust-app/Cargo.lock"
# The workspace's target directory: units built with the same features are reused.
export CARGO_TARGET_DIR="$target_dir"
(cd "$work/rust-app" && cargo run -q --bin redlock-dist-check && cargo run -q --bin blocking) >"$work/out.txt"
unset CARGO_TARGET_DIR
cat "$work/out.txt" >&2
grep -q "^work done$" "$work/out.txt" || die "the Rust example did not run through"
grep -q "^holding orders:42 with token " "$work/out.txt" || die "the blocking example did not run"
if (cd "$work/rust-app" && cargo tree -q --prefix none -e normal) | grep -qE '^(clap|serde_json) '; then
  die "a library user of redlock-client still compiles clap (the cli feature must be off by default)"
fi
nodes_empty "the Rust example"
ok "Rust crates (cargo package) in a new cargo project by path: example ran, no CLI dependencies"

# ---- C -----------------------------------------------------------------------------
mkdir "$work/c"
tar -C "$work/c" -xzf "$dist"/libredlock-"$version"-*.tar.gz
export PKG_CONFIG_PATH=$work/c/libredlock-$version/lib/pkgconfig
cp ffi/examples/acquire.c "$work/c/"
cd "$work/c"
# shellcheck disable=SC2046
gcc -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags redlock) -o acquire-shared acquire.c \
  $(pkg-config --libs redlock) -Wl,-rpath,"$(pkg-config --variable=libdir redlock)"
# The static line links libredlock.a (glibc warns about functions of Rust's standard
# library that libredlock never calls; those warnings are not errors).
# shellcheck disable=SC2046
gcc -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags redlock) -o acquire-static acquire.c \
  $(pkg-config --static --libs redlock) 2>"$work/c/link.log" || {
  cat "$work/c/link.log" >&2
  die "static link failed"
}
readelf -d acquire-shared | grep -q 'NEEDED.*libredlock\.so' || die "the shared build does not load libredlock.so"
if readelf -d acquire-static 2>/dev/null | grep -q 'libredlock'; then
  die "the static build still needs libredlock.so"
fi
IFS=, read -r -a urls <<<"$REDLOCK_NODES"
for program in acquire-shared acquire-static; do
  # Moved away from the prefix: the static one needs nothing of it.
  [ "$program" = acquire-static ] && mv "$work/c/libredlock-$version" "$work/c/moved"
  "./$program" "${urls[@]}" >"$work/out.txt"
  grep -q '^second client: refused (conflict)$' "$work/out.txt" || die "$program: the rival was not refused"
  grep -q '^released on 3 of 3 nodes ' "$work/out.txt" || die "$program: not released everywhere"
done
cd "$repo"
nodes_empty "the C example"
ok "C library from its tarball: the example linked with pkg-config, shared and static, ran"

echo "test-dist: $passed passed, 0 failed"
