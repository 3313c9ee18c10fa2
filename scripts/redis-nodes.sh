#!/usr/bin/env bash
# Starts, stops and breaks independent local Redis nodes on loopback, for the tests,
# the demo and every binding.
#
#   scripts/redis-nodes.sh start   [--nodes N] [--base-port P] [--aof] [--requirepass PASS] [--tls]
#   scripts/redis-nodes.sh stop    [--base-port P]
#   scripts/redis-nodes.sh urls    [--base-port P]
#   scripts/redis-nodes.sh pause   INDEX [--base-port P]
#   scripts/redis-nodes.sh resume  INDEX [--base-port P]
#   scripts/redis-nodes.sh kill    INDEX [--base-port P]
#   scripts/redis-nodes.sh restart INDEX [--base-port P]
#   scripts/redis-nodes.sh ca      [--base-port P]
#
# start   starts N nodes (default 5) on ports P..P+N-1 (default P = 7000) and prints one
#         URL per line once every node answers PING. A set already running on the same
#         base port is stopped first; any other process on one of the ports is an error.
#         No persistence unless --aof (appendonly, fsync always). --requirepass puts a
#         password on every node (and in the URLs); --tls serves TLS only, with a fresh
#         CA and certificate for 127.0.0.1 (URLs are rediss://, `ca` prints the CA file).
# stop    stops the set (idempotent) and returns once every port is free.
# urls    prints the running set's URLs, comma-separated, on one line.
# pause   SIGSTOP one node (0-based index); resume sends SIGCONT.
# kill    SIGKILL one node and waits until its port is free.
# restart kills the node if it still runs, then starts it again with the set's options:
#         empty, unless the set runs with --aof.
#
# Each node lives in ${REDLOCK_RUNTIME:-<repo>/.runtime}/redis-<P>/node-<i>/ (data,
# pidfile, logfile); the set's options are in redis-<P>/state.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
source "$repo/scripts/lib.sh"

runtime=${REDLOCK_RUNTIME:-$repo/.runtime}

usage() {
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# ---- helpers ----------------------------------------------------------------------

# True when something accepts TCP connections on 127.0.0.1:PORT (a stopped process
# still does: the kernel completes the handshake).
port_busy() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# wait_port_free PORT SECONDS
wait_port_free() {
  local port=$1 deadline=$((SECONDS + $2))
  while port_busy "$port"; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.05
  done
}

set_dir() { echo "$runtime/redis-$base_port"; }
node_dir() { echo "$(set_dir)/node-$1"; }
node_port() { echo $((base_port + $1)); }

load_state() {
  local state
  state="$(set_dir)/state"
  [ -f "$state" ] || die "no node set is running on base port $base_port (nothing in $(set_dir))"
  # shellcheck disable=SC1090
  source "$state"
}

# True while PID runs (a zombie left unreaped by a minimal init does not count).
pid_alive() {
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1 || true)
  [ -n "$state" ] && [ "$state" != Z ]
}

# The pid of node INDEX if it is a live redis-server, else nothing.
node_pid() {
  local pidfile pid
  pidfile="$(node_dir "$1")/redis.pid"
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile" 2>/dev/null || true)
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  # Only a live redis-server: never signal a pid the kernel gave to someone else.
  if pid_alive "$pid" && [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == redis-server* ]]; then
    echo "$pid"
  fi
}

node_url() {
  local scheme=redis auth=""
  [ "${TLS:-0}" = 1 ] && scheme=rediss
  [ -n "${PASSWORD:-}" ] && auth=":${PASSWORD}@"
  echo "$scheme://${auth}127.0.0.1:$(node_port "$1")"
}

cli() {
  local port=$1
  shift
  local args=(-h 127.0.0.1 -p "$port")
  [ "${TLS:-0}" = 1 ] && args+=(--tls --cacert "$(set_dir)/tls/ca.crt")
  [ -n "${PASSWORD:-}" ] && args+=(-a "$PASSWORD" --no-auth-warning)
  timeout 2 redis-cli "${args[@]}" "$@"
}

