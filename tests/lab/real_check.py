"""The safety lab's predictions, checked against real systems on loopback.

For one scenario (``pause-after-acquire``: the first holder stops right after it learns
it holds the lock, until a second client holds it and has written) this plays the same
event sequence with real processes and a real lock service, and compares what the
resource saw with what ``redlock-sim --resource`` predicts for seed 0:

- ``redlock``: five ``redis-server`` nodes, the project's Python package (the core
  through ctypes) with a 1 s TTL;
- ``zookeeper`` / ``zookeeper-fenced``: a ZooKeeper server and kazoo's ``Lock`` recipe
  with a 1 s session timeout, the lock node's ``czxid`` as the fencing token;
- ``etcd`` / ``etcd-fenced``: an etcd member and ``etcdctl lock --ttl 1`` (clientv3's
  ``concurrency.Mutex``), ``ETCD_LOCK_REV`` as the fencing token.

Each client is its own process; the holder is stopped with SIGSTOP (its lock service
client threads and, for etcd, the ``etcdctl`` process holding the session stop with
it) and continued with SIGCONT. Clients follow the simulation's client: write once
right after acquiring, then every 100 ms, checking before each later write that the
lock is still held (by the system's own means) and stopping when it is not. The
resource is a small server in this process that, for the fenced strategies, rejects a
token lower than the highest it accepted.

Usage: ``real_check.py check --sim PATH STRATEGY...`` (the servers must be running:
see ``tests/lab/run.sh``); ``real_check.py client ...`` is what the clients run.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

SCENARIO = "pause-after-acquire"
TTL = 1.0
INTERVAL = 0.1
ZK_HOSTS = "127.0.0.1:" + os.environ.get("ZK_PORT", "7690")
ETCD_ENDPOINT = "127.0.0.1:" + os.environ.get("ETCD_PORT", "7695")
# Writes per client in the scenario (Cycle::standard(3), (5), (3) in scenario.rs).
WRITES = {"C1": 3, "C2": 5, "C3": 3}
# Longest a whole scenario may take before it counts as hung.
SCENARIO_TIMEOUT = 30.0


# ---- the clients --------------------------------------------------------------------


class Channel:
    """The client's line-based connection to the harness's resource server."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.file = self.sock.makefile("rw", buffering=1)

    def ask(self, line: str) -> str:
        self.file.write(line + "\n")
        self.file.flush()
        return self.file.readline().strip()


