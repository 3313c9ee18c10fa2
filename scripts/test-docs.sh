#!/usr/bin/env bash
# `make test-docs`: documentation that cannot drift from the code.
#   1. every code block of every Markdown file is a verbatim part of an example or test
#      that `make test` runs (scripts/check-docs.py samples); the core's example runs here,
#      the others in test-dist, test-node and test-ffi;
#   2. the API documentation builds warning-free: cargo doc -D warnings for every crate
#      (the CLI included), a doc comment on every declaration of the Node package's
#      .d.ts files, and a docstring on every public member of the Python package.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source scripts/lib.sh

python3 scripts/check-docs.py samples
cargo run -q -p redlock-core --example driver_loop >/dev/null

RUSTDOCFLAGS="-D warnings" cargo doc -q --no-deps --workspace
RUSTDOCFLAGS="-D warnings" cargo doc -q --no-deps -p redlock-client --features cli
echo "rust: cargo doc -D warnings: clean"
python3 scripts/check-docs.py typescript
# The package as installed (its docstrings are what help() and IDEs show).
bindings/python/build.sh install >/dev/null
"$REDLOCK_CACHE/venv-python/bin/python" scripts/check-docs.py python
echo "test-docs: 3 passed, 0 failed"
