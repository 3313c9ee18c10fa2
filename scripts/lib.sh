# Shared shell helpers for the project's scripts. Source it; do not run it.

: "${REDLOCK_CACHE:=$HOME/.cache/redlock}"
export REDLOCK_CACHE

die() {
  echo "error: $*" >&2
  exit 1
}

# need_apt COMMAND:PACKAGE ... -- makes sure each COMMAND exists, installing PACKAGE
# with apt when root. Without root, a missing command is an error naming the package.
need_apt() {
  local missing=() spec cmd pkg
  for spec in "$@"; do
    cmd=${spec%%:*}
    pkg=${spec#*:}
    command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    die "missing Debian packages: ${missing[*]} (install them with: sudo apt-get install -y ${missing[*]})"
  fi
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -q "${missing[@]}" >/dev/null; then
    apt-get update -q >/dev/null
    apt-get install -y -q "${missing[@]}" >/dev/null
  fi
  for spec in "$@"; do
    command -v "${spec%%:*}" >/dev/null 2>&1 || die "installing ${spec#*:} did not provide ${spec%%:*}"
  done
}

# In CI a missing prerequisite is a failure; elsewhere too, unless the developer
# explicitly opted out with REDLOCK_ALLOW_SKIP=1 (never set in CI).
require() {
  local what=$1
  shift
  if ! "$@" >/dev/null 2>&1; then
    if [ "${CI:-}" != "true" ] && [ "${REDLOCK_ALLOW_SKIP:-}" = "1" ]; then
      echo "SKIPPED (REDLOCK_ALLOW_SKIP=1): $what" >&2
      return 1
    fi
    die "prerequisite missing: $what"
  fi
}

# cargo_target_dir: prints the workspace's cargo target directory (CARGO_TARGET_DIR
# included), from the repository whatever the current directory.
cargo_target_dir() {
  (cd "$(dirname "${BASH_SOURCE[0]}")/.." && cargo metadata --format-version 1 --no-deps |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
}

# cli_binary: builds the redlock CLI for the bindings' interop tests and prints its path.
# The features are those `make test-rust` tests it with, so after that target this is
# cargo's no-op: one debug build serves every binding (a release build of its own was a
# full compile of the dependency tree, about 75 s on a fresh 2-core machine).
cli_binary() {
  local repo
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  (cd "$repo" && cargo build -q -p redlock-client --features cli,tracing,sentinel --bin redlock) || return 1
  echo "$(cargo_target_dir)/debug/redlock"
}