def run_client(args: argparse.Namespace) -> int:
    channel = Channel(args.socket)
    system = args.system
    token = None
    if system == "redis":
        import redis
        from redlock_core import LockLostError, Redlock

        ports = [int(p) for p in args.redis_ports.split(",")]
        redlock = Redlock(
            [redis.Redis(port=p, socket_timeout=0.2) for p in ports],
            ttl=TTL,
            attempts=1,
        )
        channel.ask(f"READY {args.name}")
        deadline = time.monotonic() + 10
        while True:
            try:
                lock = redlock.acquire("resource")
                break
            except (
                Exception
            ):  # held elsewhere or nodes failing: try again, as the sim's client does
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

        def still_held() -> bool:
            try:
                lock.check()
                return True
            except LockLostError:
                return False

        def release() -> None:
            try:
                lock.release()
            except Exception as error:  # the lock may be long gone; say so and go on
                print(f"{args.name}: release: {error}", file=sys.stderr)

    elif system == "zookeeper":
        from kazoo.client import KazooClient, KazooState
        from kazoo.exceptions import KazooException

        client = KazooClient(hosts=ZK_HOSTS, timeout=TTL)
        channel.ask(f"READY {args.name}")
        client.start(timeout=10)
        lock = client.Lock("/lab/lock", args.name)
        if not lock.acquire(timeout=10):
            return 3
        node = f"{lock.path}/{lock.node}"
        stat = client.exists(node)
        token = stat.czxid if stat is not None else None

        def still_held() -> bool:
            # The recipe's advice: SUSPENDED or LOST means the lock may be gone; a call
            # that fails, or our node missing, too.
            if client.state != KazooState.CONNECTED:
                return False
            try:
                return client.exists(node) is not None
            except KazooException:
                return False

        def release() -> None:
            try:
                lock.release()
            except KazooException as error:
                print(f"{args.name}: release: {error}", file=sys.stderr)
            client.stop()
            client.close()

    elif system == "etcd":
        key = os.environ["ETCD_LOCK_KEY"]
        token = int(os.environ["ETCD_LOCK_REV"])

        def still_held() -> bool:
            found = subprocess.run(
                ["etcdctl", "--endpoints", ETCD_ENDPOINT, "get", key, "--keys-only"],
                check=False,
                capture_output=True,
                text=True,
                timeout=5,
                env={**os.environ, "ETCDCTL_API": "3"},
            )
            return found.returncode == 0 and key in found.stdout

        def release() -> None:
            pass  # etcdctl unlocks when this child exits

    else:
        raise SystemExit(f"unknown system {system}")

    sent_token = token if args.fenced else None
    channel.ask(f"ACQUIRED {args.name} {os.getpid()} {os.getppid()} {sent_token or '-'}")
    if args.pause:
        if system == "etcd":
            # The session lives in the parent etcdctl: it stops with us.
            os.kill(os.getppid(), signal.SIGSTOP)
        os.kill(os.getpid(), signal.SIGSTOP)
    for index in range(args.writes):
        if index > 0:
            time.sleep(INTERVAL)
            if not still_held():
                channel.ask(f"STOPPED {args.name} lock lost before write {index + 1}")
                break
        channel.ask(f"WRITE {args.name} {sent_token or '-'}")
    release()
    channel.ask(f"DONE {args.name}")
    return 0


# ---- the harness: resource server and orchestration ---------------------------------


@dataclass
class Observed:
    """What the resource saw, and the order in which clients learned they held the lock."""

    writes: list[tuple[str, bool, int | None]] = field(default_factory=list)
    granted: list[str] = field(default_factory=list)
    granted_at: dict[str, float] = field(default_factory=dict)
    pids: dict[str, tuple[int, int]] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)
    ready: set[str] = field(default_factory=set)
    go: dict[str, threading.Event] = field(
        default_factory=lambda: {name: threading.Event() for name in WRITES}
    )
    highest: int | None = None
    fenced: bool = False
    changed: threading.Condition = field(default_factory=threading.Condition)

    def handle(self, line: str) -> str:
        words = line.split()
        if words[0] == "READY":
            # The client has started (imports, connections); it begins when told to, so
            # that a slow interpreter start does not count as lock time.
            with self.changed:
                self.ready.add(words[1])
                self.changed.notify_all()
            if not self.go[words[1]].wait(SCENARIO_TIMEOUT):
                return "timeout"
            return "go"
        with self.changed:
            try:
                if words[0] == "ACQUIRED":
                    self.granted.append(words[1])
                    self.granted_at[words[1]] = time.monotonic()
                    self.pids[words[1]] = (int(words[2]), int(words[3]))
                    return "ok"
                if words[0] == "WRITE":
                    token = None if words[2] == "-" else int(words[2])
                    accepted = True
                    if self.fenced and token is not None and self.highest is not None:
                        accepted = token >= self.highest
                    if accepted and token is not None:
                        self.highest = token if self.highest is None else max(self.highest, token)
                    self.writes.append((words[1], accepted, token))
                    return "accepted" if accepted else "rejected"
                if words[0] == "DONE":
                    self.done.add(words[1])
                return "ok"
            finally:
                self.changed.notify_all()

    def wait(self, predicate, what: str, timeout: float = SCENARIO_TIMEOUT) -> None:
        with self.changed:
            if not self.changed.wait_for(predicate, timeout=timeout):
                raise TimeoutError(f"timed out waiting for {what}")

    def stale_write(self) -> bool:
        """The simulation's check: an accepted write from a holder granted before one
        that has already written."""
        order = {name: index for index, name in enumerate(self.granted)}
        newest = None
        for name, accepted, _ in self.writes:
            if not accepted:
                continue
            if newest is not None and order[name] < order[newest]:
                return True
            if newest is None or order[name] > order[newest]:
                newest = name
        return False


