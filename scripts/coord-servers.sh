#!/usr/bin/env bash
# Starts and stops a standalone ZooKeeper server and a single-member etcd cluster on
# loopback, for the safety lab's real-system checks.
#
#   scripts/coord-servers.sh start DIR    start both; state, data and logs under DIR
#   scripts/coord-servers.sh stop DIR     stop what `start DIR` started, remove DIR
#
# Ports (127.0.0.1 only): ZooKeeper client $ZK_PORT (7690), etcd client $ETCD_PORT
# (7695) and peer $ETCD_PEER_PORT (7696). Every wait is bounded; a server that does not
# answer in time is stopped again and the script fails.
#
# Settings chosen for one-second locks:
# - ZooKeeper: tickTime 100 ms, so session timeouts of 0.2-2 s are accepted (the server
#   clamps a requested timeout to [2, 20] ticks) and sessions expire in 100 ms buckets.
#   The admin HTTP server is off (it would take port 8080).
# - etcd: heartbeat 10 ms and election timeout 100 ms, so that a 1 s lease keeps its
#   TTL (etcd raises any TTL below 1.5 election timeouts; with the defaults a 1 s lease
#   would become 2 s).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

ZK_PORT=${ZK_PORT:-7690}
ETCD_PORT=${ETCD_PORT:-7695}
ETCD_PEER_PORT=${ETCD_PEER_PORT:-7696}
WAIT_SECONDS=${WAIT_SECONDS:-30}

zk_classpath() {
  local cp=/etc/zookeeper/conf jar
  for jar in /usr/share/java/zookeeper.jar /usr/share/java/zookeeper-jute.jar \
    /usr/share/java/slf4j-api.jar /usr/share/java/slf4j-simple.jar \
    /usr/share/java/log4j-1.2.jar /usr/share/java/slf4j-log4j12.jar \
    /usr/share/java/netty-all.jar /usr/share/java/commons-cli.jar \
    /usr/share/java/jline.jar /usr/share/java/snappy-java.jar \
    /usr/share/java/metrics-core.jar /usr/share/java/commons-io.jar \
    /usr/share/java/jackson-databind.jar /usr/share/java/jackson-core.jar \
    /usr/share/java/jackson-annotations.jar /usr/share/java/audience-annotations.jar; do
    [ -f "$jar" ] && cp="$cp:$jar"
  done
  echo "$cp"
}

# ruok over a plain TCP connection, answered by `imok` when the server serves.
zk_ok() {
  local answer
  answer=$({ exec 3<>"/dev/tcp/127.0.0.1/$ZK_PORT" && printf ruok >&3 && timeout 2 cat <&3; } 2>/dev/null) || return 1
  [ "$answer" = imok ]
}

etcd_ok() {
  ETCDCTL_API=3 timeout 5 etcdctl --endpoints "127.0.0.1:$ETCD_PORT" endpoint health >/dev/null 2>&1
}

wait_for() {
  local what=$1 check=$2 pidfile=$3 deadline=$((SECONDS + WAIT_SECONDS))
  until "$check"; do
    if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
      echo "error: $what exited during start-up" >&2
      return 1
    fi
    if [ $SECONDS -ge $deadline ]; then
      echo "error: $what did not answer within ${WAIT_SECONDS}s" >&2
      return 1
    fi
    sleep 0.2
  done
}

start() {
  local dir=$1
  need_apt java:default-jre-headless zooinspector:zookeeper etcd:etcd-server etcdctl:etcd-client
  mkdir -p "$dir/zk-data" "$dir/etcd-data"
  cat >"$dir/zoo.cfg" <<EOF
tickTime=100
dataDir=$dir/zk-data
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
minSessionTimeout=200
maxSessionTimeout=2000
admin.enableServer=false
4lw.commands.whitelist=ruok
EOF
  # setsid: each server in its own session, so that stop can end its whole group.
  setsid java -Xmx256m -Dzookeeper.log.dir="$dir" -cp "$(zk_classpath)" \
    org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zoo.cfg" \
    >"$dir/zookeeper.log" 2>&1 &
  echo $! >"$dir/zookeeper.pid"
  setsid etcd --name lab --data-dir "$dir/etcd-data" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "lab=http://127.0.0.1:$ETCD_PEER_PORT" \
    --heartbeat-interval 10 --election-timeout 100 \
    >"$dir/etcd.log" 2>&1 &
  echo $! >"$dir/etcd.pid"
  if ! wait_for ZooKeeper zk_ok "$dir/zookeeper.pid" || ! wait_for etcd etcd_ok "$dir/etcd.pid"; then
    tail -n 20 "$dir/zookeeper.log" "$dir/etcd.log" >&2 || true
    stop "$dir"
    return 1
  fi
  echo "coord-servers: ZooKeeper on 127.0.0.1:$ZK_PORT, etcd on 127.0.0.1:$ETCD_PORT" >&2
}

stop() {
  local dir=$1 name pid
  for name in zookeeper etcd; do
    [ -f "$dir/$name.pid" ] || continue
    pid=$(cat "$dir/$name.pid")
    kill -CONT -- "-$pid" 2>/dev/null || true
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
    rm -f "$dir/$name.pid"
  done
  rm -rf "$dir"
}

case "${1:-}" in
  start) start "${2:?usage: $0 start DIR}" ;;
  stop) stop "${2:?usage: $0 stop DIR}" ;;
  *)
    echo "usage: $0 start|stop DIR" >&2
    exit 2
    ;;
esac