make_certificates() {
  need_apt openssl:openssl
  local dir
  dir="$(set_dir)/tls"
  mkdir -p "$dir"
  (
    cd "$dir"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 \
      -subj "/CN=redlock test CA" >/dev/null 2>&1
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr \
      -subj "/CN=127.0.0.1" >/dev/null 2>&1
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >san.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
      -out server.crt -days 2 -extfile san.ext >/dev/null 2>&1
  ) || die "openssl could not create the test certificates in $dir"
}

start_node() {
  local index=$1 dir port
  dir=$(node_dir "$index")
  port=$(node_port "$index")
  mkdir -p "$dir"
  rm -f "$dir/redis.pid"
  if port_busy "$port"; then
    die "port $port (node $index) is already in use by another process; stop it or choose another --base-port"
  fi
  local args=(--bind 127.0.0.1 --dir "$dir" --pidfile "$dir/redis.pid"
    --logfile "$dir/redis.log" --daemonize yes --save "")
  if [ "${TLS:-0}" = 1 ]; then
    local tls
    tls="$(set_dir)/tls"
    args+=(--port 0 --tls-port "$port" --tls-cert-file "$tls/server.crt"
      --tls-key-file "$tls/server.key" --tls-ca-cert-file "$tls/ca.crt" --tls-auth-clients no)
  else
    args+=(--port "$port")
  fi
  if [ "${AOF:-0}" = 1 ]; then
    args+=(--appendonly yes --appendfsync always)
  else
    args+=(--appendonly no)
  fi
  [ -n "${PASSWORD:-}" ] && args+=(--requirepass "$PASSWORD")
  redis-server "${args[@]}" >/dev/null ||
    die "redis-server failed to start node $index on port $port (see $dir/redis.log)"
}

# Waits until node INDEX answers PING, or fails loudly with its log.
wait_ready() {
  local index=$1 port deadline
  port=$(node_port "$index")
  deadline=$((SECONDS + 10))
  until [ "$(cli "$port" ping 2>/dev/null || true)" = PONG ]; do
    if [ $SECONDS -ge $deadline ]; then
      echo "error: node $index (port $port) did not answer PING within 10 s; its log:" >&2
      tail -n 20 "$(node_dir "$index")/redis.log" >&2 2>/dev/null || true
      exit 1
    fi
    sleep 0.02
  done
}

# Stops node INDEX however it is (running, paused, gone) and waits for its port.
stop_node() {
  local index=$1 pid port
  port=$(node_port "$index")
  pid=$(node_pid "$index")
  if [ -n "$pid" ]; then
    # A stopped process cannot handle SIGTERM until it runs again.
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 5))
    while pid_alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.02; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$(node_dir "$index")/redis.pid"
  if [ -n "$pid" ]; then
    wait_port_free "$port" 10 || die "port $port (node $index) is still busy after stopping it"
  fi
}

check_index() {
  [[ "$1" =~ ^[0-9]+$ ]] || die "INDEX must be a number, got '$1'"
  [ "$1" -lt "$NODES" ] || die "node index $1 is out of range: the set on base port $base_port has $NODES nodes (0..$((NODES - 1)))"
}

# ---- commands ---------------------------------------------------------------------

cmd_start() {
  need_apt redis-server:redis-server redis-cli:redis-tools
  [[ "$NODES" =~ ^[0-9]+$ ]] && [ "$NODES" -ge 1 ] && [ "$NODES" -le 100 ] ||
    die "--nodes must be a number from 1 to 100, got '$NODES'"
  [ $((base_port + NODES - 1)) -le 65535 ] || die "ports $base_port..$((base_port + NODES - 1)) do not fit below 65536"
  if [ -f "$(set_dir)/state" ]; then
    (cmd_stop)
  fi
  # Refuse before touching anything if another process holds one of the ports.
  local i
  for ((i = 0; i < NODES; i++)); do
    if port_busy "$(node_port "$i")"; then
      die "port $(node_port "$i") is already in use by another process; stop it or choose another --base-port"
    fi
  done
  rm -rf "$(set_dir)"
  mkdir -p "$(set_dir)"
  [ "$TLS" = 1 ] && make_certificates
  {
    echo "NODES=$NODES"
    echo "AOF=$AOF"
    echo "TLS=$TLS"
    printf 'PASSWORD=%q\n' "$PASSWORD"
  } >"$(set_dir)/state"
  for ((i = 0; i < NODES; i++)); do
    start_node "$i" || { (cmd_stop) || true; exit 1; }
  done
  for ((i = 0; i < NODES; i++)); do
    (wait_ready "$i") || { (cmd_stop) || true; exit 1; }
  done
  for ((i = 0; i < NODES; i++)); do
    node_url "$i"
  done
}

