#!/usr/bin/env bash
# Builds, tests and benchmarks the Python package redlock-core.
#
#   bindings/python/build.sh lib     cargo build -p redlock-ffi --release, and copy
#                                    libredlock.so into src/redlock_core/
#   bindings/python/build.sh venv    the tests' virtualenv, $REDLOCK_CACHE/venv-python,
#                                    with requirements-dev.txt
#   bindings/python/build.sh wheel   lib + venv, then the wheel into bindings/python/dist/
#   bindings/python/build.sh sdist   venv, then the sdist (Python and Rust source) into
#                                    bindings/python/dist/
#   bindings/python/build.sh install wheel, installed into the venv (what `make demo` runs)
#   bindings/python/build.sh test    wheel, installed into the venv; ruff, mypy, pytest
#   bindings/python/build.sh bench   wheel, installed; bench/bench.py and bench/handoff.py
#                                    (5 local nodes each)
#   bindings/python/build.sh handoff wheel, installed; bench/handoff.py with the arguments
#                                    given (e.g. --ports of nodes that already run)
#
# `pip install ./bindings/python` (or the sdist) also works without this script: the
# build hook (hatch_build.py) builds the library with cargo into a temporary directory
# when src/redlock_core/ has none. REDLOCK_LIBRARY points the build (and the installed
# package, at run time) at another libredlock.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$repo/scripts/lib.sh"

venv="$REDLOCK_CACHE/venv-python"
python=${PYTHON:-python3}

build_lib() {
  require "cargo (Rust toolchain)" command -v cargo || return 1
  (cd "$repo" && cargo build -q -p redlock-ffi --release)
  local target
  target=$(cargo_target_dir)
  local built="$target/release/libredlock.so"
  [ -f "$built" ] || die "cargo did not produce $built"
  local bundled="$here/src/redlock_core/libredlock.so"
  # The release profile keeps debug info for profiling; the package does not need it.
  if command -v objcopy >/dev/null 2>&1; then
    objcopy --strip-debug "$built" "$bundled.tmp"
  else
    cp "$built" "$bundled.tmp"
  fi
  mv -f "$bundled.tmp" "$bundled"
}

make_venv() {
  need_apt python3:python3
  if ! "$python" -c 'import sys, venv, ensurepip; assert sys.version_info >= (3, 9)' 2>/dev/null; then
    need_apt python3:python3-venv
  fi
  local stamp="$venv/.requirements.sha256" want
  want=$(sha256sum "$here/requirements-dev.txt" | cut -d' ' -f1)
  if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  echo "python: creating $venv" >&2
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -r "$here/requirements-dev.txt"
  echo "$want" >"$stamp"
}

build_wheel() {
  build_lib
  make_venv
  rm -rf "$here/dist"
  # No build isolation: hatchling comes pinned from requirements-dev.txt.
  (cd "$here" && "$venv/bin/python" -m pip wheel -q --no-deps --no-build-isolation -w dist .)
  ls "$here"/dist/redlock_core-*.whl >/dev/null
}

build_sdist() {
  make_venv
  rm -f "$here"/dist/redlock_core-*.tar.gz
  (cd "$here" && "$venv/bin/hatchling" build -t sdist -d dist >/dev/null)
  ls "$here"/dist/redlock_core-*.tar.gz >/dev/null
}

install_wheel() {
  build_wheel
  "$venv/bin/python" -m pip install -q --force-reinstall --no-deps "$here"/dist/redlock_core-*.whl
}

case "${1:-}" in
  lib) build_lib ;;
  venv) make_venv ;;
  wheel) build_wheel ;;
  sdist) build_sdist ;;
  install) install_wheel ;;
  test)
    install_wheel
    cd "$here"
    "$venv/bin/ruff" check src tests bench examples hatch_build.py
    "$venv/bin/ruff" format --check src tests bench examples hatch_build.py
    "$venv/bin/mypy"
    # The tests import the installed wheel, never src/ (so packaging is tested too).
    shift
    "$venv/bin/python" -m pytest -p no:cacheprovider "$@"
    ;;
  bench)
    install_wheel
    shift
    "$venv/bin/python" "$here/bench/bench.py" "$@"
    "$venv/bin/python" "$here/bench/handoff.py"
    ;;
  handoff)
    install_wheel
    shift
    "$venv/bin/python" "$here/bench/handoff.py" "$@"
    ;;
  *)
    sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
