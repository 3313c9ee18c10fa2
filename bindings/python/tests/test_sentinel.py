"""Single-instance mode through Redis Sentinel (``Redlock.from_sentinel``,
``AsyncRedlock.from_sentinel``), on real processes: a master (base port 7350) and its
replica (7352) from scripts/redis-nodes.sh, and a ``redis-server --sentinel`` on 7355
started here from a generated configuration. Port 7356 never listens (a Sentinel that
cannot be reached); 7360-7363 are hanging Sentinels: sockets of this test that listen
(the kernel completes the handshake) and never answer; 7364 is a Sentinel of this test
slow to connect and then slow to answer. A master of its own on 7365 and a Sentinel with
a password (``requirepass``) on 7366."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from redlock_core import AsyncRedlock, LockHeldError, NodesFailedError, Redlock
from redlock_core._handle import (
    connect_timeout_default_ms,
    sentinel_connect_timeout_ms,
    sentinel_query_timeout_default_ms,
)

from .conftest import REPO, Nodes

SENTINEL_PORT = 7355
CLOSED_SENTINEL = "127.0.0.1:7356"
SERVICE = "mymaster"
HANGING_PORTS = (7360, 7361, 7362, 7363)
SLOW_PORT = 7364


def _master_port(port: int = SENTINEL_PORT) -> int | None:
    """The master's port the Sentinel names for the service (None: none yet)."""
    try:
        with redis.Redis(port=port, socket_timeout=1, decode_responses=True) as client:
            address = client.execute_command("SENTINEL", "get-master-addr-by-name", SERVICE)
    except redis.RedisError:
        return None
    return int(address[1]) if address else None