cmd_stop() {
  [ -f "$(set_dir)/state" ] || return 0
  load_state
  local i
  for ((i = 0; i < NODES; i++)); do
    stop_node "$i"
  done
  rm -f "$(set_dir)/state"
}

cmd_urls() {
  load_state
  local i urls=()
  for ((i = 0; i < NODES; i++)); do
    urls+=("$(node_url "$i")")
  done
  (IFS=,; echo "${urls[*]}")
}

signal_node() {
  local signal=$1 index=$2 pid
  load_state
  check_index "$index"
  pid=$(node_pid "$index")
  [ -n "$pid" ] || die "node $index (port $(node_port "$index")) is not running"
  kill "-$signal" "$pid"
}

cmd_kill() {
  local index=$1 pid
  load_state
  check_index "$index"
  pid=$(node_pid "$index")
  [ -n "$pid" ] || die "node $index (port $(node_port "$index")) is not running"
  kill -KILL "$pid"
  while pid_alive "$pid"; do sleep 0.01; done
  rm -f "$(node_dir "$index")/redis.pid"
  wait_port_free "$(node_port "$index")" 10 ||
    die "port $(node_port "$index") is still busy after killing node $index"
}

cmd_restart() {
  local index=$1
  load_state
  check_index "$index"
  if [ -n "$(node_pid "$index")" ]; then
    cmd_kill "$index"
  fi
  start_node "$index"
  wait_ready "$index"
}

cmd_ca() {
  load_state
  [ "$TLS" = 1 ] || die "the set on base port $base_port does not use TLS"
  echo "$(set_dir)/tls/ca.crt"
}

# ---- arguments --------------------------------------------------------------------

[ $# -ge 1 ] || usage
command=$1
shift
index=""
case "$command" in
  pause | resume | kill | restart)
    [ $# -ge 1 ] || die "$command needs a node INDEX (0-based)"
    index=$1
    shift
    ;;
  start | stop | urls | ca) ;;
  -h | --help | help) usage ;;
  *) die "unknown command '$command' (start, stop, urls, pause, resume, kill, restart, ca)" ;;
esac

NODES=5
AOF=0
TLS=0
PASSWORD=""
base_port=7000
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes)
      [ "$command" = start ] || die "--nodes only applies to start"
      NODES=${2:?--nodes needs a value}
      shift 2
      ;;
    --base-port)
      base_port=${2:?--base-port needs a value}
      shift 2
      ;;
    --aof)
      [ "$command" = start ] || die "--aof only applies to start"
      AOF=1
      shift
      ;;
    --requirepass)
      [ "$command" = start ] || die "--requirepass only applies to start"
      PASSWORD=${2:?--requirepass needs a value}
      [[ "$PASSWORD" =~ ^[A-Za-z0-9._~-]+$ ]] ||
        die "--requirepass takes letters, digits and ._~- only (it goes into URLs unescaped)"
      shift 2
      ;;
    --tls)
      [ "$command" = start ] || die "--tls only applies to start"
      TLS=1
      shift
      ;;
    *) die "unknown option '$1'" ;;
  esac
done
[[ "$base_port" =~ ^[0-9]+$ ]] && [ "$base_port" -ge 1024 ] && [ "$base_port" -le 65535 ] ||
  die "--base-port must be a port number from 1024 to 65535, got '$base_port'"

case "$command" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  urls) cmd_urls ;;
  pause) signal_node STOP "$index" ;;
  resume) signal_node CONT "$index" ;;
  kill) cmd_kill "$index" ;;
  restart) cmd_restart "$index" ;;
  ca) cmd_ca ;;
esac