def serve(path: str, observed: Observed) -> socketserver.BaseServer:
    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            for raw in self.rfile:
                line = raw.decode().strip()
                if line:
                    self.wfile.write((observed.handle(line) + "\n").encode())

    server = socketserver.ThreadingUnixStreamServer(path, Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def client_command(strategy: str, name: str, sock: str, redis_ports: str, pause: bool) -> list[str]:
    system = strategy.removesuffix("-fenced")
    system = "redis" if system == "redlock" else system
    own = [
        sys.executable,
        os.path.abspath(__file__),
        "client",
        "--system",
        system,
        "--name",
        name,
        "--socket",
        sock,
        "--writes",
        str(WRITES[name]),
        "--redis-ports",
        redis_ports,
    ]
    if strategy.endswith("-fenced"):
        own.append("--fenced")
    if pause:
        own.append("--pause")
    if system == "etcd":
        return [
            "etcdctl",
            "--endpoints",
            ETCD_ENDPOINT,
            "lock",
            "--ttl",
            "1",
            "/lab/lock",
            "--",
            *own,
        ]
    return own


def play(strategy: str, redis_ports: str, workdir: str) -> Observed:
    """Plays the scenario once with real processes; returns what the resource saw."""
    observed = Observed(fenced=strategy.endswith("-fenced"))
    sock = os.path.join(workdir, f"resource-{strategy}.sock")
    server = serve(sock, observed)
    env = {**os.environ, "ETCDCTL_API": "3"}
    processes: list[subprocess.Popen] = []
    logs = []

    def spawn(name: str) -> None:
        command = client_command(strategy, name, sock, redis_ports, name == "C1")
        log = open(os.path.join(workdir, f"{strategy}-{name}.log"), "w")
        logs.append(log)
        processes.append(subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT))

    # Redis and ZooKeeper clients start first and wait to be told to begin; an etcd
    # client is the child `etcdctl lock` starts once it holds the lock, so etcdctl (a
    # quick Go binary) is started when the client is to begin.
    gated = not strategy.startswith("etcd")

    def start(name: str) -> None:
        if gated:
            observed.go[name].set()
        else:
            spawn(name)

    try:
        if gated:
            for name in WRITES:
                spawn(name)
            observed.wait(lambda: observed.ready == set(WRITES), "the clients to start")
        start("C1")
        observed.wait(lambda: "C1" in observed.pids, "C1 to acquire")
        time.sleep(0.05)
        start("C2")
        observed.wait(lambda: any(w[0] == "C2" for w in observed.writes), "C2 to acquire and write")
        time.sleep(0.02)
        pid, parent = observed.pids["C1"]
        if strategy.startswith("etcd"):
            os.kill(parent, signal.SIGCONT)
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.03)
        start("C3")
        observed.wait(lambda: {"C1", "C2", "C3"} <= observed.done, "every client to finish")
        for process in processes:
            process.wait(timeout=10)
    finally:
        for process in processes:
            if process.poll() is None:
                try:
                    os.kill(process.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                process.kill()
                process.wait(timeout=10)
        for event in observed.go.values():
            event.set()
        for pid, parent in observed.pids.values():
            for target in (pid, parent):
                try:
                    os.kill(target, signal.SIGCONT)
                except (ProcessLookupError, PermissionError):
                    pass
        for log in logs:
            log.close()
        server.shutdown()
        server.server_close()
        os.unlink(sock)
    return observed


# How long after the first holder acquired the second one may get the lock: after the
# TTL, plus what the service adds before it acts on the expiry (ZooKeeper's 100 ms
# expiry buckets, etcd's 500 ms revoke loop, the Redis client's 50 ms retry pause),
# plus room for a loaded machine. The simulation models exactly these delays.
HANDOVER_SLACK = {"redlock": 0.05, "zookeeper": 0.1, "etcd": 0.5}


def predicted(sim: str, strategy: str) -> tuple[dict[str, tuple[int, int]], bool, float]:
    """Per client (accepted, rejected) writes, whether a stale write happened, and the
    hand-over time from the first holder to the second, as the simulation predicts them
    for seed 0."""
    out = subprocess.run(
        [sim, "--resource", SCENARIO, strategy, "0"], check=True, capture_output=True, text=True
    ).stdout
    counts: dict[str, tuple[int, int]] = {}
    stale = None
    granted: dict[str, float] = {}
    for line in out.splitlines():
        words = line.split()
        if words[0] == "granted":
            granted.setdefault(words[1], int(words[2]) / 1e6)
        elif words[0] == "write":
            accepted, rejected = counts.get(words[1], (0, 0))
            if words[2] == "accepted":
                accepted += 1
            else:
                rejected += 1
            counts[words[1]] = (accepted, rejected)
        elif words[:2] == ["check", "stale-write"]:
            stale = words[2] == "violated"
    if stale is None or not {"C1", "C2"} <= granted.keys():
        raise SystemExit(f"redlock-sim printed no stale-write check or grants:\n{out}")
    return counts, stale, granted["C2"] - granted["C1"]


def summarise(observed: Observed) -> dict[str, tuple[int, int]]:
    counts: dict[str, tuple[int, int]] = {}
    for name, accepted, _ in observed.writes:
        a, r = counts.get(name, (0, 0))
        counts[name] = (a + 1, r) if accepted else (a, r + 1)
    return counts


def check(args: argparse.Namespace) -> int:
    failures = 0
    os.makedirs(args.workdir, exist_ok=True)
    for strategy in args.strategies:
        want_counts, want_stale, want_handover = predicted(args.sim, strategy)
        started = time.monotonic()
        observed = play(strategy, args.redis_ports, args.workdir)
        got_counts, got_stale = summarise(observed), observed.stale_write()
        handover = observed.granted_at["C2"] - observed.granted_at["C1"]
        slack = HANDOVER_SLACK[strategy.removesuffix("-fenced")]
        in_time = TTL * 0.95 <= handover <= TTL + slack + 0.3
        took = time.monotonic() - started
        same = got_counts == want_counts and got_stale == want_stale and in_time
        print(
            f"{SCENARIO} / {strategy}: {'agrees' if same else 'DISAGREES'} ({took:.1f} s)\n"
            f"  lab:     writes {sorted(want_counts.items())}, stale write {want_stale}, "
            f"second holder after {want_handover:.3f} s\n"
            f"  reality: writes {sorted(got_counts.items())}, stale write {got_stale}, "
            f"second holder after {handover:.3f} s "
            f"(allowed {TTL * 0.95:.2f}..{TTL + slack + 0.3:.2f})\n"
            f"  reality, in order: {observed.writes}"
        )
        failures += not same
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check")
    c.add_argument("--sim", required=True, help="the redlock-sim binary")
    c.add_argument("--redis-ports", default="7600,7601,7602,7603,7604")
    c.add_argument("--workdir", required=True)
    c.add_argument("strategies", nargs="+")
    k = sub.add_parser("client")
    k.add_argument("--system", required=True)
    k.add_argument("--name", required=True)
    k.add_argument("--socket", required=True)
    k.add_argument("--writes", type=int, required=True)
    k.add_argument("--redis-ports", default="")
    k.add_argument("--fenced", action="store_true")
    k.add_argument("--pause", action="store_true")
    args = parser.parse_args()
    if args.command == "check":
        return check(args)
    return run_client(args)


if __name__ == "__main__":
    sys.exit(main())