def _eventually(check: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def _start_sentinel(port: int, master_port: int, extra: str) -> subprocess.Popen[bytes]:
    """A ``redis-server --sentinel`` on ``port`` watching ``master_port`` as SERVICE,
    with ``extra`` lines of configuration."""
    directory = REPO / ".runtime" / f"sentinel-{port}"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    conf = directory / "sentinel.conf"
    conf.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {directory}\n"
        f"sentinel monitor {SERVICE} 127.0.0.1 {master_port} 1\n{extra}"
    )
    return subprocess.Popen(
        ["redis-server", str(conf), "--sentinel"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


class Cluster:
    """The master, its replica and the Sentinel watching them."""

    def __init__(self) -> None:
        self.master = Nodes(7350, 1)
        self.replica = Nodes(7352, 1)
        self.sentinel: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.master.start()
        self.replica.start()
        with redis.Redis(port=self.replica.ports[0], socket_timeout=2) as replica:
            replica.replicaof("127.0.0.1", self.master.ports[0])
        # The replica is known to the master before the Sentinel's first look, so the
        # Sentinel finds it at once (a failover needs one).
        assert _eventually(lambda: self._replicas(self.master.ports[0]) == 1, 10)
        self.sentinel = _start_sentinel(
            SENTINEL_PORT,
            self.master.ports[0],
            f"sentinel down-after-milliseconds {SERVICE} 2000\n"
            f"sentinel failover-timeout {SERVICE} 10000\n",
        )
        named = _eventually(lambda: _master_port() == self.master.ports[0], 10)
        assert named, f"the Sentinel on {SENTINEL_PORT} did not name the master"

    def stop(self) -> None:
        if self.sentinel is not None:
            self.sentinel.kill()
            self.sentinel.wait()
        self.replica.stop()
        self.master.stop()

    @staticmethod
    def _replicas(port: int) -> int:
        with redis.Redis(port=port, socket_timeout=2) as client:
            return int(client.info("replication").get("connected_slaves", 0))

    def value(self, port: int, key: str) -> bytes | None:
        with redis.Redis(port=port, socket_timeout=2) as client:
            return client.get(key)  # type: ignore[return-value]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is needed (scripts/setup.sh installs it)")
    cluster = Cluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def test_locks_on_the_master_the_sentinel_names(cluster: Cluster, resource: str) -> None:
    master = cluster.master.ports[0]
    sentinels = [f"redis://127.0.0.1:{SENTINEL_PORT}"]
    with Redlock.from_sentinel(sentinels, SERVICE, attempts=1, node_timeout=0.3) as redlock:
        assert redlock.nodes == ("sentinel master mymaster",)
        assert redlock.quorum == 1
        lock = redlock.acquire(resource, ttl=10)
        # Written on the master the Sentinel named (and replicated, not locked there).
        assert cluster.value(master, resource) == lock.token.encode()
        assert redlock.locked(resource)
        with Redlock.from_sentinel(f"127.0.0.1:{SENTINEL_PORT}", SERVICE, attempts=1) as other:
            with pytest.raises(LockHeldError):
                other.acquire(resource)
        assert lock.release().released == 1
        assert cluster.value(master, resource) is None


def test_an_unknown_service_or_no_sentinel_is_a_node_failure(cluster: Cluster) -> None:
    unknown = Redlock.from_sentinel(
        [("127.0.0.1", SENTINEL_PORT)], "nosuchmaster", attempts=1, node_timeout=0.3
    )
    with unknown, pytest.raises(NodesFailedError) as caught:
        unknown.acquire("sentinel:unknown")
    assert caught.value.nodes[0].label == "sentinel master nosuchmaster"
    error = str(caught.value.nodes[0].error)
    assert "no Sentinel named a master for 'nosuchmaster'" in error, error
    assert f"Sentinel 127.0.0.1:{SENTINEL_PORT} does not know the service" in error, error

    nowhere = Redlock.from_sentinel(
        CLOSED_SENTINEL, SERVICE, attempts=1, node_timeout=0.3, sentinel_timeout=0.2
    )
    with nowhere, pytest.raises(NodesFailedError) as caught:
        nowhere.acquire("sentinel:nowhere")
    error = str(caught.value.nodes[0].error)
    assert f"Sentinel {CLOSED_SENTINEL} did not answer" in error, error
    assert "(refused)" in str(caught.value)  # the node's cause


@pytest.fixture(scope="module")
def hanging() -> Iterator[list[str]]:
    """Sentinels that take connections and never answer (``host:port`` each)."""
    sockets = []
    try:
        for port in HANGING_PORTS:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", port))
            listener.listen(64)  # never accepted: connections wait in the backlog
            sockets.append(listener)
        yield [f"127.0.0.1:{port}" for port in HANGING_PORTS]
    finally:
        for listener in sockets:
            listener.close()


def _link_connect_timeout_ms(redlock: Redlock | AsyncRedlock) -> int:
    return int(redlock._engine.nodes[0].link.connect_timeout_ms)


def _lock_through(
    driver: str,
    cluster: Cluster,
    sentinels: list[str],
    resource: str,
    link_timeout_ms: int,
    **settings: Any,
) -> float:
    """Takes and releases `resource` once through `sentinels` with the `driver`
    ("sync" or "asyncio"), one attempt and a node timeout longer than the lookup (the
    first connection takes the lock or nothing does); checks the link's connect timeout
    and that the key is on the master; returns how long the acquisition took."""
    master = cluster.master.ports[0]
    settings = dict(attempts=1, node_timeout=5, ttl=30, **settings)
    started = time.monotonic()
    if driver == "sync":
        with Redlock.from_sentinel(sentinels, SERVICE, **settings) as redlock:
            assert _link_connect_timeout_ms(redlock) == link_timeout_ms
            lock = redlock.acquire(resource, ttl=30)
            elapsed = time.monotonic() - started
            assert cluster.value(master, resource) == lock.token.encode()
            lock.release()
        return elapsed

    async def main() -> float:
        async with AsyncRedlock.from_sentinel(sentinels, SERVICE, **settings) as redlock:
            assert _link_connect_timeout_ms(redlock) == link_timeout_ms
            lock = await redlock.acquire(resource, ttl=30)
            took = time.monotonic() - started
            assert cluster.value(master, resource) == lock.token.encode()
            await lock.release()
        return took

    return asyncio.run(main())


@pytest.mark.parametrize("driver", ["sync", "asyncio"])
def test_a_hanging_sentinel_is_skipped_at_the_cores_bound(
    cluster: Cluster, hanging: list[str], resource: str, driver: str
) -> None:
    """[a hanging Sentinel, the working one]: the first is given the core's default
    bound (500 ms), then skipped, and the lock is taken well within 2 s."""
    sentinels = [hanging[0], f"127.0.0.1:{SENTINEL_PORT}"]
    query_ms = sentinel_query_timeout_default_ms()
    composed = sentinel_connect_timeout_ms(2, query_ms, connect_timeout_default_ms())
    assert composed == 3000
    elapsed = _lock_through(driver, cluster, sentinels, resource, composed)
    # The hanging Sentinel was waited for (its whole bound), and no longer.
    assert query_ms / 1000 - 0.05 <= elapsed < 2.0, elapsed


@pytest.mark.parametrize("driver", ["sync", "asyncio"])
def test_every_sentinel_is_asked_within_the_links_connect_timeout(
    cluster: Cluster, hanging: list[str], resource: str, driver: str
) -> None:
    """Four hanging Sentinels of 600 ms each before the working one: 2.4 s, past the
    core's 2 s connect timeout of a plain node. The link's connect timeout is the core's
    composition for the five Sentinels (5 x 600 + 2000 ms), so the last one is still
    asked and the lock taken on the first connection."""
    sentinels = [*hanging, f"127.0.0.1:{SENTINEL_PORT}"]
    expected = sentinel_connect_timeout_ms(5, 600, connect_timeout_default_ms())
    assert expected == 5000
    elapsed = _lock_through(driver, cluster, sentinels, resource, expected, sentinel_timeout=0.6)
    assert 2.35 <= elapsed < 4.0, elapsed


class SlowSentinel:
    """A Sentinel on ``SLOW_PORT`` that takes about ``connect_delay`` seconds to let a
    connection in and then ``answer_delay`` more to answer the master query, naming a
    master that does not exist (the closed port): a client that waited for it fails.

    The slow connect: a listener with a backlog of 0 and one connection of its own
    queued, so the kernel drops the client's SYN until the filler is accepted; the
    client's SYN is sent again after its initial retransmission timeout (1 s), and then
    goes through. Other commands (redis-py's HELLO and CLIENT SETINFO) are answered at
    once."""

    def __init__(self, answer_delay: float) -> None:
        self.answer_delay = answer_delay
        self.connect_took: float | None = None
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", SLOW_PORT))
        self.listener.listen(0)
        self.filler = socket.create_connection(("127.0.0.1", SLOW_PORT))
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        time.sleep(0.3)
        filler, _ = self.listener.accept()
        filler.close()
        try:
            connection, _ = self.listener.accept()
        except OSError:  # closed by the test
            return
        self.connect_took = time.monotonic() - self.started
        with connection:
            buffer = b""
            while True:
                try:
                    data = connection.recv(4096)
                except OSError:
                    return
                if not data:
                    return
                buffer += data
                while True:
                    command, buffer = _take_command(buffer)
                    if command is None:
                        break
                    name = command[0].upper() if command else b""
                    if name == b"SENTINEL":
                        time.sleep(self.answer_delay)
                        reply = b"*2\r\n$9\r\n127.0.0.1\r\n$4\r\n7356\r\n"
                    elif name == b"HELLO":  # redis-py 8 speaks RESP3 by default
                        reply = b"%1\r\n$5\r\nproto\r\n:" + command[1] + b"\r\n"
                    else:
                        reply = b"+OK\r\n"
                    try:
                        connection.sendall(reply)
                    except OSError:
                        return

    def close(self) -> None:
        self.filler.close()
        self.listener.close()
        self.thread.join(timeout=5)


def _take_command(buffer: bytes) -> tuple[list[bytes] | None, bytes]:
    """One RESP array of bulk strings from the front of `buffer`, and the rest."""
    try:
        head, rest = buffer.split(b"\r\n", 1)
        items = []
        for _ in range(int(head[1:])):
            length_line, rest = rest.split(b"\r\n", 1)
            length = int(length_line[1:])
            if len(rest) < length + 2:
                return None, buffer
            items.append(rest[:length])
            rest = rest[length + 2 :]
        return items, rest
    except ValueError:
        return None, buffer


@pytest.mark.parametrize("driver", ["sync", "asyncio"])
def test_a_sentinel_slow_to_connect_and_then_to_answer_gets_one_bound_in_all(
    cluster: Cluster, resource: str, driver: str
) -> None:
    """[the slow Sentinel, the working one], 1.5 s each: the slow one connects after
    about 1 s and would answer 1 s later, each within the bound but not both. It is
    given up at 1.5 s in all and the working one names the master. Giving the connect
    and the answer each the whole bound, as redis-py does, took its answer after 2 s
    and failed the node on the master it named (the closed port)."""
    slow = SlowSentinel(answer_delay=1.0)
    try:
        sentinels = [f"127.0.0.1:{SLOW_PORT}", f"127.0.0.1:{SENTINEL_PORT}"]
        composed = sentinel_connect_timeout_ms(2, 1500, connect_timeout_default_ms())
        elapsed = _lock_through(
            driver, cluster, sentinels, resource, composed, sentinel_timeout=1.5
        )
    finally:
        slow.close()
    # The slow connect happened (else this tests nothing), and the bound held.
    assert slow.connect_took is not None and slow.connect_took >= 0.8, slow.connect_took
    assert 1.45 <= elapsed < 1.95, elapsed


def test_bad_sentinel_addresses_are_refused() -> None:
    for bad in ("", "127.0.0.1", "redis://:26379", [("127.0.0.1", "x")]):
        with pytest.raises(ValueError, match="Sentinel"):
            Redlock.from_sentinel(bad, SERVICE)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Sentinel"):
        Redlock.from_sentinel([26379], SERVICE)  # type: ignore[list-item]
    with pytest.raises(TypeError, match="service"):
        Redlock.from_sentinel("127.0.0.1:26379", "")


def test_asyncio(cluster: Cluster, resource: str) -> None:
    master = cluster.master.ports[0]
    sentinels = f"127.0.0.1:{SENTINEL_PORT}"

    async def main() -> None:
        async with AsyncRedlock.from_sentinel(sentinels, SERVICE, attempts=1) as redlock:
            async with redlock.lock(resource, ttl=10) as lock:
                assert cluster.value(master, resource) == lock.token.encode()
                async with AsyncRedlock.from_sentinel(sentinels, SERVICE, attempts=1) as other:
                    with pytest.raises(LockHeldError):
                        await other.acquire(resource)
            assert cluster.value(master, resource) is None
        async with AsyncRedlock.from_sentinel(sentinels, "nosuchmaster", attempts=1) as unknown:
            with pytest.raises(NodesFailedError):
                await unknown.acquire(resource)

    asyncio.run(main())


def test_the_readme_sample(cluster: Cluster) -> None:
    sentinels = f"127.0.0.1:{SENTINEL_PORT}"
    tokens = []
    with Redlock.from_sentinel(sentinels, "mymaster", fencing=True) as redlock:
        with redlock.lock("orders:42") as lock:
            tokens.append(lock.fencing_token)  # send it with every write
    assert isinstance(tokens[0], int)
    assert cluster.value(cluster.master.ports[0], "orders:42") is None


def test_a_failover_is_followed_at_the_next_connection(cluster: Cluster, resource: str) -> None:
    """The last test here: the replica becomes the master."""
    old, new = cluster.master.ports[0], cluster.replica.ports[0]
    sentinels = f"127.0.0.1:{SENTINEL_PORT}"
    with Redlock.from_sentinel(sentinels, SERVICE, attempts=3, retry_delay=0.2) as redlock:
        before = redlock.acquire(f"{resource}:before", ttl=10)
        assert cluster.value(old, f"{resource}:before") == before.token.encode()
        with redis.Redis(port=SENTINEL_PORT, socket_timeout=2) as sentinel:
            # The Sentinel may not have judged the replica fit to promote yet (it learns
            # about replicas from the master's INFO, every few seconds): ask again.
            deadline = time.monotonic() + 20
            while True:
                try:
                    sentinel.execute_command("SENTINEL", "FAILOVER", SERVICE)
                    break
                except redis.exceptions.ResponseError as error:
                    if "NOGOODSLAVE" not in str(error) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        assert _eventually(lambda: _master_port() == new, 20), "no failover"
        # A new connection asks the Sentinel, and reaches the new master.
        with Redlock.from_sentinel(sentinels, SERVICE, attempts=1) as fresh:
            lock = fresh.acquire(f"{resource}:fresh", ttl=10)
            assert cluster.value(new, f"{resource}:fresh") == lock.token.encode()
            lock.release()
        # The first Redlock's connection to the old master is closed (as the Sentinel
        # does when it turns the old master into a replica): its link reconnects,
        # asks the Sentinel again, and reaches the new master too.
        with redis.Redis(port=old, socket_timeout=2) as old_master:
            old_master.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        lock = redlock.acquire(f"{resource}:after", ttl=10)
        assert cluster.value(new, f"{resource}:after") == lock.token.encode()
        assert cluster.value(old, f"{resource}:after") is None
        lock.release()


def test_a_sentinel_with_a_password_gets_it_from_its_url(resource: str) -> None:
    master = Nodes(7365, 1)
    master.start()
    sentinel = _start_sentinel(7366, master.ports[0], "requirepass sentinel-secret\n")
    try:

        def named() -> bool:
            try:
                with redis.Redis(port=7366, password="sentinel-secret", socket_timeout=2) as client:
                    address = client.execute_command("SENTINEL", "get-master-addr-by-name", SERVICE)
            except redis.RedisError:
                return False
            return address is not None and int(address[1]) == master.ports[0]

        assert _eventually(named, 10), "the Sentinel on 7366 did not name the master"
        url = "redis://:sentinel-secret@127.0.0.1:7366"
        with Redlock.from_sentinel(url, SERVICE, attempts=1, node_timeout=0.5) as redlock:
            lock = redlock.acquire(resource, ttl=10)
            assert lock.release().released == 1

        async def cycle() -> None:
            redlock = AsyncRedlock.from_sentinel(url, SERVICE, attempts=1, node_timeout=0.5)
            try:
                alock = await redlock.acquire(resource, ttl=10)
                assert (await alock.release()).released == 1
            finally:
                await redlock.aclose()

        asyncio.run(cycle())
        # Without the password the Sentinel refuses us: it names no master, and the
        # node fails with the cause auth.
        with Redlock.from_sentinel(
            "127.0.0.1:7366", SERVICE, attempts=1, node_timeout=0.5
        ) as redlock:
            with pytest.raises(NodesFailedError) as failed:
                redlock.acquire(resource)
            message = str(failed.value)
            assert "(auth)" in message and "authenticated" in message, message
        # One login for all the Sentinels: different ones are refused, not dropped.
        with pytest.raises(ValueError, match="different credentials"):
            Redlock.from_sentinel([url, "redis://:other@127.0.0.1:7367"], SERVICE)
        with pytest.raises(ValueError, match="without a password"):
            Redlock.from_sentinel("redis://user@127.0.0.1:7366", SERVICE)
    finally:
        sentinel.kill()
        sentinel.wait()
        master.stop()
