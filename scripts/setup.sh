#!/usr/bin/env bash
# Installs what the build and the tests need. Debian packages are installed with apt
# when running as root; otherwise a missing one is reported with the command to run.
# Tools that do not come from Debian go into $REDLOCK_CACHE (outside the clone).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

# Debian packages every part of the test suite uses.
need_apt redis-server:redis-server valgrind:valgrind

mkdir -p "$REDLOCK_CACHE"
echo "setup: ok (cache: $REDLOCK_CACHE)"
