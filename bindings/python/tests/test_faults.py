"""Both drivers with nodes killed, frozen (SIGSTOP), refusing writes, and restarted:
real redis-server processes on base port 7320, healed after every test."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio

from redlock_core import AsyncRedlock, LockHeldError, LockLostError, NodesFailedError, Redlock

from .conftest import Nodes, long_lived_threads


def sync_redlock(nodes: Nodes, **settings: Any) -> Redlock:
    return Redlock(nodes.clients(), **settings)


def async_redlock(nodes: Nodes, **settings: Any) -> AsyncRedlock:
    return AsyncRedlock([redis.asyncio.Redis(port=port) for port in nodes.ports], **settings)


@pytest.fixture
def readonly() -> Iterator[list[int]]:
    """Makes nodes replicas of a master that does not exist: they refuse writes with
    READONLY errors. Undone after the test."""
    ports: list[int] = []
    try:
        yield ports
    finally:
        for port in ports:
            redis.Redis(port=port).replicaof("no", "one")


def make_readonly(ports: list[int], port: int) -> None:
    client = redis.Redis(port=port)
    client.config_set("replica-read-only", "yes")
    client.replicaof("127.0.0.1", 1)  # nothing listens there
    ports.append(port)


# ---- nodes down -------------------------------------------------------------------


def test_two_nodes_down_still_lock_with_detail(fault_nodes: Nodes, resource: str) -> None:
    fault_nodes.kill(3)
    fault_nodes.kill(4)
    with sync_redlock(fault_nodes) as redlock:
        with redlock.lock(resource) as lock:
            assert [n.status for n in lock.nodes[:3]] == ["success"] * 3
            lock.extend()
        assert lock.nodes[3].status in ("error", "pending")
    fault_nodes.settle(resource, [None] * 5)

    async def main() -> None:
        async with async_redlock(fault_nodes) as redlock:
            async with redlock.lock(resource) as lock:
                assert [n.status for n in lock.nodes[:3]] == ["success"] * 3

    asyncio.run(main())
    fault_nodes.settle(resource, [None] * 5)


def test_three_nodes_down_fail_as_nodes_failed_and_leave_no_key(
    fault_nodes: Nodes, resource: str
) -> None:
    for index in (0, 2, 4):
        fault_nodes.kill(index)
    with sync_redlock(fault_nodes, attempts=2, retry_delay=0.01, retry_jitter=0) as redlock:
        started = time.monotonic()
        with pytest.raises(NodesFailedError) as raised:
            redlock.acquire(resource)
        assert time.monotonic() - started < 1.0
    error = raised.value
    assert error.reason == "nodes_failed" and error.attempts == 2
    for node in error.nodes:
        assert node.label == f"localhost:{fault_nodes.ports[node.index]}"
        if node.index in (0, 2, 4):
            assert node.status in ("error", "timeout"), node
        else:
            assert node.status in ("success", "pending"), node
    texts = [node.error or "" for node in error.nodes if node.status == "error"]
    assert all("Connection" in text or "not sent" in text for text in texts), texts
    # The two live nodes were cleaned after each failed attempt.
    fault_nodes.settle(resource, [None] * 5)

    async def main() -> None:
        async with async_redlock(fault_nodes, attempts=1) as redlock:
            with pytest.raises(NodesFailedError, match="too many nodes failed"):
                await redlock.acquire(resource)

    asyncio.run(main())
    fault_nodes.settle(resource, [None] * 5)


def test_conflicts_and_failures_together_are_mixed(fault_nodes: Nodes, resource: str) -> None:
    for port in fault_nodes.ports[:2]:
        redis.Redis(port=port).set(resource, "someone", px=10_000)
    fault_nodes.kill(4)
    with sync_redlock(fault_nodes, attempts=1, node_timeout=0.5) as redlock:
        with pytest.raises(NodesFailedError) as raised:
            redlock.acquire(resource)
    assert raised.value.reason == "mixed" and not isinstance(raised.value, LockHeldError)
    fault_nodes.settle(resource, [b"someone", b"someone", None, None, None])


def test_nodes_refusing_writes_report_their_error(
    fault_nodes: Nodes, resource: str, readonly: list[int]
) -> None:
    for port in fault_nodes.ports[:3]:
        make_readonly(readonly, port)
    with sync_redlock(fault_nodes, attempts=1, node_timeout=0.5) as redlock:
        with pytest.raises(NodesFailedError) as raised:
            redlock.acquire(resource)
    errors = [node.error or "" for node in raised.value.nodes if node.status == "error"]
    assert len(errors) >= 3 and all(text.startswith("READONLY") for text in errors)
    assert raised.value.reason == "nodes_failed"


def test_a_restarted_node_comes_back_empty_and_the_lock_goes_on(
    fault_nodes: Nodes, resource: str
) -> None:
    with sync_redlock(fault_nodes) as redlock:
        with redlock.lock(resource) as lock:
            fault_nodes.kill(1)
            fault_nodes.restart(1)
            lock.extend()  # four nodes still hold the key: a quorum
            assert lock.nodes[1].status in ("conflict", "error", "pending")
            assert lock.extensions == 1
        lock2 = redlock.acquire(resource)  # the restarted node serves again
        assert lock2.release().released >= 3
    fault_nodes.settle(resource, [None] * 5)


# ---- a frozen node ----------------------------------------------------------------


@pytest.mark.parametrize(
    "client_settings",
    [{}, {"socket_timeout": 0.05}],
    ids=["redis-py defaults", "socket_timeout 50 ms with the default retries"],
)
def test_a_frozen_node_stalls_nothing_and_piles_nothing_up(
    fault_nodes: Nodes, resource: str, client_settings: dict[str, Any]
) -> None:
    fault_nodes.pause(2)
    with Redlock(fault_nodes.clients(**client_settings)) as redlock:
        times = []
        for i in range(40):
            started = time.monotonic()
            with redlock.lock(f"{resource}:{i}") as lock:
                assert lock.nodes[2].status != "success"
            times.append(time.monotonic() - started)
            if i == 20:
                time.sleep(0.1)  # past the stuck command's deadline
        assert max(times) < 0.5, f"slowest acquire+release {max(times):.3f} s"
        # One reader thread for every node, whatever the settings and however long
        # the node stays frozen: nothing waits on it but the reader's poll.
        threads = long_lived_threads(redlock)
        assert threads == [f"redlock-{redlock.serial}-reader"], threads
        # The core's link for node 2 bounds what waits for it: nothing new is written
        # to a stalled node, and what is past its deadline is dropped, not queued.
        link = redlock._engine.nodes[2].link
        assert redlock.in_flight()[2] <= 4, redlock.in_flight()
        assert link.queued <= 2 * 21 + 3, link.queued
        fault_nodes.resume(2)
        # Once the node answers again, it serves the next locks.
        deadline = time.monotonic() + 5
        while True:
            with redlock.lock(f"{resource}:after") as lock:
                time.sleep(0.01)
            if lock.nodes[2].status == "success" or time.monotonic() > deadline:
                break
        assert lock.nodes[2].status == "success"
    # What was queued for node 2 while frozen cleaned up after itself.
    for i in range(40):
        fault_nodes.settle(f"{resource}:{i}", [None] * 5)


def test_the_frozen_node_server_sees_one_connection(fault_nodes: Nodes, resource: str) -> None:
    """The pottery defect: every call stuck on a frozen node kept a thread and a pooled
    connection. Here the frozen node's server ends up with one client connection from
    the Redlock, after 100 acquire + release cycles."""
    with Redlock(fault_nodes.clients()) as redlock:
        with redlock.lock(f"{resource}:warm"):
            pass
        fault_nodes.pause(4)
        for i in range(100):
            with redlock.lock(f"{resource}:{i}"):
                pass
            if i == 10:
                time.sleep(0.06)
        fault_nodes.resume(4)
        time.sleep(0.2)
        clients = redis.Redis(port=fault_nodes.ports[4]).client_list()
        # Ours plus the one that asks.
        assert len(clients) <= 2, clients


def test_an_interrupted_acquisition_cleans_up(fault_nodes: Nodes, resource: str) -> None:
    """Ctrl-C (here a signal handler raising) while an acquisition waits: the keys the
    attempt wrote are released."""
    for port in fault_nodes.ports[:2]:
        redis.Redis(port=port).set(resource, "someone", px=10_000)
    fault_nodes.pause(4)

    class Interrupted(Exception):
        pass

    def interrupt(signum: int, frame: object) -> None:
        raise Interrupted

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        with Redlock(fault_nodes.clients(), ttl=10, node_timeout=1.0, attempts=1) as redlock:
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            with pytest.raises(Interrupted):
                redlock.acquire(resource)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    fault_nodes.settle(resource, [b"someone", b"someone", None, None, None])


def test_async_frozen_node_with_default_clients(fault_nodes: Nodes, resource: str) -> None:
    fault_nodes.pause(0)

    async def main() -> float:
        async with async_redlock(fault_nodes) as redlock:
            slowest = 0.0
            for i in range(40):
                started = time.monotonic()
                async with redlock.lock(f"{resource}:{i}") as lock:
                    lock.check()
                slowest = max(slowest, time.monotonic() - started)
                if i == 20:
                    await asyncio.sleep(0.1)
            return slowest

    assert asyncio.run(main()) < 0.5


def test_connections_closed_by_the_server_are_reopened(fault_nodes: Nodes, resource: str) -> None:
    """A kept connection the server dropped while idle (its `timeout`, a proxy) is
    noticed before the next write: no node fails for it."""

    def drop_connections() -> None:
        for port in fault_nodes.ports:
            redis.Redis(port=port).client_kill_filter(_type="normal", skipme=True)
        time.sleep(0.05)

    with sync_redlock(fault_nodes) as redlock:
        with redlock.lock(f"{resource}:warm"):
            pass
        fault_nodes.settle(f"{resource}:warm", [None] * 5)
        drop_connections()
        with redlock.lock(resource) as lock:
            fault_nodes.settle(resource, [lock.token.encode()] * 5)

    async def main() -> None:
        async with async_redlock(fault_nodes) as redlock:
            async with redlock.lock(f"{resource}:warm"):
                pass
            await asyncio.sleep(0.05)
            drop_connections()
            async with redlock.lock(f"{resource}:async") as lock:
                await asyncio.sleep(0.05)
                assert fault_nodes.values(f"{resource}:async") == [lock.token.encode()] * 5

    asyncio.run(main())
    fault_nodes.settle(resource, [None] * 5)


def test_auto_extension_retries_through_failing_nodes(fault_nodes: Nodes, resource: str) -> None:
    """Three nodes frozen when the extension is due: it fails, the core says when to
    retry, the retries go on until the nodes answer again, and the lock is kept (sync
    and asyncio at once, on the same nodes)."""
    lost: list[Any] = []
    async_result: dict[str, Any] = {}
    ready = threading.Event()
    done = threading.Event()

    async def hold_async() -> None:
        async with async_redlock(fault_nodes) as redlock:
            lock = await redlock.acquire(
                f"{resource}:a", ttl=6, auto_extend=True, on_lost=lost.append
            )
            ready.set()
            while not done.is_set():
                await asyncio.sleep(0.05)
            async_result["extensions"] = lock.extensions
            async_result["valid"] = lock.is_valid
            await lock.release()

    holder = threading.Thread(target=lambda: asyncio.run(hold_async()))
    holder.start()
    try:
        assert ready.wait(5)
        with sync_redlock(fault_nodes) as redlock:
            lock = redlock.acquire(f"{resource}:s", ttl=6, auto_extend=True, on_lost=lost.append)
            time.sleep(3.0)
            for index in (0, 1, 2):
                fault_nodes.pause(index)
            # The first extension is due about 4 s after acquiring; it and its retries
            # fail until the nodes answer again.
            time.sleep(max(0.0, lock.valid_until - 1.2 - time.monotonic()))
            failed = [node.status for node in lock.nodes]
            for index in (0, 1, 2):
                fault_nodes.resume(index)
            time.sleep(0.8)
            assert not lost, lost
            assert lock.extensions == 1 and lock.check() > 4.0
            assert failed.count("success") < 3  # an extension did fail meanwhile
            lock.release()
    finally:
        done.set()
        holder.join(10)
    assert async_result == {"extensions": 1, "valid": True}


def test_an_auto_extended_lock_whose_nodes_stay_down_is_signalled_lost(
    fault_nodes: Nodes, resource: str
) -> None:
    lost = threading.Event()
    with sync_redlock(fault_nodes) as redlock:
        lock = redlock.acquire(resource, ttl=1, auto_extend=True, on_lost=lambda e: lost.set())
        for index in (0, 1, 2):
            fault_nodes.pause(index)
        assert lost.wait(2.0)
        with pytest.raises(LockLostError) as raised:
            lock.check()
        # Expired while waiting, or found expired by a round that ended too late.
        assert raised.value.reason in ("expired", "nodes_failed")
        assert lock.lost and lock.extensions == 0
