#!/usr/bin/env bash
# The safety lab's own checks (`make test-lab`):
#
# 1. every picture in docs/pictures/ renders (rsvg-convert to PNG; a render error fails);
#    that they match what the simulation draws is checked by `cargo test -p redlock-sim`
#    (tests/docs.rs);
# 2. the pause-after-acquire sequence against real systems on loopback (five Redis nodes
#    on base port 7600 and a sixth, 7605, as the fenced writes' resource; ZooKeeper on
#    7690, etcd on 7695/7696), and the clock-jump sequence against the Redis nodes (its
#    effect injected: see real_check.py), compared with what the simulation predicts
#    (tests/lab/real_check.py). The fenced Redlock checks use the Python package's
#    fencing API and fail, saying so, while the package lacks it.
#
# Python comes from $REDLOCK_CACHE/venv-lab (kazoo, redis-py, ruff; tests/lab/requirements.txt);
# the project's Python package is used from the source tree with the libredlock just built.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$repo/scripts/lib.sh"

REDIS_BASE_PORT=7600
venv="$REDLOCK_CACHE/venv-lab"
python=${PYTHON:-python3}

need_apt rsvg-convert:librsvg2-bin python3:python3
if ! "$python" -c 'import sys, venv, ensurepip; assert sys.version_info >= (3, 9)' 2>/dev/null; then
  need_apt python3:python3-venv
fi
require "redis-server" command -v redis-server
require "rsvg-convert (librsvg2-bin)" command -v rsvg-convert

# 1. The pictures render.
shopt -s nullglob
pictures=("$repo"/docs/pictures/*.svg)
[ ${#pictures[@]} -gt 0 ] || die "no pictures in docs/pictures/ (make safety-pictures)"
work=$(mktemp -d)
cleanup() {
  "$repo/scripts/redis-nodes.sh" stop --base-port "$REDIS_BASE_PORT" >/dev/null 2>&1 || true
  "$repo/scripts/coord-servers.sh" stop "$work/servers" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
for svg in "${pictures[@]}"; do
  png="$work/$(basename "$svg" .svg).png"
  rsvg-convert "$svg" -o "$png" || die "rsvg-convert failed on $svg"
  [ -s "$png" ] || die "rsvg-convert produced nothing for $svg"
done
echo "lab: ${#pictures[@]} pictures render"

# 2. Real systems.
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)
if ! [ -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "lab: creating $venv" >&2
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install -q -r "$here/requirements.txt"
  echo "$want" >"$stamp"
fi
"$venv/bin/ruff" check -q --config "$here/ruff.toml" "$here" &&
  "$venv/bin/ruff" format -q --config "$here/ruff.toml" --check "$here" ||
  die "ruff: tests/lab needs fixing (ruff check / ruff format, tests/lab/ruff.toml)"
(cd "$repo" && cargo build -q -p redlock-sim -p redlock-ffi --release)
target=$(cargo_target_dir)
"$repo/scripts/redis-nodes.sh" start --nodes 6 --base-port "$REDIS_BASE_PORT" >/dev/null
"$repo/scripts/coord-servers.sh" start "$work/servers"
ports=$(seq -s, "$REDIS_BASE_PORT" $((REDIS_BASE_PORT + 4)))
real_check() {
  PYTHONPATH="$repo/bindings/python/src" REDLOCK_LIBRARY="$target/release/libredlock.so" \
    "$venv/bin/python" "$here/real_check.py" check --sim "$target/release/redlock-sim" \
    --redis-ports "$ports" --resource-port $((REDIS_BASE_PORT + 5)) --workdir "$work/logs" "$@"
}
failed=0
real_check --scenario pause-after-acquire \
  redlock redlock-fenced zookeeper zookeeper-fenced etcd etcd-fenced || failed=1
real_check --scenario clock-jump redlock redlock-fenced || failed=1
if [ "$failed" != 0 ]; then
  tail -n 30 "$work"/logs/*.log >&2 || true
  die "the lab and reality disagree (or a check could not run: see above)"
fi
echo "lab: real systems agree with the simulation"
